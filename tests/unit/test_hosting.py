"""The hosting rules both drivers share (coordinator/hosting.py), driven message by message
as a driver would: split, wait, handle, wake, arm, fire, slow down, count."""

from __future__ import annotations

from typing import Any, ClassVar

import torch

from recsync.coordinator.hosting import HostedNode
from recsync.families.gradient.messages import DenseBlock, PullDense, PushDenseGradient
from recsync.protocol.messages import HEADER_BYTES, Fused, Message, wire_bytes
from recsync.protocol.node import Node, StartTimer


class Versioned(Node):
    """A dense server in miniature: each push moves its version and asks for a timer;
    a pull waits for the version it names."""

    handles: ClassVar[dict[type[Message], str]] = {
        PullDense: "pull",
        PushDenseGradient: "push",
    }
    defers = True
    arms_timers = True

    def __init__(self) -> None:
        self.version = 0
        self.asked: list[StartTimer] = []
        self.fired: list[int] = []

    def ready(self, message: Message) -> bool:
        return not isinstance(message, PullDense) or self.version >= message.min_version

    def pull(self, message: PullDense) -> DenseBlock:
        return DenseBlock(torch.zeros(4), self.version)

    def push(self, message: PushDenseGradient) -> None:
        self.version += 1
        self.asked.append(StartTimer(self.version, 0.5))

    def take_timers(self) -> list[StartTimer]:
        asked, self.asked = self.asked, []
        return asked

    def timer(self, timer_id: int) -> None:
        self.fired.append(timer_id)
        if timer_id == 1:
            self.asked.append(StartTimer(10, 1.0))


class Recorded:
    """A driver's side of a move, written down."""

    def __init__(self) -> None:
        self.woke: list[str] = []
        self.armed: list[StartTimer] = []

    def requests(self, host: HostedNode) -> None:
        self.woke.append("requests")

    def loops(self, host: HostedNode) -> None:
        self.woke.append("loops")

    def arm(self, host: HostedNode, timer: StartTimer) -> None:
        self.armed.append(timer)


def push() -> PushDenseGradient:
    return PushDenseGradient(worker=0, version=0, grad=torch.ones(4))


def test_a_fused_message_is_its_push_then_its_request_and_any_other_has_no_push():
    pushed, pull = push(), PullDense(min_version=1)
    assert HostedNode.split(Fused(pushed, pull)) == (pushed, pull)
    assert HostedNode.split(pull) == (None, pull)


def test_a_request_waits_until_a_push_moved_its_node_then_is_answered():
    host, wakes = HostedNode(Versioned()), Recorded()
    pull = PullDense(min_version=1)
    assert host.waits(pull)
    pushed, request = host.split(Fused(push(), pull))
    assert pushed is not None
    assert host.handle(pushed) is None
    host.after(pushed, wakes)
    assert wakes.woke == ["requests", "loops"]
    assert wakes.armed == [StartTimer(1, 0.5)]
    assert not host.waits(request)
    assert host.handle(request).version == 1


def test_only_a_message_that_may_wait_on_a_node_that_defers_ever_waits():
    class Plain(Versioned):
        defers = False

    assert not HostedNode(Plain()).waits(PullDense(min_version=5))
    assert not HostedNode(Versioned()).waits(push())
    assert HostedNode(Versioned()).waits(PullDense(min_version=5))


def test_a_message_that_does_not_mutate_wakes_nothing_and_arms_nothing():
    host, wakes = HostedNode(Versioned()), Recorded()
    pull = PullDense()
    host.handle(pull)
    host.after(pull, wakes)
    assert wakes.woke == [] and wakes.armed == []


def test_a_node_that_arms_no_timers_is_not_asked_for_them():
    class Untimed(Versioned):
        arms_timers = False

        def take_timers(self) -> list[StartTimer]:
            raise AssertionError("asked for timers")

    host, wakes = HostedNode(Untimed()), Recorded()
    pushed = push()
    host.handle(pushed)
    host.after(pushed, wakes)
    assert wakes.woke == ["requests", "loops"] and wakes.armed == []


def test_a_fired_timer_wakes_waiting_requests_and_arms_what_it_asked_for_but_no_loop():
    node = Versioned()
    host, wakes = HostedNode(node), Recorded()
    host.fire(1, wakes)
    assert node.fired == [1]
    assert wakes.woke == ["requests"]
    assert wakes.armed == [StartTimer(10, 1.0)]


def test_the_observer_is_told_of_every_message_answered_with_its_reply():
    host, seen = HostedNode(Versioned()), []
    host.observer = lambda message, reply: seen.append((message.kind, reply))
    pushed = push()
    host.handle(pushed)
    assert seen == [("PushDense", None)]


def test_a_node_never_slowed_takes_as_long_and_a_slowed_one_as_its_window_says():
    assert HostedNode(Versioned()).slowdown(3.0) == 1.0
    slowed = HostedNode(Versioned(), slowdown_at=lambda s: 4.0 if 1.0 <= s < 2.0 else 1.0)
    assert [slowed.slowdown(s) for s in (0.5, 1.5, 2.5)] == [1.0, 4.0, 1.0]


def test_replies_count_their_bytes_by_kind_unless_they_carry_nothing():
    host = HostedNode(Versioned())
    pull, pushed = PullDense(), push()
    reply: Any = host.handle(pull)
    assert host.count_reply(pull, reply) == wire_bytes(reply) == 16
    assert host.count_reply(pushed, host.handle(pushed)) == HEADER_BYTES  # not counted
    assert dict(host.measures.bytes_sent) == {"PullDense": 16}
    assert dict(host.measures.calls) == {}


def test_messages_sent_and_collectives_count_bytes_and_calls_of_the_sender():
    host = HostedNode(Versioned())
    assert host.count_sent(push()) == 16
    host.count_sent(push())
    host.count_all_reduce(torch.zeros(8))
    assert dict(host.measures.bytes_sent) == {"PushDense": 32, "AllReduce": 32}
    assert dict(host.measures.calls) == {"PushDense": 2, "AllReduce": 1}
