"""Virtual-time transport: NICs that queue messages, server CPUs, and ring all-reduce.

Each operation takes a continuation ``then(arg)``, called when it completes (see clock.py).
"""

from __future__ import annotations

from collections.abc import Callable
from heapq import heapreplace
from typing import Any

import torch

from recsync.runtime.sim.clock import Callback, Clock, Lane
from recsync.runtime.sim.cost import CostModel
from recsync.runtime.sim.links import Link, Nic, SharedLinks


class Slots:
    """`k` servers of a FIFO queue, kept as the times they next fall free (a min-heap): a
    job that arrives at `now` starts on the earliest free one (first come, first served)."""

    def __init__(self, capacity: int):
        assert capacity >= 1
        self.free_at = [0.0] * capacity
        self.lane: Lane | None = None  # one slot: its completions, in booking order
        self.busy_s = 0.0  # service booked, summed over its slots

    def finish_time(self, now: float, seconds: float) -> float:
        """Book `seconds` of service for a job arriving now; returns when it completes."""
        free_at = self.free_at
        self.busy_s += seconds
        done = (now if now > free_at[0] else free_at[0]) + seconds
        if len(free_at) == 1:
            free_at[0] = done
        else:
            heapreplace(free_at, done)
        return done


class Machine:
    """A simulated node's process: its CPU slots and its socket queue (`nic`, for messages to
    nodes on its own machine), on the machine whose `link` it shares with the machine's
    other nodes; `cpu_s`, the seconds of work charged to it (on its slots or on the cores it
    shares); `message_cpu_s` and `byte_cpu_s`, the CPU each end of a message takes there and
    each of its bytes; `message_ends` and `message_bytes`, the messages it sent and received
    and their bytes; `sent_to`, the bytes it sent by the machine they went to."""

    def __init__(
        self,
        name: str,
        threads: int = 1,
        message_cpu_s: float = 0.0,
        byte_cpu_s: float = 0.0,
        link: Link | None = None,
    ):
        self.name = name
        self.message_cpu_s = message_cpu_s
        self.byte_cpu_s = byte_cpu_s
        self.message_ends = 0
        self.message_bytes = 0
        self.nic = Nic()
        self.link = link or Link(name, float("inf"))
        self.sent_to: dict[str, int] = {}
        self.cpu = Slots(threads)
        self.cpu_s = 0.0

    @property
    def nic_busy_s(self) -> float:
        """Seconds its machine's link was busy, in its busier direction (sending or
        receiving), plus its socket queue's within its machine."""
        return max(self.link.tx.busy_s, self.link.rx.busy_s) + self.nic.busy_s


