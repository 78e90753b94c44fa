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


class Nic:
    """A network interface: one message at a time, first come, first served."""

    __slots__ = ("free_at", "busy_s")

    def __init__(self) -> None:
        self.free_at = 0.0  # when the message now on it is through
        self.busy_s = 0.0

    def book(self, now: float, hold: float) -> float:
        """Hold the NIC for `hold` seconds from now or once it is free; returns when done."""
        done = (now if now > self.free_at else self.free_at) + hold
        self.free_at = done
        return done


class Machine:
    """A simulated machine: one NIC and `threads` CPU slots; `cpu_s`, the seconds of work
    charged to it (on its slots or on the cores it shares); `message_cpu_s` and
    `byte_cpu_s`, the CPU each end of a message takes there and each of its bytes;
    `message_ends` and `message_bytes`, the messages it sent and received and their bytes."""

    def __init__(
        self, name: str, threads: int = 1, message_cpu_s: float = 0.0, byte_cpu_s: float = 0.0
    ):
        self.name = name
        self.message_cpu_s = message_cpu_s
        self.byte_cpu_s = byte_cpu_s
        self.message_ends = 0
        self.message_bytes = 0
        self.nic = Nic()
        self.cpu = Slots(threads)
        self.cpu_s = 0.0

    @property
    def nic_busy_s(self) -> float:
        """Seconds its NIC spent sending or receiving."""
        return self.nic.busy_s


class Network:
    """Messages cost latency plus bytes over bandwidth on the sender's and receiver's NIC."""

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

    def send(
        self,
        src: Machine,
        dst: Machine,
        nbytes: int,
        then: Callback,
        arg: Any = None,
        left: Callback | None = None,
    ) -> None:
        """The message leaves src's NIC, crosses the wire, enters dst's NIC (booked on arrival,
        so messages queue there in arrival order); each end spends its messaging CPU. `left(None)`
        (if given) once src spent its end's CPU and the message is on its way."""
        src.message_ends += 1
        src.message_bytes += nbytes
        if self.handles_messages:
            self.work(
                src,
                src.message_cpu_s + src.byte_cpu_s * nbytes,
                self._transmit,
                (src, dst, nbytes, then, arg, left),
            )
        else:
            self._leave(src, dst, nbytes, then, arg)
            if left is not None:
                left(None)

    def reply(
        self, src: Machine, dst: Machine, nbytes: int, then: Callback, arg: Any = None
    ) -> None:
        """A server's answer (lookup, pull): sent like any message, then perhaps delayed
        further by fault injection before `then(arg)`."""
        if self.delays:
            self.send(src, dst, nbytes, self._replied, (then, arg))
        else:
            self.send(src, dst, nbytes, then, arg)

    def _replied(self, item: tuple[Callback, Any]) -> None:
        then, arg = item
        delay = self.delayed()
        if delay:
            self.clock.at(self.clock.now + delay, then, arg)
        else:
            then(arg)

    def _transmit(
        self, message: tuple[Machine, Machine, int, Callback, Any, Callback | None]
    ) -> None:
        src, dst, nbytes, then, arg, left = message
        self._leave(src, dst, nbytes, then, arg)
        if left is not None:
            left(None)

    def _leave(self, src: Machine, dst: Machine, nbytes: int, then: Callback, arg: Any) -> None:
        """Book the message on src's NIC (and count it on dst's); it arrives a latency later."""
        hold = nbytes / self.bandwidth_bytes_s
        done = src.nic.book(self.clock.now, hold)
        src.nic.busy_s += hold
        dst.nic.busy_s += hold
        self.clock.at(done + self.latency_s, self._arrive, (dst, nbytes, hold, then, arg))

    def _arrive(self, message: tuple[Machine, int, float, Callback, Any]) -> None:
        dst, nbytes, hold, then, arg = message
        received = dst.nic.book(self.clock.now, hold)
        dst.message_ends += 1
        dst.message_bytes += nbytes
        if self.handles_messages:
            handling = dst.message_cpu_s + dst.byte_cpu_s * nbytes
            self.clock.at(received, self._handle, (dst, handling, then, arg))
        else:
            self.clock.at(received, then, arg)

    def _handle(self, message: tuple[Machine, float, Callback, Any]) -> None:
        dst, handling, then, arg = message
        self.work(dst, handling, then, arg)

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


class Collective:
    """All-reduce among n nodes (trainers, or group PSs across groups): each round
    completes when all n contributed; the mean is summed in rank order (deterministic), then
    costs a ring all-reduce's time."""

    def __init__(self, clock: Clock, cost: CostModel, size: int):
        self.clock = clock
        self.cost = cost
        self.size = size
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
        finish = self.clock.now + self.cost.allreduce_s(self.size, nbytes)
        self.clock.at(finish, _release, (waiting, result))


def _release(item: tuple[list[Callback], Any]) -> None:
    waiting, result = item
    for then in waiting:
        then(result)
