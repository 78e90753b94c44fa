"""Gradient strategies in virtual time: dense block servers and embedding shards whose
policies buffer, apply or drop pushed gradients; workers wait where the policy says.

Every effect handler takes the worker's continuation `resume(result)` (see clock.py)."""

from __future__ import annotations

import math
from functools import partial

from recsync.ps.gradient_servers import DenseBlockServer, GradientServer, SparseShardServer
from recsync.runtime.sim.clock import Callback, Clock, Gather, Signal
from recsync.runtime.sim.network import REQUEST_BYTES, Network, Node
from recsync.trainer import effects as fx


class PartialPull:
    """A dense pull that may go on without some blocks: done once every block arrived, or
    once `need` of them arrived and the deadline passed (PSP's partial pull)."""

    def __init__(self, clock: Clock, count: int, need: int, deadline: float, then: Callback):
        self.clock = clock
        self.results: list = [None] * count
        self.arrived = 0
        self.need = need
        self.deadline = deadline
        self.then: Callback | None = then
        if clock.now < deadline:
            clock.at(deadline, self._check)

    def deliver(self, item: tuple) -> None:
        if self.then is None:  # the worker went on without this block
            return
        index, value = item
        self.results[index] = value
        self.arrived += 1
        self._check()

    def _check(self, _=None) -> None:
        if self.then is None:
            return
        done = self.arrived == len(self.results)
        if done or (self.arrived >= self.need and self.clock.now >= self.deadline):
            then, self.then = self.then, None
            then(list(self.results))


class SimParameterServers:
    """The servers of a gradient strategy and the effects that talk to them."""

    def __init__(
        self,
        clock: Clock,
        network: Network,
        dense: list[DenseBlockServer],
        dense_hosts: list[Node],
        sparse: list[SparseShardServer],
        sparse_hosts: list[Node],
    ):
        self.clock, self.network = clock, network
        self.dense, self.dense_hosts = dense, dense_hosts
        self.sparse, self.sparse_hosts = sparse, sparse_hosts
        self.changed = Signal(clock)
        self.inflight: dict[int, int] = {}  # worker -> its pushes not delivered yet
        self.drained: dict[int, Callback] = {}  # worker -> who waits for them
        self.cost = network.cost
        self.gated = any(s.policy.holds_workers for s in [*dense, *sparse])

    def may_start(self, effect: fx.AwaitStart) -> bool:
        if not self.gated:
            return True
        w = effect.worker
        dense_last = effect.dense_versions or [None] * len(self.dense)
        sparse_last = effect.sparse_versions or [None] * len(self.sparse)
        return all(s.may_start(w, v) for s, v in zip(self.dense, dense_last, strict=True)) and all(
            s.may_start(w, v) for s, v in zip(self.sparse, sparse_last, strict=True)
        )

    def await_start(self, effect: fx.AwaitStart, resume: Callback) -> None:
        if self.may_start(effect):
            resume(None)
        else:
            self.changed.wait(self._recheck_start, (effect, resume))

    def _recheck_start(self, item: tuple) -> None:
        self.await_start(*item)

    def pull_dense(self, host: Node, effect: fx.PullDense, sent: dict, resume: Callback) -> None:
        wanted = effect.min_versions or [0] * len(self.dense)
        count = len(self.dense)
        if effect.fraction >= 1.0 or count == 1:
            gather = Gather(count, resume)
        else:
            need = max(1, math.ceil(effect.fraction * count))
            gather = PartialPull(self.clock, count, need, self.clock.now + effect.wait_s, resume)
        sent["PullDense"] += REQUEST_BYTES * count
        self.clock.fan_out(self._send_pulls, [(b, host, wanted[b], gather) for b in range(count)])

    def _send_pulls(self, requests: list[tuple]) -> None:
        for item in requests:
            server_host, host = self.dense_hosts[item[0]], item[1]
            self.network.send(host, server_host, REQUEST_BYTES, self._pull_arrived, item)

    def _pull_arrived(self, item: tuple) -> None:
        block, host, min_version, gather = item
        if self.dense[block].version < min_version:  # the block answers once it has that update
            self.changed.wait(self._pull_arrived, item)
            return
        self.network.work(self.dense_hosts[block], self.cost.request_s, self._pull_served, item)

    def _pull_served(self, item: tuple) -> None:
        block, host, _, gather = item
        values, version = self.dense[block].pull()
        self.network.reply(
            self.dense_hosts[block],
            host,
            values.numel() * 4,
            gather.deliver,
            (block, (values, version)),
        )

    def push(self, host: Node, effect: fx.PushGradients, sent: dict) -> None:
        """Fire and forget: the messages leave once the worker went on to its next effect."""
        worker, messages = effect.worker, []
        for block, version, grad in effect.dense:
            size = grad.numel() * 4
            sent["PushDense"] += size
            work = self.cost.request_s + self.cost.element_s * grad.numel()
            call = partial(self.dense[block].push, worker, version, grad, effect.token)
            messages.append((self.dense[block], self.dense_hosts[block], size, work, call))
        for shard, version, rows, grads, pulled in effect.sparse:
            size = rows.numel() * 8 + grads.numel() * 4
            sent["PushSparse"] += size
            work = self.cost.request_s + self.cost.row_s * rows.numel()
            server = self.sparse[shard]
            call = partial(server.push, worker, version, rows, grads, pulled, effect.token)
            messages.append((server, self.sparse_hosts[shard], size, work, call))
        self.inflight[worker] = self.inflight.get(worker, 0) + len(messages)
        self.clock.soon(self._send_pushes, (worker, host, messages), urgent=True)

    def _send_pushes(self, item: tuple) -> None:
        worker, host, messages = item
        for server, server_host, size, work, call in messages:
            item = (worker, server, server_host, work, call)
            self.network.send(host, server_host, size, self._push_arrived, item)

    def _push_arrived(self, item: tuple) -> None:
        self.network.work(item[2], item[3], self._push_served, item)

    def _push_served(self, item: tuple) -> None:
        worker, server, _, _, call = item
        self._run(server, call())
        self.inflight[worker] -= 1
        if not self.inflight[worker] and worker in self.drained:
            self.clock.soon(self.drained.pop(worker))

    def _run(self, server: GradientServer, timers) -> None:
        """Some server's state moved (a step applied, a worker left): waiters re-check."""
        self.changed.fire()
        for timer in timers:
            self.clock.at(self.clock.now + timer.seconds, self._timer, (server, timer.timer_id))

    def _timer(self, item: tuple) -> None:
        server, timer_id = item
        self._run(server, server.timer(timer_id))

    def worker_done(self, effect: fx.WorkerDone, resume: Callback) -> None:
        """After the worker's pushes landed, every server learns it pushes no more."""
        worker = effect.worker
        if self.inflight.get(worker):
            self.drained[worker] = partial(self._tell_done, worker, resume)
        else:
            self._tell_done(worker, resume)

    def _tell_done(self, worker: int, resume: Callback, _=None) -> None:
        self.inflight.pop(worker, None)
        for server in [*self.dense, *self.sparse]:
            self._run(server, server.worker_done(worker))
        resume(None)
