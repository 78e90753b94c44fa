"""Messages in virtual time: each call, gathered group of calls or fire-and-forget send of a
node's loop becomes timed actions (the sender's and receiver's NICs, the server's CPU), the
server node's `handle`, and its reply on the way back.

A request its server cannot answer yet (`ready` says no) waits until a message that
mutates some server was handled, then is re-checked. Coordination messages (`control`) cost
no network or CPU here. A `prefetchable` request (a worker's next batch) is sent again as its
reply comes back, as the engine's loops do, so the loop's next ask finds it on its way or
answered. Every handler ends in the caller's continuation (see clock.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from recsync.protocol.address import Address
from recsync.protocol.effects import Call, CallEach, Drain, Target
from recsync.protocol.messages import Fused, Message, wire_bytes
from recsync.runtime.sim.clock import Callback, Clock, Gather, Signal
from recsync.runtime.sim.cost import CostModel
from recsync.runtime.sim.host import SimHost
from recsync.runtime.sim.network import Network
from recsync.runtime.sim.runner import LoopRunner

# a message on its way: (sender, receiver, message, bytes, who gets the reply (None: a
# send), tag: None for a call, the reply's index for a gathered call, the sender's id for
# a send)
Delivery = tuple[SimHost, SimHost, Message, int, Any, Any]


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
    """Carries the messages of a simulated job between its hosts."""

    def __init__(self, clock: Clock, network: Network, hosts: dict[Address, SimHost]):
        self.clock, self.network, self.hosts = clock, network, hosts
        self.cost: CostModel = network.cost
        self.changed = Signal(clock)  # some server's state moved: waiting requests re-check
        self.inflight: dict[int, int] = {}  # sender -> its sent messages not handled yet
        self.drained: dict[int, Callback] = {}  # sender -> who waits for them

    def call(self, runner: LoopRunner, effect: Call) -> None:
        src, message = runner.host, effect.message
        if message.prefetchable:
            target = effect.target
            ahead = runner.ahead.pop(target, None) or self._ask(src, target, message)
            ahead.wait(lambda reply: self._answered(runner, target, message, reply))
            return
        item = self._delivery(src, effect.target, message, runner.resume, None)
        if message.control:
            self._control(item)
        else:
            self.network.send(src.machine, item[1].machine, item[3], self._arrived, item)

    def _ask(self, src: SimHost, target: Address, message: Message) -> Ahead:
        assert not message.control, "a coordination message is never asked for ahead"
        ahead = Ahead()
        item = self._delivery(src, target, message, ahead.deliver, None)
        self.network.send(src.machine, item[1].machine, item[3], self._arrived, item)
        return ahead

    def _answered(self, runner: LoopRunner, target: Address, message: Message, reply: Any) -> None:
        """A prefetchable call's reply: the same request leaves again (as `asks_again`
        says), then the loop goes on with the reply."""
        if message.asks_again(reply):
            runner.ahead[target] = self._ask(runner.host, target, message)
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
            self._delivery(src, target, message, gather.deliver, i)
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
        items = [self._delivery(src, target, message, None, sender) for target, message in calls]
        self.inflight[sender] = self.inflight.get(sender, 0) + len(items)
        if not (self.network.handles_messages and items):
            self.clock.soon(self._send_each, items, urgent=True)
            runner.resume(None)
            return
        departures = Departures(len(items), runner.resume)
        self.clock.soon(self._send_away, (items, departures), urgent=True)

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
            self._control(self._delivery(src, target, message, None, None))

    def _delivery(
        self, src: SimHost, target: Address, message: Message, deliver: Any, tag: Any
    ) -> Delivery:
        size, measures = wire_bytes(message), src.measures
        measures.bytes_sent[message.kind] += size
        measures.calls[message.kind] += 1
        return (src, self.hosts[target], message, size, deliver, tag)

    def _send_each(self, items: list[Delivery]) -> None:
        send, arrived = self.network.send, self._arrived
        for item in items:
            send(item[0].machine, item[1].machine, item[3], arrived, item)

    def _send_away(self, sends: tuple[list[Delivery], Departures]) -> None:
        items, departures = sends
        send, arrived, left = self.network.send, self._arrived, departures.left
        for item in items:
            send(item[0].machine, item[1].machine, item[3], arrived, item, left)

    def _arrived(self, item: Delivery) -> None:
        dst, message = item[1], item[2]
        if dst.down_until > self.clock.now:  # sent again once the node is back
            self.clock.at(dst.down_until, self._arrived, item)
            return
        if isinstance(message, Fused):  # its push first, on arrival; then its request
            push_s = self._server_s(dst, message.push)
            self.network.work(dst.machine, push_s, self._pushed, item)
            return
        if message.may_wait and dst.defers and not dst.node.ready(message):
            self.changed.wait(self._arrived, item)  # answered once the server moved
            return
        self.network.work(dst.machine, self._server_s(dst, message), self._serve, item)

    def _server_s(self, dst: SimHost, message: Message) -> float:
        seconds = self.cost.server_s(message.work())
        if dst.slowdown_at is not None:  # a slow server
            seconds *= dst.slowdown_at(self.clock.now)
        return seconds

    def _pushed(self, item: Delivery) -> None:
        src, dst, fused, size, deliver, tag = item
        assert isinstance(fused, Fused)
        self._handle(dst, fused.push)
        self._arrived((src, dst, fused.request, size, deliver, tag))

    def _serve(self, item: Delivery) -> None:
        src, dst, message, _, deliver, tag = item
        reply = self._handle(dst, message)
        if deliver is None:  # a sent message: count it handled
            left = self.inflight[tag] - 1
            self.inflight[tag] = left
            if not left and tag in self.drained:
                self.clock.soon(self.drained.pop(tag))
            return
        size = wire_bytes(reply)
        if message.answered:
            dst.measures.bytes_sent[message.kind] += size
        answer = reply if tag is None else (tag, reply)
        if self.cost.faults.may_delay(message):
            self.network.reply(dst.machine, src.machine, size, deliver, answer)
        else:
            self.network.send(dst.machine, src.machine, size, deliver, answer)

    def _control(self, item: Delivery) -> None:
        dst, message, deliver, tag = item[1], item[2], item[4], item[5]
        if dst.down_until > self.clock.now:
            self.clock.at(dst.down_until, self._control, item)
            return
        if message.may_wait and dst.defers and not dst.node.ready(message):
            self.changed.wait(self._control, item)
            return
        reply = self._handle(dst, message)
        if deliver is not None:
            dst.measures.bytes_sent[message.kind] += wire_bytes(reply)
            deliver(reply if tag is None else (tag, reply))

    def _handle(self, dst: SimHost, message: Message) -> Any:
        reply = dst.node.handle(message)
        if dst.observer is not None:
            dst.observer(message, reply)
        if message.mutates:
            self.changed.fire()
            if dst.waiters:
                dst.wake(self.clock.soon)
            if dst.arms_timers:
                self._arm(dst)
        return reply

    def _arm(self, dst: SimHost) -> None:
        for timer in dst.node.take_timers():
            self.clock.at(self.clock.now + timer.seconds, self._timer, (dst, timer.timer_id))

    def _timer(self, item: tuple[SimHost, int]) -> None:
        dst, timer_id = item
        dst.node.timer(timer_id)
        self.changed.fire()
        self._arm(dst)
