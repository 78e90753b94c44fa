"""Virtual-time transport: NICs that queue messages, server CPUs, and ring all-reduce."""

from __future__ import annotations

import simpy

from recsync.runtime.sim.cost import CostModel


class Slots:
    """`k` servers of a FIFO queue, kept as the times they next fall free: a job that
    arrives at `now` starts on the earliest free one. Same order as a SimPy Resource of
    capacity k (first come, first served), at one event per job instead of four."""

    def __init__(self, capacity: int):
        assert capacity >= 1
        self.free_at = [0.0] * capacity

    def finish_time(self, now: float, seconds: float) -> float:
        """Book `seconds` of service for a job arriving now; returns when it completes."""
        free_at = self.free_at
        slot = min(range(len(free_at)), key=free_at.__getitem__) if len(free_at) > 1 else 0
        done = max(now, free_at[slot]) + seconds
        free_at[slot] = done
        return done


class Node:
    """A simulated machine: one NIC (one message at a time) and `threads` CPU slots."""

    def __init__(self, env: simpy.Environment, name: str, threads: int = 1):
        self.name = name
        self.nic = Slots(1)
        self.cpu = Slots(threads)
        self.bytes_sent = 0
        self.nic_busy_s = 0.0


class Network:
    """Messages cost latency plus bytes over bandwidth on the sender's and receiver's NIC."""

    def __init__(self, env: simpy.Environment, cost: CostModel):
        self.env = env
        self.cost = cost
        self.shared_cpu = Slots(cost.shared_cpus) if cost.shared_cpus else None

    def send(self, src: Node, dst: Node, nbytes: int):
        """A process: the message leaves src's NIC, crosses the wire, enters dst's NIC; each
        end spends messaging CPU."""
        cost, env = self.cost, self.env
        hold = cost.transfer_s(nbytes)
        handling = cost.message_cpu_s + cost.byte_cpu_s * nbytes
        if handling:
            yield from self.work(src, handling)
        arrives = src.nic.finish_time(env.now, hold) + cost.latency_s
        src.bytes_sent += nbytes
        src.nic_busy_s += hold
        dst.nic_busy_s += hold
        yield env.timeout(arrives - env.now)
        # the receiving NIC is booked on arrival, so messages queue there in arrival order
        yield env.timeout(dst.nic.finish_time(env.now, hold) - env.now)
        if handling:
            yield from self.work(dst, handling)

    def work(self, node: Node, seconds: float):
        """A process: `seconds` of work on one of node's CPU slots (or the shared cores)."""
        cpu = self.shared_cpu or node.cpu
        env = self.env
        yield env.timeout(cpu.finish_time(env.now, seconds) - env.now)


class Collective:
    """All-reduce among n trainers: each round completes when all n contributed; the mean
    is summed in trainer order (deterministic), then costs a ring all-reduce's time."""

    def __init__(self, env: simpy.Environment, cost: CostModel, size: int):
        self.env = env
        self.cost = cost
        self.size = size
        self._values: dict[int, object] = {}
        self._done_flags = 0
        self._event = env.event()

    def contribute(self, trainer: int, values, done: bool):
        """A process returning (mean, number of trainers done)."""
        assert trainer not in self._values, "a trainer joined the same round twice"
        self._values[trainer] = values
        self._done_flags += int(done)
        event = self._event
        if len(self._values) == self.size:
            ordered = [self._values[i] for i in range(self.size)]
            total = ordered[0].clone()
            for v in ordered[1:]:
                total += v
            nbytes = total.numel() * total.element_size()
            result = (total / self.size, self._done_flags)
            self._values, self._done_flags, self._event = {}, 0, self.env.event()
            self.env.process(self._finish(event, result, nbytes))
        return (yield event)

    def _finish(self, event, result, nbytes: int):
        yield self.env.timeout(self.cost.allreduce_s(self.size, nbytes))
        event.succeed(result)
