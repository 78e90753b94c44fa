"""Runs one node loop (a worker thread's steps, a sync loop) in virtual time."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from recsync.protocol.effects import Compute, Effect, Loop
from recsync.runtime.sim.clock import Clock
from recsync.runtime.sim.host import SimHost

COMPUTE = Compute.__name__  # the label of a step's math
Dispatch = Callable[["LoopRunner", Effect], None]


class LoopRunner:
    """Sends each effect of `loop` to `dispatch`, which calls `resume(result)` when the
    effect completes (at once, or later in virtual time); then the loop goes on.

    Time between an effect and its result is added to the host's blocked time under the
    effect's label, and each effect counted. From virtual time `crash_at` on (None: never),
    the loop is closed before its next effect and `on_crash` called instead. A killed loop
    (its process was lost) is closed at once; results that come for it later are dropped.
    """

    def __init__(
        self,
        clock: Clock,
        host: SimHost,
        worker: int | None,
        loop: Loop,
        dispatch: Dispatch,
        crash_at: float | None,
        on_finish: Callable[[LoopRunner], None],
        on_crash: Callable[[LoopRunner], None],
    ):
        self.clock = clock
        self.host, self.worker = host, worker
        self.loop = loop
        self.dispatch = dispatch
        self.blocked = host.measures.blocked
        self.effects = host.measures.effects
        self.crash_at = crash_at
        self.on_finish, self.on_crash = on_finish, on_crash
        self._effect: str | None = None
        self._started = 0.0
        self._dispatching = False
        self._answered = False
        self._result: Any = None
        self.dead = False
        self.ahead: dict[Any, Any] = {}  # the transport's requests sent ahead of the loop

    def start(self) -> None:
        self.clock.soon(self._run)

    def kill(self) -> None:
        """The loop's process was lost: the loop ends now, whatever it waited for."""
        assert not self._dispatching, "a loop is killed between effects"
        self.dead = True
        self.loop.close()

    def resume(self, result: Any = None) -> None:
        """The current effect's result: called by whoever completes the effect."""
        if self.dead:
            return
        if self._dispatching:  # completed at once: the loop in _run goes on
            self._answered, self._result = True, result
        else:
            self._run(result)

    def _run(self, result: Any) -> None:
        clock, loop = self.clock, self.loop
        while True:
            if self._effect is not None:
                seconds = clock.now - self._started
                self.blocked[self._effect] += seconds
                if self._effect == COMPUTE and self.worker is not None:
                    self.host.measures.count_compute(self.worker, seconds)
            if self.crash_at is not None and clock.now >= self.crash_at:
                loop.close()
                self.on_crash(self)
                return
            try:
                effect = loop.send(result)
            except StopIteration:
                self.on_finish(self)
                return
            label = effect.label
            self.effects[label] += 1
            self._effect, self._started = label, clock.now
            self._dispatching, self._answered = True, False
            self.dispatch(self, effect)
            self._dispatching = False
            if not self._answered:
                return
            result, self._result = self._result, None
