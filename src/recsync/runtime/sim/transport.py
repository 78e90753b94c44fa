"""Messages in virtual time: each call, gathered group of calls or fire-and-forget send of a
node's loop becomes timed actions (the sender's and receiver's NICs, the server's CPU), the
server node's `handle`, and its reply on the way back.

How a message reaches its node is coordinator/hosting.py's (a fused message's push applied
on arrival, a request its server cannot answer yet waiting until a message that mutates
some server was handled, then re-checked; what a mutation wakes; reply bytes); here it only
takes virtual time: a waiting request waits on one `Signal` of the job. Coordination
messages (`control`) cost no network or CPU here. A `prefetchable` request (a worker's next
batch) is sent again as its reply comes back, as the engine's loops do, so the loop's next
ask finds it on its way or answered. Every handler ends in the caller's continuation (see clock.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from recsync.protocol.address import Address
from recsync.protocol.effects import SENDS_IN_FLIGHT, Call, CallEach, Drain, Target
from recsync.protocol.messages import Fused, Message
from recsync.protocol.node import StartTimer
from recsync.runtime.sim.clock import Callback, Clock, Gather, Signal
from recsync.runtime.sim.cost import CostModel
from recsync.runtime.sim.host import SimHost
from recsync.runtime.sim.network import Network
from recsync.runtime.sim.runner import LoopRunner

# a message on its way: (sender, receiver, message, bytes, who gets the reply (None: a
# send), tag: None for a call, the reply's index for a gathered call, the sender's id for
# a send; the loop that sent it (None: not a loop's): its connection to the receiver)
Delivery = tuple[SimHost, SimHost, Message, int, Any, Any, Any]


class Departures:
    """Resumes a loop that sent messages once every one of them left its machine."""

    __slots__ = ("missing", "resume")

    def __init__(self, count: int, resume: Callback):
        self.missing = count
        self.resume = resume

    def left(self, _: Any) -> None:
        self.missing -= 1
        if not self.missing:
            self.resume(None)


class Ahead:
    """A request sent ahead of its loop's asking: its reply once it came, or who waits for it."""

    __slots__ = ("came", "reply", "then")

    def __init__(self) -> None:
        self.came = False
        self.reply: Any = None
        self.then: Callback | None = None

    def deliver(self, reply: Any) -> None:
        then, self.then = self.then, None
        if then is None:
            self.came, self.reply = True, reply
        else:
            then(reply)

    def wait(self, then: Callback) -> None:
        if self.came:
            then(self.reply)
        else:
            self.then = then


class PartialGather:
    """Replies of a group of calls that may go on without some: done once every reply
    arrived, or once `need` of them arrived and the deadline passed."""

    def __init__(self, clock: Clock, count: int, need: int, deadline: float, then: Callback):
        self.clock = clock
        self.results: list[Any] = [None] * count
        self.arrived = 0
        self.need = need
        self.deadline = deadline
        self.then: Callback | None = then
        if clock.now < deadline:
            clock.at(deadline, self._check)

    def deliver(self, item: tuple[int, Any]) -> None:
        if self.then is None:  # the caller went on without this reply
            return
        index, value = item
        self.results[index] = value
        self.arrived += 1
        self._check()

    def _check(self, _: Any = None) -> None:
        if self.then is None:
            return
        done = self.arrived == len(self.results)
        if done or (self.arrived >= self.need and self.clock.now >= self.deadline):
            then, self.then = self.then, None
            then(list(self.results))