class Network:
    """Messages between machines cross the sender's link, then the receiver's, each full
    duplex (what a machine sends and what it receives do not queue for each other), and
    arrive a link latency after they left. Where the cost model gives machines (nodes
    sharing them), the links are shared fairly between the messages crossing them, as TCP
    shares a link between connections (links.py). Where it gives none, every node is
    a machine of its own whose link is a queue each way, first come first served, a message
    streaming through the sender's and the receiver's (cut through: an idle path costs
    latency plus bytes over the slower link): cheap enough for thousands of nodes, whose
    own messages are few and alike. Messages between nodes of one machine cost the
    loopback's latency plus their bytes over its bandwidth on the sender's socket queue,
    then the receiver's."""

    def __init__(
        self,
        clock: Clock,
        cost: CostModel,
        delayed: Callable[[], float],
        num_processes: int = 0,
    ):
        """`delayed()`: extra seconds fault injection adds to one reply (0.0: none).
        `num_processes`: the job's processes, each idling on the shared cores (if any)."""
        self.clock = clock
        self.cost = cost
        self.delayed = delayed
        self.delays = bool(cost.faults.delay_fraction)
        self.shared_cpu = Slots(cost.shared_cpus) if cost.shared_cpus else None
        self.stretch = cost.shared_stretch(num_processes)
        self.handles_messages = cost.charges_messages
        self.latency_s = cost.latency_s
        self.bandwidth_bytes_s = cost.bandwidth_bytes_s
        machines = cost.machines
        self.link_latency_s = machines.latency_s if machines.count else cost.latency_s
        self.shared: SharedLinks | None = None

    def machine_links(self, seed: int) -> list[Link]:
        """The links of the cost model's machines (shared from now on; the messages' shares
        drawn from `seed`)."""
        machines = self.cost.machines
        assert machines.count, "the cost model gives no machines"
        links = [Link(machines.name(m), machines.link_bytes_s[m], m) for m in range(machines.count)]
        self.shared = SharedLinks(self.clock, links, machines.latency_s, machines.flow_spread, seed)
        return links

    def send(
        self,
        src: Machine,
        dst: Machine,
        nbytes: int,
        then: Callback,
        arg: Any = None,
        left: Callback | None = None,
        channel: Any = None,
    ) -> None:
        """The message leaves src, crosses the wire (a link, or the loopback), enters dst;
        each end spends its messaging CPU. `left(None)` (if given) once src spent its end's
        CPU and the message is on its way. `channel`: the connection and direction it goes
        on (the messages of one follow each other on shared links; None: its own)."""
        src.message_ends += 1
        src.message_bytes += nbytes
        if self.handles_messages:
            self.work(
                src,
                src.message_cpu_s + src.byte_cpu_s * nbytes,
                self._transmit,
                (src, dst, nbytes, then, arg, left, channel),
            )
        else:
            self._leave(src, dst, nbytes, then, arg, channel)
            if left is not None:
                left(None)

    def reply(
        self,
        src: Machine,
        dst: Machine,
        nbytes: int,
        then: Callback,
        arg: Any = None,
        channel: Any = None,
    ) -> None:
        """A server's answer (lookup, pull): sent like any message, then perhaps delayed
        further by fault injection before `then(arg)`."""
        if self.delays:
            self.send(src, dst, nbytes, self._replied, (then, arg), None, channel)
        else:
            self.send(src, dst, nbytes, then, arg, None, channel)

    def _replied(self, item: tuple[Callback, Any]) -> None:
        then, arg = item
        delay = self.delayed()
        if delay:
            self.clock.at(self.clock.now + delay, then, arg)
        else:
            then(arg)

    def _transmit(
        self, message: tuple[Machine, Machine, int, Callback, Any, Callback | None, Any]
    ) -> None:
        src, dst, nbytes, then, arg, left, channel = message
        self._leave(src, dst, nbytes, then, arg, channel)
        if left is not None:
            left(None)

    def _leave(
        self, src: Machine, dst: Machine, nbytes: int, then: Callback, arg: Any, channel: Any
    ) -> None:
        """Book the message on its way: on src's link (dst's queued as it starts to arrive),
        or, within a machine, on src's socket queue (and counted on dst's)."""
        link = src.link
        sent_to = src.sent_to
        sent_to[dst.link.name] = sent_to.get(dst.link.name, 0) + nbytes
        now = self.clock.now
        if link is dst.link:
            hold = nbytes / self.bandwidth_bytes_s
            done = src.nic.book(now, hold)
            src.nic.busy_s += hold
            dst.nic.busy_s += hold
            self.clock.at(done + self.latency_s, self._arrive, (dst, nbytes, hold, then, arg))
            return
        if self.shared is not None:
            received = (dst, nbytes, then, arg)
            self.shared.start(link.index, dst.link.index, nbytes, self._received, received, channel)
            return
        tx = link.tx
        start = now if now > tx.free_at else tx.free_at
        hold = nbytes / link.bytes_s
        tx.free_at = end = start + hold
        tx.busy_s += hold
        if start == now:
            self._enter((dst, nbytes, end, then, arg))
        else:  # starts never go back on one link: a lane keeps them off the agenda
            lane = tx.lane or self._nic_lane(tx)
            lane.at(start, self._enter, (dst, nbytes, end, then, arg))

    def _enter(self, message: tuple[Machine, int, float, Callback, Any]) -> None:
        """The message's first bytes reach dst's link a latency after they left: it queues
        there, through once all of it came and the link took it."""
        dst, nbytes, sent, then, arg = message
        rx, latency = dst.link.rx, self.link_latency_s
        first = self.clock.now + latency
        start = first if first > rx.free_at else rx.free_at
        hold = nbytes / dst.link.bytes_s
        end = start + hold
        if end < sent + latency:
            end = sent + latency
        rx.free_at = end
        rx.busy_s += hold
        # a link's messages come through in the order they queued on it (`end` never goes
        # back): one lane a link, not one agenda action a message (thousands of workers'
        # messages queue at a server's link)
        lane = rx.lane or self._nic_lane(rx)
        lane.at(end, self._received, (dst, nbytes, then, arg))

    def _arrive(self, message: tuple[Machine, int, float, Callback, Any]) -> None:
        dst, nbytes, hold, then, arg = message
        received = dst.nic.book(self.clock.now, hold)
        self.clock.at(received, self._received, (dst, nbytes, then, arg))

    def _received(self, message: tuple[Machine, int, Callback, Any]) -> None:
        dst, nbytes, then, arg = message
        dst.message_ends += 1
        dst.message_bytes += nbytes
        if self.handles_messages:
            self.work(dst, dst.message_cpu_s + dst.byte_cpu_s * nbytes, then, arg)
        else:
            then(arg)

    def work(self, node: Machine, seconds: float, then: Callback, arg: Any = None) -> None:
        """`seconds` of work on one of node's CPU slots (or the shared cores), then `then`."""
        cpu = self.shared_cpu or node.cpu
        node.cpu_s += seconds
        done = cpu.finish_time(self.clock.now, seconds * self.stretch)
        if len(cpu.free_at) == 1:  # one slot: jobs finish in the order they were booked
            lane = cpu.lane or self._lane(cpu)
            lane.at(done, then, arg)
        else:
            self.clock.at(done, then, arg)

    def _lane(self, cpu: Slots) -> Lane:
        cpu.lane = Lane(self.clock)
        return cpu.lane

    def _nic_lane(self, nic: Nic) -> Lane:
        nic.lane = Lane(self.clock)
        return nic.lane


