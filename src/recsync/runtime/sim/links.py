"""Machines' links: a link (`Link`: a queue each way, `Nic`), and the links of machines
that nodes share, shared between the messages crossing them (`SharedLinks`).

`SharedLinks` shares them as TCP shares a link between its connections (a flow-level
model): every message between two machines is a flow through the sender's link (its
sending direction) and the receiver's (its receiving one), and the flows in progress get
weighted max-min fair rates (progressive filling: the most contended link direction splits
what it has by the flows' weights, the flows it limits take that, the others share what is
left). A message's weight is drawn log-normal (sigma: the measured spread of TCP's shares;
0: even), and the messages of one connection and direction go one after another. Rates
change only when a flow starts or ends; a flow done arrives a link latency later. Flows
between the same two machines get the same rate per unit of weight, so the allocation works
on machine pairs (at most M^2 of them), not on messages."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

import numpy as np

from recsync.runtime.sim.clock import Clock, Lane


class Nic:
    """One direction of a queue of messages: one at a time, first come, first served."""

    __slots__ = ("free_at", "busy_s", "lane")

    def __init__(self) -> None:
        self.free_at = 0.0  # when the message now on it is through
        self.busy_s = 0.0
        self.lane: Lane | None = None  # the network's actions on it, due in booking order

    def book(self, now: float, hold: float) -> float:
        """Hold the NIC for `hold` seconds from now or once it is free; returns when done."""
        done = (now if now > self.free_at else self.free_at) + hold
        self.free_at = done
        return done


class Link:
    """A machine's network link, full duplex: what the machine sends queues on `tx`, what
    it receives on `rx`, each at `bytes_s` a second; `name`, the machine's (its address);
    `index`, its place among the cost model's machines (-1: a node's own machine)."""

    __slots__ = ("name", "bytes_s", "tx", "rx", "index")

    def __init__(self, name: str, bytes_s: float, index: int = -1):
        self.name = name
        self.bytes_s = bytes_s
        self.tx = Nic()
        self.rx = Nic()
        self.index = index


Done = Callable[[Any], None]
FINISHED = 1e-9  # a flow whose bytes left are this fraction of it (or a byte) at most ended


class Flow:
    """One message crossing from machine `src` to machine `dst` (indices), on `channel`
    (its connection and direction: the messages of one go one after another; None: none)."""

    __slots__ = ("src", "dst", "nbytes", "left", "done", "arg", "channel", "weight")

    def __init__(
        self, src: int, dst: int, nbytes: int, done: Done, arg: Any, channel: Any, weight: float
    ):
        self.src, self.dst, self.nbytes = src, dst, nbytes
        self.left = float(nbytes)
        self.done, self.arg, self.channel = done, arg, channel
        self.weight = weight  # its share against the others' (TCP's flows are not equal)


class SharedLinks:
    """The machines' `links` (each one's `bytes_s` each way; the seconds each direction was
    in use are added to its `tx.busy_s` and `rx.busy_s`), `latency_s` between two machines;
    `sent[m]` and `received[m]` the bytes each link carried so far."""

    def __init__(
        self,
        clock: Clock,
        links: list[Link],
        latency_s: float,
        spread: float = 0.0,
        seed: int = 0,
    ):
        self.clock, self.links, self.latency_s = clock, links, latency_s
        rates = [link.bytes_s for link in links]
        self.rates = rates
        self.spread = spread
        self.rng = np.random.default_rng([seed, 0x11AC])
        self.flows: dict[tuple[int, int], list[Flow]] = {}  # by machine pair, in start order
        self.rate_of: dict[tuple[int, int], float] = {}  # each pair's rate per unit of weight
        self.updated_at = 0.0
        self.version = 0  # of the scheduled next end; a stale one is ignored
        self.sent = [0] * len(rates)
        self.received = [0] * len(rates)
        self.queued: dict[Any, deque[Flow]] = {}  # a busy channel's messages waiting

    def start(
        self, src: int, dst: int, nbytes: int, done: Done, arg: Any = None, channel: Any = None
    ) -> None:
        """A message of `nbytes` leaves machine `src` for `dst` now, on `channel` (a
        connection's direction: its bytes follow those of the messages before it on it, as
        one TCP stream's do; None: a channel of its own); `done(arg)` once it arrived."""
        assert src != dst, "a message within a machine does not cross a link"
        self.sent[src] += nbytes
        self.received[dst] += nbytes
        weight = float(np.exp(self.rng.normal(0.0, self.spread))) if self.spread else 1.0
        flow = Flow(src, dst, nbytes, done, arg, channel, weight)
        if channel is not None:
            waiting = self.queued.get(channel)
            if waiting is not None:  # the channel is busy: after what is on it
                waiting.append(flow)
                return
            self.queued[channel] = deque()
        self._advance()
        self.flows.setdefault((src, dst), []).append(flow)
        self._allocate()
        self._schedule()

    def _advance(self) -> None:
        """Every flow's bytes move on at its rate since the last change."""
        now = self.clock.now
        elapsed = now - self.updated_at
        if elapsed > 0:
            links = self.links
            sending, receiving = set(), set()
            for pair, flows in self.flows.items():
                moved = self.rate_of[pair] * elapsed
                for flow in flows:
                    flow.left -= moved * flow.weight
                sending.add(pair[0])
                receiving.add(pair[1])
            for m in sending:
                links[m].tx.busy_s += elapsed
            for m in receiving:
                links[m].rx.busy_s += elapsed
        self.updated_at = now

    def _allocate(self) -> None:
        """Weighted max-min fair rates of the flows (progressive filling): a pair's flows all
        get the same rate per unit of weight."""
        counts = {pair: sum(f.weight for f in flows) for pair, flows in self.flows.items()}
        left = {("tx", m): self.rates[m] for m, _ in counts} | {
            ("rx", m): self.rates[m] for _, m in counts
        }
        rate_of: dict[tuple[int, int], float] = {}
        while counts:
            load: dict[tuple[str, int], float] = {}
            for (src, dst), n in counts.items():
                load[("tx", src)] = load.get(("tx", src), 0) + n
                load[("rx", dst)] = load.get(("rx", dst), 0) + n
            tightest = min(load, key=lambda r: (left[r] / load[r], r))
            share = left[tightest] / load[tightest]
            for pair in [p for p in counts if _uses(p, tightest)]:
                rate_of[pair] = share
                n = counts.pop(pair)
                left[("tx", pair[0])] -= n * share
                left[("rx", pair[1])] -= n * share
        self.rate_of = rate_of

    def _schedule(self) -> None:
        """Wake up when the next flow ends at the current rates."""
        self.version += 1
        if not self.flows:
            return
        soonest = min(
            min(flow.left / flow.weight for flow in flows) / self.rate_of[pair]
            for pair, flows in self.flows.items()
        )
        self.clock.at(self.clock.now + max(soonest, 0.0), self._tick, self.version)

    def _tick(self, version: int) -> None:
        if version != self.version:
            return
        self._advance()
        arrive = self.clock.now + self.latency_s
        for pair in list(self.flows):
            flows = self.flows[pair]
            ended = [f for f in flows if _ended(f)]
            if not ended:
                continue
            self.flows[pair] = [f for f in flows if not _ended(f)]
            if not self.flows[pair]:
                del self.flows[pair]
            for flow in ended:
                self.clock.at(arrive, flow.done, flow.arg)
                if flow.channel is not None:
                    self._next_on(flow.channel)
        self._allocate()
        self._schedule()

    def _next_on(self, channel: Any) -> None:
        """A channel's message went through: the next one on it starts."""
        waiting = self.queued[channel]
        if not waiting:
            del self.queued[channel]
            return
        flow = waiting.popleft()
        self.flows.setdefault((flow.src, flow.dst), []).append(flow)


def _ended(flow: Flow) -> bool:
    return flow.left <= FINISHED * flow.nbytes + 1.0


def _uses(pair: tuple[int, int], resource: tuple[str, int]) -> bool:
    way, machine = resource
    return pair[0] == machine if way == "tx" else pair[1] == machine
