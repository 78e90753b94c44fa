"""Gradient strategies in virtual time: dense block servers and embedding shards whose
policies buffer, apply or drop pushed gradients; workers wait where the policy says."""

from __future__ import annotations

import math
from functools import partial

import simpy

from recsync.ps.gradient_servers import DenseBlockServer, GradientServer, SparseShardServer
from recsync.runtime.sim.network import Network, Node
from recsync.trainer import effects as fx

REQUEST_BYTES = 64


class SimParameterServers:
    """The servers of a gradient strategy and the effects that talk to them."""

    def __init__(
        self,
        env: simpy.Environment,
        network: Network,
        delayed,
        dense: list[DenseBlockServer],
        dense_hosts: list[Node],
        sparse: list[SparseShardServer],
        sparse_hosts: list[Node],
    ):
        self.env, self.network, self.delayed = env, network, delayed
        self.dense, self.dense_hosts = dense, dense_hosts
        self.sparse, self.sparse_hosts = sparse, sparse_hosts
        self.changed = env.event()
        self.inflight: dict[int, list] = {}
        self.cost = network.cost

    def _notify(self) -> None:
        """Some server's state moved (a step applied, a worker left): re-check waiters."""
        if self.changed.callbacks:
            event, self.changed = self.changed, self.env.event()
            event.succeed()

    def may_start(self, effect: fx.AwaitStart) -> bool:
        w = effect.worker
        dense_last = effect.dense_versions or [None] * len(self.dense)
        sparse_last = effect.sparse_versions or [None] * len(self.sparse)
        return all(s.may_start(w, v) for s, v in zip(self.dense, dense_last, strict=True)) and all(
            s.may_start(w, v) for s, v in zip(self.sparse, sparse_last, strict=True)
        )

    def await_start(self, effect: fx.AwaitStart):
        while not self.may_start(effect):
            yield self.changed

    def pull_dense(self, host: Node, effect: fx.PullDense, sent: dict):
        wanted = effect.min_versions or [0] * len(self.dense)
        if len(self.dense) == 1:  # one block: no need for a concurrent process
            return [(yield from self._pull(host, 0, sent, wanted[0]))]
        calls = [
            self.env.process(self._pull(host, b, sent, wanted[b])) for b in range(len(self.dense))
        ]
        if effect.fraction >= 1.0:
            yield simpy.AllOf(self.env, calls)
            return [call.value for call in calls]
        need = max(1, math.ceil(effect.fraction * len(calls)))
        deadline = self.env.now + effect.wait_s
        while True:
            arrived = sum(1 for c in calls if c.processed)
            if arrived == len(calls) or (arrived >= need and self.env.now >= deadline):
                break
            waits = [c for c in calls if not c.processed]
            if self.env.now < deadline:
                waits.append(self.env.timeout(deadline - self.env.now))
            yield simpy.AnyOf(self.env, waits)
        return [call.value if call.processed else None for call in calls]

    def _pull(self, host: Node, block: int, sent: dict, min_version: int = 0):
        server, server_host = self.dense[block], self.dense_hosts[block]
        sent["PullDense"] += REQUEST_BYTES
        yield from self.network.send(host, server_host, REQUEST_BYTES)
        while server.version < min_version:  # the block answers once it has that update
            yield self.changed
        yield from self.network.work(server_host, self.cost.request_s)
        values, version = server.pull()
        yield from self.network.send(server_host, host, values.numel() * 4)
        delay = self.delayed()
        if delay:
            yield self.env.timeout(delay)
        return values, version

    def push(self, host: Node, effect: fx.PushGradients, sent: dict) -> None:
        calls = self.inflight.setdefault(effect.worker, [])
        calls[:] = [c for c in calls if not c.processed]
        for block, version, grad in effect.dense:
            size = grad.numel() * 4
            sent["PushDense"] += size
            elements = grad.numel()
            work = self.cost.request_s + self.cost.element_s * elements
            call = partial(self.dense[block].push, effect.worker, version, grad, effect.token)
            calls.append(self.env.process(self._deliver(host, block, True, size, work, call)))
        for shard, version, rows, grads, pulled in effect.sparse:
            size = rows.numel() * 8 + grads.numel() * 4
            sent["PushSparse"] += size
            work = self.cost.request_s + self.cost.row_s * rows.numel()
            call = partial(
                self.sparse[shard].push, effect.worker, version, rows, grads, pulled, effect.token
            )
            calls.append(self.env.process(self._deliver(host, shard, False, size, work, call)))

    def _deliver(self, host: Node, index: int, dense: bool, size: int, work: float, call):
        server_host = self.dense_hosts[index] if dense else self.sparse_hosts[index]
        server = self.dense[index] if dense else self.sparse[index]
        yield from self.network.send(host, server_host, size)
        yield from self.network.work(server_host, work)
        self._run(server, call())

    def _run(self, server: GradientServer, timers) -> None:
        self._notify()
        for timer in timers:
            self.env.process(self._timer(server, timer.timer_id, timer.seconds))

    def _timer(self, server: GradientServer, timer_id: int, seconds: float):
        yield self.env.timeout(seconds)
        self._run(server, server.timer(timer_id))

    def worker_done(self, effect: fx.WorkerDone):
        """After the worker's pushes landed, every server learns it pushes no more."""
        pending = [c for c in self.inflight.pop(effect.worker, []) if not c.processed]
        if pending:
            yield simpy.AllOf(self.env, pending)
        for server in [*self.dense, *self.sparse]:
            self._run(server, server.worker_done(effect.worker))
