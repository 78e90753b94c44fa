"""Runs a node's loops on real threads, one handler per effect type: messages go to the
peers over the loop's own connections (transport/channel.py), collectives go through
gloo, waits use one condition per node.
Time blocked and effects yielded are counted by effect label; bytes by message kind."""

from __future__ import annotations

import os
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist

from recsync.coordinator.hosting import HostedNode
from recsync.protocol.address import Address
from recsync.protocol.effects import (
    SENDS_IN_FLIGHT,
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
from recsync.protocol.messages import Message
from recsync.protocol.node import LoopSpec
from recsync.runtime.ray.errors import NodeFailure, failure
from recsync.runtime.thread_cpu import OTHER_LOOPS, WORKER_LOOPS, counted
from recsync.runtime.transport import channel, wire
from recsync.runtime.transport.channel import Connection, Endpoint
from recsync.runtime.transport.errors import ChannelClosed, RemoteError
from recsync.runtime.transport.peers import Peers, Sent

POLL_S = 0.05  # an Await of the next notification re-checks at least this often
BACKGROUND_NICE = 10  # a background loop (shadow sync) only takes CPU the workers leave idle


class _LoopState:
    """Per loop: its connections to its peers, its sends still in flight (with their
    targets), and a request sent ahead of time."""

    def __init__(self) -> None:
        self.connections: dict[Endpoint, Connection] = {}
        self.pending: list[Sent] = []
        self.prefetched: dict[Address, Sent] = {}
        self.resumed = time.perf_counter()

    def connection(self, endpoint: Endpoint) -> Connection:
        connection = self.connections.get(endpoint)
        if connection is None or connection.broken is not None:
            connection = self.connections[endpoint] = Connection(endpoint)
        return connection

    def close(self) -> None:
        for connection in self.connections.values():
            connection.close()


Handler = Callable[[_LoopState, Any], Any]


class LoopDriver:
    """Drives one node's loops; shared by their threads."""

    def __init__(
        self,
        name: str,
        peers: Peers,
        start: float,
        hosted: HostedNode,
        counting: threading.Lock,
        ring: Callable[[], None] | None = None,
    ):
        self.name, self.peers, self.start, self.hosted = name, peers, start, hosted
        self.measures, self.counting = hosted.measures, counting
        self.ring = ring  # wakes the node's loops in its other processes (wakeup.py)
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

        threads = [
            threading.Thread(target=counted(_thread_kind(s), guarded), args=(s,), daemon=True)
            for s in specs
        ]
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
            try:
                if state.pending:
                    self._get_each(state, state.pending)
            finally:
                state.close()

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
            self.hosted.count_sent(message)
        return wire.encode(message)

    def _get(self, state: _LoopState, sent: Sent) -> Any:
        """The reply of one call; its failure names its target. A call to a lost node the
        job replaces is sent again to its replacement."""
        timeout = self.peers.waits.reply_s
        while True:
            try:
                return sent.ticket.result(timeout)
            except TimeoutError:
                raise NodeFailure(
                    f"{self.name}: no answer from {sent.target} within {timeout:.0f} s"
                ) from None
            except (ChannelClosed, RemoteError) as error:
                lost = isinstance(error, ChannelClosed)
                if not lost or sent.target.role not in self.peers.replaceable:
                    raise failure(sent.target.name, error) from None
                replaced = self.peers.successor(sent)
                if replaced is None:
                    raise NodeFailure(
                        f"{self.name}: {sent.target} was lost and not replaced within "
                        f"{self.peers.waits.replace_s:.0f} s",
                        lost=sent.target.name,
                    ) from None
                endpoint, incarnation = replaced
                ticket = state.connection(endpoint).request(self._sent(sent.message))
                sent = Sent(ticket, sent.target, sent.message, incarnation)

    def _get_each(self, state: _LoopState, calls: list[Sent]) -> list[Any]:
        """The replies of calls made together, in order."""
        return [self._get(state, sent) for sent in calls]

    def _wait(self, calls: list[Sent], need: int) -> None:
        """Until `need` of `calls` are answered (a peer that never answers is named)."""
        if not channel.wait([sent.ticket for sent in calls], need, self.peers.waits.reply_s):
            waiting = sorted({str(s.target) for s in calls if not s.ticket.done})
            raise NodeFailure(f"{self.name}: no answer from {', '.join(waiting)}")

    def _remote(self, state: _LoopState, target: Address, message: Message) -> Sent:
        endpoint, incarnation = self.peers[target]
        ticket = state.connection(endpoint).request(self._sent(message))
        return Sent(ticket, target, message, incarnation)

    def _call(self, state: _LoopState, effect: Call) -> Any:
        target, message = effect.target, effect.message
        sent = state.prefetched.pop(target, None) if message.prefetchable else None
        if sent is None:
            sent = self._remote(state, target, message)
        reply = wire.decode(self._get(state, sent))
        if message.asks_again(reply):
            state.prefetched[target] = self._remote(state, target, message)
        return reply

    def _call_each(self, state: _LoopState, effect: CallEach) -> list[Any]:
        calls = [self._remote(state, t, m) for t, m in effect.calls]
        quorum = effect.quorum
        if quorum is None:
            return [wire.decode(reply) for reply in self._get_each(state, calls)]
        started = time.perf_counter()
        self._wait(calls, quorum.need)
        left = started + quorum.wait_s - time.perf_counter()
        channel.wait([sent.ticket for sent in calls], len(calls), max(left, 0.0))
        return [wire.decode(self._get(state, sent)) if sent.ticket.done else None for sent in calls]

    def _send(self, state: _LoopState, effect: Send) -> None:
        state.pending.extend(self._remote(state, t, m) for t, m in effect.calls)
        bound = SENDS_IN_FLIGHT * len(effect.calls)  # at most about two steps of sends
        if len(state.pending) > bound:
            self._wait(state.pending, len(state.pending) - bound)
            self._get_each(state, [sent for sent in state.pending if sent.ticket.done])
            state.pending = [sent for sent in state.pending if not sent.ticket.done]

    def _drain(self, state: _LoopState, effect: Drain) -> None:
        if state.pending:
            self._get_each(state, state.pending)
            state.pending = []

    def _compute(self, state: _LoopState, effect: Compute) -> None:
        now = time.perf_counter()
        slowdown = self.hosted.slowdown(now - self.start)
        if slowdown > 1.0:  # an emulated straggler: its compute took longer
            time.sleep((slowdown - 1.0) * (now - state.resumed))

    def _allreduce(self, state: _LoopState, effect: AllReduce) -> tuple[torch.Tensor, int]:
        with self.counting:
            self.hosted.count_all_reduce(effect.values)
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
            waited = self.peers.waits.reply_s
            deadline = time.perf_counter() + waited
            while not (until() if until is not None else self.generation[channel] != generation):
                if self.failed:
                    raise _PeerFailed(f"{self.name}: another of its loops failed")
                left = deadline - time.perf_counter()
                if left <= 0:
                    raise NodeFailure(f"{self.name}: waited {waited:.0f} s on {channel}")
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
        if self.ring is not None:
            self.ring()


class _PeerFailed(NodeFailure):
    """A wait ended because another loop of the same node failed (not the first error)."""


def _thread_kind(spec: LoopSpec) -> str:
    return WORKER_LOOPS if spec.worker is not None else OTHER_LOOPS
