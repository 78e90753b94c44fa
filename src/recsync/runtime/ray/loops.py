"""Runs a node's loops on real threads, one handler per effect type: messages become Ray
calls to the peers' actors, collectives go through gloo, waits use one condition per node.
Time blocked and effects yielded are counted by effect label; bytes by message kind."""

from __future__ import annotations

import os
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import ray
import torch
import torch.distributed as dist

from recsync.coordinator.outcome import NodeMeasures
from recsync.protocol.address import Address
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
from recsync.protocol.messages import Message, wire_bytes
from recsync.protocol.node import LoopSpec
from recsync.runtime.ray import wire
from recsync.runtime.ray.errors import NodeFailure, failure
from recsync.runtime.ray.peers import Peers, Sent

REPLY_WAIT_S = 1_000.0  # the longest a call waits for its reply (servers bound their waits)
POLL_S = 0.05  # an Await of the next notification re-checks at least this often
BACKGROUND_NICE = 10  # a background loop (shadow sync) only takes CPU the workers leave idle


class _LoopState:
    """Per loop: its sends still in flight (with their targets), and a request sent ahead
    of time."""

    def __init__(self) -> None:
        self.pending: list[Sent] = []
        self.prefetched: dict[Address, Sent] = {}
        self.resumed = time.perf_counter()


Handler = Callable[[_LoopState, Any], Any]


