"""Virtual-time transport: NICs that queue messages, server CPUs, and ring all-reduce."""

from __future__ import annotations

import simpy

from recsync.runtime.sim.cost import CostModel


class Node:
    """A simulated machine: one NIC (one message at a time) and `threads` CPU slots."""

    def __init__(self, env: simpy.Environment, name: str, threads: int = 1):
        self.name = name
        self.nic = simpy.Resource(env, capacity=1)
        self.cpu = simpy.Resource(env, capacity=threads)
        self.bytes_sent = 0
        self.nic_busy_s = 0.0


class Network:
    """Messages cost latency plus bytes over bandwidth on the sender's and receiver's NIC."""

    def __init__(self, env: simpy.Environment, cost: CostModel):
        self.env = env
        self.cost = cost
        self.shared_cpu = simpy.Resource(env, cost.shared_cpus) if cost.shared_cpus else None

    def send(self, src: Node, dst: Node, nbytes: int):
        """A process: the message leaves src's NIC, crosses the wire, enters dst's NIC; each
        end spends messaging CPU."""
        cost = self.cost
        hold = cost.transfer_s(nbytes)
        handling = cost.message_cpu_s + cost.byte_cpu_s * nbytes
        if handling:
            yield from self.work(src, handling)
        with src.nic.request() as slot:
            yield slot
            yield self.env.timeout(hold)
        src.bytes_sent += nbytes
        src.nic_busy_s += hold
        dst.nic_busy_s += hold
        yield self.env.timeout(cost.latency_s)
        with dst.nic.request() as slot:
            yield slot
            yield self.env.timeout(hold)
        if handling:
            yield from self.work(dst, handling)

    def work(self, node: Node, seconds: float):
        """A process: `seconds` of work on one of node's CPU slots (or the shared cores)."""
        cpu = self.shared_cpu or node.cpu
        with cpu.request() as slot:
            yield slot
            yield self.env.timeout(seconds)


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
