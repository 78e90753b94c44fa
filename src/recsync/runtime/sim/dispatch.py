"""Effects in virtual time: one handler per effect type; an effect with none is an error."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from recsync.protocol.effects import (
    AllReduce,
    Await,
    Call,
    CallEach,
    Compute,
    Drain,
    Effect,
    Notify,
    Now,
    Send,
    UnhandledEffect,
)
from recsync.runtime.sim.clock import Clock
from recsync.runtime.sim.cost import WorkerSpeeds
from recsync.runtime.sim.host import Waiter
from recsync.runtime.sim.network import Collective, Network
from recsync.runtime.sim.runner import LoopRunner
from recsync.runtime.sim.transport import Transport

Handler = Callable[[LoopRunner, Any], None]


class EffectDispatch:
    """Turns the effects of a simulated job's loops into timed actions."""

    def __init__(
        self,
        clock: Clock,
        network: Network,
        transport: Transport,
        speeds: WorkerSpeeds,
        flops_per_example: int,
        collectives: dict[Any, tuple[Collective, int]],
    ):
        self.clock, self.network, self.transport = clock, network, transport
        self.speeds, self.flops_per_example = speeds, flops_per_example
        self.collectives = collectives  # a node's collective and its rank in it
        self._handlers: dict[type, Handler] = {
            Call: transport.call,
            CallEach: transport.call_each,
            Send: self._send,
            Drain: transport.drain,
            Compute: self._compute,
            AllReduce: self._allreduce,
            Now: self._now,
            Await: self._await,
            Notify: self._notify,
        }

    def __call__(self, runner: LoopRunner, effect: Effect) -> None:
        handler = self._handlers.get(type(effect))
        if handler is None:
            raise UnhandledEffect(f"the simulator has no handler for {type(effect).__name__}")
        handler(runner, effect)

    def _send(self, runner: LoopRunner, effect: Send) -> None:
        self.transport.send(runner, effect.sender, effect.calls)

    def _compute(self, runner: LoopRunner, effect: Compute) -> None:
        assert runner.worker is not None, "only a worker's loop computes"
        flops = effect.flops
        if flops is None:
            flops = effect.examples * self.flops_per_example
            if not effect.applies:
                flops *= 1.0 - self.speeds.cost.apply_share
        now = self.clock.now
        seconds = self.speeds.compute_s(runner.worker, flops, now) * runner.host.slowdown(now)
        self.network.work(runner.host.machine, seconds, runner.resume)

    def _allreduce(self, runner: LoopRunner, effect: AllReduce) -> None:
        assert runner.host.address in self.collectives, "the node is in no collective"
        runner.host.count_all_reduce(effect.values)
        collective, rank = self.collectives[runner.host.address]
        collective.contribute(rank, effect.values, effect.done, runner.resume)

    def _now(self, runner: LoopRunner, effect: Now) -> None:
        runner.resume(self.clock.now)

    def _await(self, runner: LoopRunner, effect: Await) -> None:
        until = effect.until
        if until is not None and until():
            runner.resume(None)
        else:
            runner.host.waiters.setdefault(effect.channel, []).append((until, runner.resume))

    def _notify(self, runner: LoopRunner, effect: Notify) -> None:
        waiters = runner.host.waiters.get(effect.channel)
        if waiters:
            keep: list[Waiter] = []
            for until, resume in waiters:
                if until is None or until():
                    self.clock.soon(resume)
                else:
                    keep.append((until, resume))
            runner.host.waiters[effect.channel] = keep
        runner.resume(None)
