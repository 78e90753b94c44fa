"""How a driver hosts a node: the rules both drivers share, written once. Each driver keeps
only how it carries time and threads (the simulator's virtual CPUs and network, the Ray
engine's threads, locks and condition variables).

- A `Fused` message is split (`split`): its push is applied on arrival, first; then its
  request is answered as it would be alone.
- A request waits (`waits`) while its node defers it: the node is not `ready` for it. A
  waiting request is re-checked whenever a node moved.
- Handling a message (`handle`) that `mutates` the node moves it (`after`): the driver
  re-checks the waiting requests, wakes the node's loops (their `Await`s re-check), and arms
  the timers the node asked for. A fired timer (`fire`) moves the node too, but wakes no loop.
- A slowed node (an emulated straggler or slow server) takes `slowdown` times as long to
  handle a message or compute a step.
- A node counts, by message kind, the bytes and calls of the messages it sends
  (`count_sent`), and the bytes of the replies it gives, unless a reply carries nothing
  (`count_reply`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, Self, TypeVar

import torch

from recsync.coordinator.outcome import NodeMeasures
from recsync.protocol.messages import Fused, Message, wire_bytes
from recsync.protocol.node import Node, StartTimer

ALL_REDUCE = "AllReduce"  # a collective's kind in the measures

Slowdown = Callable[[float], float]  # seconds from the job's start -> the node's slowdown
Observer = Callable[[Message, Any], None]


Host = TypeVar("Host", bound="HostedNode", contravariant=True)


class Wakes(Protocol[Host]):
    """What a driver does when a node it hosts moved."""

    def requests(self, host: Host) -> None:
        """The requests waiting for some node to be `ready` re-check."""

    def loops(self, host: Host) -> None:
        """The host's loops re-check what their `Await`s wait for."""

    def arm(self, host: Host, timer: StartTimer) -> None:
        """Call `host.fire(timer.timer_id, ...)` after `timer.seconds`."""


class HostedNode:
    """One node as a driver hosts it: the node, what the driver measures of it, its slowdown
    (None: never slowed), and who is told of every message it answered (the job's record of
    handed batches)."""

    __slots__ = ("node", "measures", "defers", "arms_timers", "slowdown_at", "observer")

    def __init__(
        self, node: Node, measures: NodeMeasures | None = None, slowdown_at: Slowdown | None = None
    ):
        self.node = node
        self.measures = NodeMeasures() if measures is None else measures
        self.defers = type(node).defers
        self.arms_timers = type(node).arms_timers
        self.slowdown_at = slowdown_at
        self.observer: Observer | None = None

    @staticmethod
    def split(message: Message) -> tuple[Message | None, Message]:
        """A fused message's push (applied first, on arrival) and its request; any other
        message has no push."""
        if isinstance(message, Fused):
            return message.push, message.request
        return None, message

    def waits(self, message: Message) -> bool:
        """Whether `message` must wait until the node moved (the node cannot answer it yet)."""
        return message.may_wait and self.defers and not self.node.ready(message)

    def handle(self, message: Message) -> Any:
        """The node's reply to `message` (a push or request, never a fused pair); then call
        `after`, once the handling's time was spent."""
        reply = self.node.handle(message)
        if self.observer is not None:
            self.observer(message, reply)
        return reply

    def after(self, message: Message, wakes: Wakes[Self]) -> None:
        """`message` was handled: a mutating one moved the node."""
        if message.mutates:
            wakes.requests(self)
            wakes.loops(self)
            if self.arms_timers:
                for timer in self.node.take_timers():
                    wakes.arm(self, timer)

    def fire(self, timer_id: int, wakes: Wakes[Self]) -> None:
        """A timer the node asked for is due."""
        self.node.timer(timer_id)
        wakes.requests(self)
        for timer in self.node.take_timers():
            wakes.arm(self, timer)

    def slowdown(self, seconds: float) -> float:
        """How many times as long the node takes, `seconds` after the job's start."""
        return 1.0 if self.slowdown_at is None else self.slowdown_at(seconds)

    def count_sent(self, message: Message) -> int:
        """The node sends `message`: its bytes (returned) and one call, by its kind."""
        size = wire_bytes(message)
        measures = self.measures
        measures.bytes_sent[message.kind] += size
        measures.calls[message.kind] += 1
        return size

    def count_reply(self, message: Message, reply: Any) -> int:
        """The node answers `message` with `reply`: its bytes (returned; counted unless the
        message's reply carries nothing)."""
        size = wire_bytes(reply)
        if message.answered:
            self.measures.bytes_sent[message.kind] += size
        return size

    def count_all_reduce(self, values: torch.Tensor) -> None:
        """The node contributes `values` to a collective."""
        self.measures.bytes_sent[ALL_REDUCE] += wire_bytes(values)
        self.measures.calls[ALL_REDUCE] += 1