class LoopDriver:
    """Drives one node's loops; shared by their threads."""

    def __init__(
        self,
        name: str,
        peers: Peers,
        start: float,
        slowdown: Callable[[float], float],
        measures: NodeMeasures,
        counting: threading.Lock,
    ):
        self.name, self.peers, self.start, self.slowdown = name, peers, start, slowdown
        self.measures, self.counting = measures, counting
        self.cond = threading.Condition()
        self.generation: dict[str, int] = defaultdict(int)
        self.failed = False
        self.group: Any = None
        self._handlers: dict[type, Handler] = {
            Call: self._call,
            CallEach: self._call_each,
            Send: self._send,
            Drain: self._drain,
            Compute: self._compute,
            AllReduce: self._allreduce,
            Now: self._now,
            Await: self._await,
            Notify: self._notify,
        }

    def run(self, specs: list[LoopSpec]) -> None:
        """Run every loop on its own thread; raise the first failure (a failed loop wakes
        the others' waits, which then fail too)."""
        errors: list[BaseException] = []

        def guarded(spec: LoopSpec) -> None:
            if spec.background:
                os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), BACKGROUND_NICE)
            try:
                self.drive(spec)
            except BaseException as error:  # noqa: BLE001 - reported to the coordinator
                errors.append(error)
                with self.cond:
                    self.failed = True
                    self.cond.notify_all()

        threads = [threading.Thread(target=guarded, args=(s,), daemon=True) for s in specs]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if errors:
            first = next((e for e in errors if not isinstance(e, _PeerFailed)), errors[0])
            if isinstance(first, NodeFailure):
                raise first
            raise NodeFailure(f"{self.name} failed: {type(first).__name__}: {first}") from first

    def drive(self, spec: LoopSpec) -> None:
        """Run one loop to its end on the calling thread."""
        state, loop, result = _LoopState(), spec.loop, None
        try:
            while True:
                try:
                    effect = loop.send(result)
                except StopIteration:
                    break
                handler = self._handlers.get(type(effect))
                if handler is None:
                    raise UnhandledEffect(f"the Ray engine has no handler for {effect!r}")
                started = time.perf_counter()
                result = handler(state, effect)
                computed = started - state.resumed  # the step's math, before it yielded
                state.resumed = time.perf_counter()
                self._count(effect, state.resumed - started, spec.worker, computed)
        finally:
            if state.pending:
                self._get_each(state.pending)

    def _count(self, effect: Effect, seconds: float, worker: int | None, computed: float) -> None:
        """Count the effect and its seconds; a worker's Compute also as that worker's step
        (`computed`: the math before it yielded; `seconds`: a straggler's extra sleep)."""
        with self.counting:
            self.measures.blocked[effect.label] += seconds
            self.measures.effects[effect.label] += 1
            if worker is not None and isinstance(effect, Compute):
                self.measures.count_compute(worker, computed + seconds)

    def _sent(self, message: Message) -> Any:
        with self.counting:
            self.measures.bytes_sent[message.kind] += wire_bytes(message)
            self.measures.calls[message.kind] += 1
        return wire.encode(message)

    def _get(self, sent: Sent, timeout: float = REPLY_WAIT_S) -> Any:
        """The reply of one call; its failure names its target. A call to a lost node the
        job replaces is sent again to its replacement."""
        while True:
            try:
                return ray.get(sent.ref, timeout=timeout)
            except ray.exceptions.GetTimeoutError:
                raise NodeFailure(
                    f"{self.name}: no answer from {sent.target} within {timeout:.0f} s"
                ) from None
            except (ray.exceptions.RayActorError, ray.exceptions.RayTaskError) as error:
                lost = isinstance(error, ray.exceptions.RayActorError)
                if not lost or sent.target.role not in self.peers.replaceable:
                    raise failure(sent.target.name, error) from None
                handle, incarnation = self.peers.successor(sent, self.name)
                ref = handle.call.remote(self._sent(sent.message))
                sent = Sent(ref, sent.target, sent.message, incarnation)

    def _get_each(self, calls: list[Sent]) -> list[Any]:
        """The replies of calls made together, in order."""
        return [self._get(sent) for sent in calls]

    def _remote(self, target: Address, message: Message) -> Sent:
        handle, incarnation = self.peers[target]
        return Sent(handle.call.remote(self._sent(message)), target, message, incarnation)

    def _call(self, state: _LoopState, effect: Call) -> Any:
        target, message = effect.target, effect.message
        sent = state.prefetched.pop(target, None) if message.prefetchable else None
        if sent is None:
            sent = self._remote(target, message)
        reply = wire.decode(self._get(sent))
        if message.prefetchable and not reply.last:
            state.prefetched[target] = self._remote(target, message)
        return reply

    def _call_each(self, state: _LoopState, effect: CallEach) -> list[Any]:
        calls = [self._remote(t, m) for t, m in effect.calls]
        quorum = effect.quorum
        if quorum is None:
            return [wire.decode(reply) for reply in self._get_each(calls)]
        refs = [sent.ref for sent in calls]
        started = time.perf_counter()
        ray.wait(refs, num_returns=quorum.need)
        left = started + quorum.wait_s - time.perf_counter()
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=max(left, 0.0))
        arrived = set(ready)
        return [wire.decode(self._get(sent)) if sent.ref in arrived else None for sent in calls]

    def _send(self, state: _LoopState, effect: Send) -> None:
        state.pending.extend(self._remote(t, m) for t, m in effect.calls)
        bound = 2 * len(effect.calls)  # at most about two steps of sends in flight
        if len(state.pending) > bound:
            refs = [sent.ref for sent in state.pending]
            done, _ = ray.wait(refs, num_returns=len(refs) - bound)
            finished = set(done)
            self._get_each([sent for sent in state.pending if sent.ref in finished])
            state.pending = [sent for sent in state.pending if sent.ref not in finished]

    def _drain(self, state: _LoopState, effect: Drain) -> None:
        if state.pending:
            self._get_each(state.pending)
            state.pending = []

    def _compute(self, state: _LoopState, effect: Compute) -> None:
        now = time.perf_counter()
        slowdown = self.slowdown(now - self.start)
        if slowdown > 1.0:  # an emulated straggler: its compute took longer
            time.sleep((slowdown - 1.0) * (now - state.resumed))

    def _allreduce(self, state: _LoopState, effect: AllReduce) -> tuple[torch.Tensor, int]:
        with self.counting:
            self.measures.bytes_sent["AllReduce"] += wire_bytes(effect.values)
            self.measures.calls["AllReduce"] += 1
        flag = torch.tensor([1.0 if effect.done else 0.0])
        buffer = torch.cat([effect.values, flag])
        dist.all_reduce(buffer, op=dist.ReduceOp.SUM, group=self.group)
        world = dist.get_world_size(self.group)
        return buffer[:-1] / world, int(round(float(buffer[-1])))

    def _now(self, state: _LoopState, effect: Now) -> float:
        return time.perf_counter() - self.start

    def _await(self, state: _LoopState, effect: Await) -> None:
        until, channel = effect.until, effect.channel
        with self.cond:
            generation = self.generation[channel]
            deadline = time.perf_counter() + REPLY_WAIT_S
            while not (until() if until is not None else self.generation[channel] != generation):
                if self.failed:
                    raise _PeerFailed(f"{self.name}: another of its loops failed")
                left = deadline - time.perf_counter()
                if left <= 0:
                    raise NodeFailure(f"{self.name}: waited {REPLY_WAIT_S:.0f} s on {channel}")
                self.cond.wait(timeout=min(left, POLL_S))
                if until is None:
                    return  # the loop re-checks what it waits for

    def wake(self) -> None:
        """A message changed the node: its loops' Awaits re-check what they wait for."""
        with self.cond:
            self.cond.notify_all()

    def _notify(self, state: _LoopState, effect: Notify) -> None:
        with self.cond:
            self.generation[effect.channel] += 1
            self.cond.notify_all()


class _PeerFailed(NodeFailure):
    """A wait ended because another loop of the same node failed (not the first error)."""
