"""Virtual time: one heap of timed callbacks, run in (time, order of scheduling) order.

A lean event heap instead of SimPy processes: a simulated step books a few dozen timed
actions, and the simulator's speed is bounded by what each of them costs. Every action is a
plain call ``fn(arg)``; work that waits is written as a chain of such calls.
"""

from __future__ import annotations

import gc
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from heapq import heappop, heappush
from typing import Any

Callback = Callable[[Any], None]


URGENT = -(1 << 62)  # added to an urgent action's order key: before any other due then


class Clock:
    """The simulator's clock and its agenda. Actions at equal times run in the order they
    were scheduled, so a run is a deterministic function of its inputs; an `urgent` action
    runs before the others due at its time."""

    def __init__(self) -> None:
        self.now = 0.0
        self._agenda: list[tuple[float, int, Callback, Any]] = []
        self._scheduled = 0

    def at(self, time: float, fn: Callback, arg: Any = None) -> None:
        """Call ``fn(arg)`` at virtual time `time` (not before now)."""
        assert time >= self.now, (time, self.now)
        self._scheduled += 1
        heappush(self._agenda, (time, self._scheduled, fn, arg))

    def soon(self, fn: Callback, arg: Any = None, urgent: bool = False) -> None:
        """Call ``fn(arg)`` now, once the current action returned: after the actions already
        due now, or (`urgent`) before them."""
        self._scheduled += 1
        order = self._scheduled + URGENT if urgent else self._scheduled
        heappush(self._agenda, (self.now, order, fn, arg))

    def fan_out(self, fn: Callback, requests: list[Any]) -> None:
        """Send `fn(requests)`: a lone request at once, several concurrent ones once the
        current action returned, ahead of the other actions due now."""
        if len(requests) == 1:
            fn(requests)
        else:
            self.soon(fn, requests, urgent=True)

    def run(self, until: float | None = None) -> None:
        """Run actions until none is left, or until the next one is due at `until` or later."""
        agenda = self._agenda
        if until is None:
            while agenda:
                self.now, _, fn, arg = heappop(agenda)
                fn(arg)
            return
        while agenda:
            if agenda[0][0] >= until:
                self.now = until
                return
            self.now, _, fn, arg = heappop(agenda)
            fn(arg)


class Lane:
    """Actions that come due in the order they are scheduled (one FIFO server's completions:
    times never decrease). Only the first of them waits on the clock's agenda, so the agenda
    stays small when many queue (a thousand workers at one reader); each keeps the place in
    the order it was given when scheduled, so actions run exactly as if all were on it."""

    __slots__ = ("clock", "waiting")

    def __init__(self, clock: Clock):
        self.clock = clock
        self.waiting: deque[tuple[float, int, Callback, Any]] = deque()

    def at(self, time: float, fn: Callback, arg: Any = None) -> None:
        """Call ``fn(arg)`` at `time`: not before now, nor before the lane's last action."""
        clock, waiting = self.clock, self.waiting
        assert time >= clock.now, (time, clock.now)
        clock._scheduled += 1
        if waiting:
            assert time >= waiting[-1][0], (time, waiting[-1][0])
        else:
            heappush(clock._agenda, (time, clock._scheduled, self._first, None))
        waiting.append((time, clock._scheduled, fn, arg))

    def _first(self, _: Any) -> None:
        waiting = self.waiting
        _, _, fn, arg = waiting.popleft()
        if waiting:
            time, order, _, _ = waiting[0]
            heappush(self.clock._agenda, (time, order, self._first, None))
        fn(arg)


class Signal:
    """Something waiters re-check when it changes (a server's version moved, a worker left):
    `fire` wakes every current waiter once, after the actions already due now."""

    def __init__(self, clock: Clock):
        self.clock = clock
        self._waiters: list[tuple[Callback, Any]] = []

    def wait(self, fn: Callback, arg: Any = None) -> None:
        self._waiters.append((fn, arg))

    def fire(self) -> None:
        if self._waiters:
            waiters, self._waiters = self._waiters, []
            self.clock.soon(_wake_all, waiters)


def _wake_all(waiters: list[tuple[Callback, Any]]) -> None:
    for fn, arg in waiters:
        fn(arg)


class Gather:
    """Collects the results of `count` concurrent calls, then hands the list to `then`."""

    __slots__ = ("results", "missing", "then")

    def __init__(self, count: int, then: Callback):
        self.results: list[Any] = [None] * count
        self.missing = count
        self.then = then

    def deliver(self, item: tuple[int, Any]) -> None:
        index, value = item
        self.results[index] = value
        self.missing -= 1
        if not self.missing:
            self.then(self.results)


YOUNG_OBJECTS = 20_000  # the collector's first threshold while a job runs


@contextmanager
def young_collections() -> Iterator[None]:
    """While a simulated job runs: what exists before it (modules, the job's nodes) stays
    out of the collector's full passes, which would otherwise re-scan it every time; and a
    young collection comes every YOUNG_OBJECTS allocations, not every 700 (a step's
    short-lived objects die before one, so fewer reach the older generations, whose passes
    re-scan every live worker's state: seconds at 10,000 workers)."""
    frozen_by_caller = gc.get_freeze_count()
    gc.freeze()
    thresholds = gc.get_threshold()
    gc.set_threshold(max(thresholds[0], YOUNG_OBJECTS), *thresholds[1:])
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)
        if not frozen_by_caller:
            gc.unfreeze()