class Transport:
    """Carries the messages of a simulated job between its hosts (and is what its hosts'
    nodes wake when they move: `Wakes` of coordinator/hosting.py)."""

    def __init__(self, clock: Clock, network: Network, hosts: dict[Address, SimHost]):
        self.clock, self.network, self.hosts = clock, network, hosts
        self.cost: CostModel = network.cost
        self.changed = Signal(clock)  # some server's state moved: waiting requests re-check
        self.inflight: dict[int, int] = {}  # sender -> its sent messages not handled yet
        self.drained: dict[int, Callback] = {}  # sender -> who waits for them
        self.held: dict[int, tuple[int, Callback]] = {}  # sender -> (bound, who waits)

    def call(self, runner: LoopRunner, effect: Call) -> None:
        src, message = runner.host, effect.message
        if message.prefetchable:
            target = effect.target
            ahead = runner.ahead.pop(target, None) or self._ask(src, target, message, runner)
            ahead.wait(lambda reply: self._answered(runner, target, message, reply))
            return
        item = self._delivery(src, effect.target, message, runner.resume, None, runner)
        if message.control:
            self._control(item)
        else:
            self._send_each([item])

    def _ask(self, src: SimHost, target: Address, message: Message, runner: Any) -> Ahead:
        assert not message.control, "a coordination message is never asked for ahead"
        ahead = Ahead()
        self._send_each([self._delivery(src, target, message, ahead.deliver, None, runner)])
        return ahead

    def _answered(self, runner: LoopRunner, target: Address, message: Message, reply: Any) -> None:
        """A prefetchable call's reply: the same request leaves again (as `asks_again`
        says), then the loop goes on with the reply."""
        if message.asks_again(reply):
            runner.ahead[target] = self._ask(runner.host, target, message, runner)
        runner.resume(reply)

    def call_each(self, runner: LoopRunner, effect: CallEach) -> None:
        calls, quorum, src = effect.calls, effect.quorum, runner.host
        gather: Gather | PartialGather
        if quorum is None:
            gather = Gather(len(calls), runner.resume)
        else:
            deadline = self.clock.now + quorum.wait_s
            gather = PartialGather(self.clock, len(calls), quorum.need, deadline, runner.resume)
        items = [
            self._delivery(src, target, message, gather.deliver, i, runner)
            for i, (target, message) in enumerate(calls)
        ]
        for item in items:
            if item[2].control:  # coordination: no network (a fused one carries a push)
                self._control(item)
        sent = [item for item in items if not item[2].control]
        if sent:
            self.clock.fan_out(self._send_each, sent)

    def send(self, runner: LoopRunner, sender: int, calls: Sequence[Target]) -> None:
        """Fire and forget: the loop goes on without the replies. Where messages cost CPU it
        goes on once its end of them was spent (a Ray caller serializes what it sends on its
        own thread); else at once, the messages leaving as it does."""
        src = runner.host
        items = [
            self._delivery(src, target, message, None, sender, runner) for target, message in calls
        ]
        self.inflight[sender] = self.inflight.get(sender, 0) + len(items)
        go = self._within(sender, SENDS_IN_FLIGHT * len(items), runner.resume)
        if not (self.network.handles_messages and items):
            self.clock.soon(self._send_each, items, urgent=True)
            go(None)
            return
        departures = Departures(len(items), go)
        self.clock.soon(self._send_away, (items, departures), urgent=True)

    def _within(self, sender: int, bound: int, resume: Callback) -> Callback:
        """`resume`, called once at most `bound` of `sender`'s messages are in flight."""

        def go(_: Any) -> None:
            if self.inflight.get(sender, 0) <= bound:
                resume(None)
            else:
                self.held[sender] = (bound, resume)

        return go

    def drain(self, runner: LoopRunner, effect: Drain) -> None:
        self.after_drain(effect.sender, runner.resume)

    def after_drain(self, sender: int, then: Callback) -> None:
        """`then(None)` once every message `sender` sent was handled."""
        if self.inflight.get(sender):
            self.drained[sender] = then
        else:
            then(None)

    def tell(self, src: SimHost, calls: Sequence[Target]) -> None:
        """Coordination messages from `src` whose replies nobody waits for."""
        for target, message in calls:
            self._control(self._delivery(src, target, message, None, None, None))

    def _delivery(
        self,
        src: SimHost,
        target: Address,
        message: Message,
        deliver: Any,
        tag: Any,
        loop: Any,
    ) -> Delivery:
        return (src, self.hosts[target], message, src.count_sent(message), deliver, tag, loop)

    def _send_each(self, items: list[Delivery]) -> None:
        send, arrived = self.network.send, self._arrived
        for item in items:
            loop = item[6]
            channel = None if loop is None else (loop, item[1])
            send(item[0].machine, item[1].machine, item[3], arrived, item, None, channel)

    def _send_away(self, sends: tuple[list[Delivery], Departures]) -> None:
        items, departures = sends
        send, arrived, left = self.network.send, self._arrived, departures.left
        for item in items:
            loop = item[6]
            channel = None if loop is None else (loop, item[1])
            send(item[0].machine, item[1].machine, item[3], arrived, item, left, channel)

    def _arrived(self, item: Delivery) -> None:
        dst, message = item[1], item[2]
        if dst.down_until > self.clock.now:  # sent again once the node is back
            self.clock.at(dst.down_until, self._arrived, item)
            return
        if isinstance(message, Fused):  # its push first, on arrival; then its request
            push_s = self._server_s(dst, message.push)
            self.network.work(dst.machine, push_s, self._pushed, item)
            return
        if dst.waits(message):
            self.changed.wait(self._arrived, item)  # answered once the server moved
            return
        self.network.work(dst.machine, self._server_s(dst, message), self._serve, item)

    def _server_s(self, dst: SimHost, message: Message) -> float:
        return self.cost.server_s(message.work()) * dst.slowdown(self.clock.now)

    def _pushed(self, item: Delivery) -> None:
        src, dst, fused, size, deliver, tag, loop = item
        push, request = dst.split(fused)
        assert push is not None
        self._handle(dst, push)
        self._arrived((src, dst, request, size, deliver, tag, loop))

    def _serve(self, item: Delivery) -> None:
        src, dst, message, _, deliver, tag, loop = item
        reply = self._handle(dst, message)
        if deliver is None:  # a sent message: count it handled
            left = self.inflight[tag] - 1
            self.inflight[tag] = left
            if not left and tag in self.drained:
                self.clock.soon(self.drained.pop(tag))
            held = self.held.get(tag)
            if held is not None and left <= held[0]:
                del self.held[tag]
                self.clock.soon(held[1])
            return
        size = dst.count_reply(message, reply)
        answer = reply if tag is None else (tag, reply)
        channel = None if loop is None else (loop, src)  # the connection's way back
        if self.cost.faults.may_delay(message):
            self.network.reply(dst.machine, src.machine, size, deliver, answer, channel)
        else:
            self.network.send(dst.machine, src.machine, size, deliver, answer, None, channel)

    def _control(self, item: Delivery) -> None:
        dst, message, deliver, tag = item[1], item[2], item[4], item[5]  # (no network)
        if dst.down_until > self.clock.now:
            self.clock.at(dst.down_until, self._control, item)
            return
        if dst.waits(message):
            self.changed.wait(self._control, item)
            return
        reply = self._handle(dst, message)
        if deliver is not None:
            dst.count_reply(message, reply)
            deliver(reply if tag is None else (tag, reply))

    def _handle(self, dst: SimHost, message: Message) -> Any:
        reply = dst.handle(message)
        dst.after(message, self)
        return reply

    def requests(self, host: SimHost) -> None:
        self.changed.fire()

    def loops(self, host: SimHost) -> None:
        if host.waiters:
            host.wake(self.clock.soon)

    def arm(self, host: SimHost, timer: StartTimer) -> None:
        self.clock.at(self.clock.now + timer.seconds, self._timer, (host, timer.timer_id))

    def _timer(self, item: tuple[SimHost, int]) -> None:
        host, timer_id = item
        host.fire(timer_id, self)