class Collective:
    """All-reduce among n nodes (trainers, or group PSs across groups): each round
    completes when all n contributed; the mean is summed in rank order (deterministic), then
    costs a ring all-reduce's time. Where the members' machines are given (`links`, in rank
    order) and they are not all one machine, the ring runs at the slowest link among them
    and its bytes queue on each link it crosses (a rank sends 2(n - 1)/n of the vector to
    the next), behind what those links carry already."""

    def __init__(
        self,
        clock: Clock,
        cost: CostModel,
        size: int,
        links: list[Link] | None = None,
        shared: SharedLinks | None = None,
    ):
        self.clock = clock
        self.cost = cost
        self.size = size
        self.links = links if links and len({id(link) for link in links}) > 1 else None
        self.shared = shared
        self._values: dict[int, torch.Tensor] = {}
        self._done_flags = 0
        self._waiting: list[Callback] = []

    def contribute(self, trainer: int, values: torch.Tensor, done: bool, then: Callback) -> None:
        """`then((mean, number of trainers done))` once the round completed."""
        assert trainer not in self._values, "a trainer joined the same round twice"
        self._values[trainer] = values
        self._done_flags += int(done)
        self._waiting.append(then)
        if len(self._values) < self.size:
            return
        ordered = [self._values[i] for i in range(self.size)]
        total = ordered[0].clone()
        for v in ordered[1:]:
            total += v
        nbytes = total.numel() * total.element_size()
        result = (total / self.size, self._done_flags)
        waiting = self._waiting
        self._values, self._done_flags, self._waiting = {}, 0, []
        if self.links is not None and self.shared is not None:
            self._over_shared_links(nbytes, (waiting, result))
            return
        self.clock.at(self._finish(nbytes), _release, (waiting, result))

    def _over_shared_links(self, nbytes: int, item: tuple[list[Callback], Any]) -> None:
        """The ring's bytes as flows on the shared links it crosses; released once all
        arrived (each rank's share at once: the ring's steps pipelined)."""
        assert self.links is not None and self.shared is not None
        share = round(2 * (self.size - 1) / self.size * nbytes)
        crossing = [
            (link.index, self.links[(rank + 1) % self.size].index)
            for rank, link in enumerate(self.links)
            if self.links[(rank + 1) % self.size] is not link
        ]
        pending = [len(crossing)]

        def arrived(_: Any) -> None:
            pending[0] -= 1
            if not pending[0]:
                _release(item)

        for src, dst in crossing:
            self.shared.start(src, dst, share, arrived)

    def _finish(self, nbytes: int) -> float:
        now, links, cost = self.clock.now, self.links, self.cost
        if links is None:
            return now + cost.allreduce_s(self.size, nbytes)
        rate = min(link.bytes_s for link in links)
        latency = cost.machines.latency_s if cost.machines.count else cost.latency_s
        finish = now + cost.allreduce_s(self.size, nbytes, rate, latency)
        share = 2 * (self.size - 1) / self.size * nbytes
        for rank, link in enumerate(links):
            after = links[(rank + 1) % self.size]
            if after is link:
                continue
            for queue, bytes_s in ((link.tx, link.bytes_s), (after.rx, after.bytes_s)):
                hold = share / bytes_s
                queue.free_at = (now if now > queue.free_at else queue.free_at) + hold
                queue.busy_s += hold
                finish = max(finish, queue.free_at)
        return finish


def _release(item: tuple[list[Callback], Any]) -> None:
    waiting, result = item
    for then in waiting:
        then(result)
