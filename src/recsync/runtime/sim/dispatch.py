"""Effects in virtual time: each effect of a node's loop becomes timed actions on the
clock (messages on NICs, work on CPUs, server calls), ending in the loop's `resume`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from recsync.runtime.sim.clock import Gather
from recsync.runtime.sim.network import REQUEST_BYTES
from recsync.runtime.sim.runner import LoopRunner
from recsync.trainer import effects as fx

if TYPE_CHECKING:
    from recsync.runtime.sim.job import SimJob


def nbytes(*tensors) -> int:
    total = 0
    for t in tensors:
        if t is not None:
            total += t.numel() * t.element_size()
    return total


def batch_bytes(batch) -> int:
    if batch is None:
        return REQUEST_BYTES
    return nbytes(batch.dense, batch.ids, batch.offsets, batch.labels)


class EffectDispatch:
    """Turns the effects of a SimJob's loops into timed actions on its nodes."""

    def __init__(self, job: SimJob):
        self.job = job
        self.clock, self.network, self.cost = job.clock, job.network, job.cost
        self.reader, self.reader_host, self.handed = job.reader, job.reader_host, job.handed
        self.trainers, self.trainer_hosts, self.states = job.trainers, job.trainer_hosts, job.states
        self.servers, self.server_hosts = job.servers, job.server_hosts
        self.sync_servers, self.sync_hosts = job.sync_servers, job.sync_hosts
        self.params, self.collective, self.speeds = job.params, job.collective, job.speeds
        self.sent, self.sparse_policy = job.sent, job.sparse_policy
        self.flops_per_example = job.flops_per_example
        self._handlers = {
            fx.NextBatch: self._next_batch,
            fx.Lookup: self._lookup,
            fx.Compute: self._compute,
            fx.PushSparse: self._push_sparse,
            fx.Exchange: self._exchange,
            fx.AllReduce: self._allreduce,
            fx.Now: self._now,
            fx.AwaitStart: self._await_start,
            fx.PullDense: self._pull_dense,
            fx.PushGradients: self._push_gradients,
            fx.WorkerDone: self._worker_done,
        }

    def __call__(self, runner: LoopRunner, effect: fx.Effect) -> None:
        handler = self._handlers.get(type(effect))
        if handler is None:
            self.states[runner.trainer].handle(effect, runner.resume)
        else:
            handler(runner, effect)

    def _next_batch(self, runner: LoopRunner, effect: fx.NextBatch) -> None:
        t = runner.trainer
        self.states[t].progress()
        host = self.trainer_hosts[t]
        item = (t, effect, runner.resume)
        self.network.send(host, self.reader_host, REQUEST_BYTES, self._at_reader, item)

    def _lookup(self, runner: LoopRunner, effect: fx.Lookup) -> None:
        self._lookups(runner.trainer, effect, runner.resume)

    def _compute(self, runner: LoopRunner, effect: fx.Compute) -> None:
        flops = effect.examples * self.flops_per_example
        seconds = self.speeds.compute_s(runner.worker, flops, self.clock.now)
        self.network.work(self.trainer_hosts[runner.trainer], seconds, runner.resume)

    def _push_sparse(self, runner: LoopRunner, effect: fx.PushSparse) -> None:
        t = runner.trainer
        self.sent[t]["PushSparse"] += sum(nbytes(rows, grads) for _, rows, grads in effect.updates)
        item = (self.trainer_hosts[t], effect.updates)
        self.clock.soon(self._send_pushes, item, urgent=True)
        runner.resume(None)

    def _exchange(self, runner: LoopRunner, effect: fx.Exchange) -> None:
        t = runner.trainer
        size = nbytes(effect.values)
        self.sent[t]["Exchange"] += size
        host, sync_host = self.trainer_hosts[t], self.sync_hosts[effect.server]
        item = (t, effect, runner.resume)
        self.network.send(host, sync_host, size, self._exchange_arrived, item)

    def _allreduce(self, runner: LoopRunner, effect: fx.AllReduce) -> None:
        t = runner.trainer
        self.sent[t]["AllReduce"] += nbytes(effect.values)
        self.collective.contribute(t, effect.values, effect.done, runner.resume)

    def _now(self, runner: LoopRunner, effect: fx.Now) -> None:
        runner.resume(self.clock.now)

    def _await_start(self, runner: LoopRunner, effect: fx.AwaitStart) -> None:
        self.params.await_start(effect, runner.resume)

    def _pull_dense(self, runner: LoopRunner, effect: fx.PullDense) -> None:
        t = runner.trainer
        self.params.pull_dense(self.trainer_hosts[t], effect, self.sent[t], runner.resume)

    def _push_gradients(self, runner: LoopRunner, effect: fx.PushGradients) -> None:
        t = runner.trainer
        self.params.push(self.trainer_hosts[t], effect, self.sent[t])
        runner.resume(None)

    def _worker_done(self, runner: LoopRunner, effect: fx.WorkerDone) -> None:
        self.params.worker_done(effect, runner.resume)

    def _at_reader(self, item: tuple) -> None:
        self.network.work(self.reader_host, self.cost.reader_batch_s, self._hand_batch, item)

    def _hand_batch(self, item: tuple) -> None:
        t, effect, resume = item
        batch, token = self.reader.next_batch_with_token(t)
        if batch is not None:
            handed = self.reader.total_examples
            self.handed.append((self.clock.now, handed))
            self.job.maybe_evaluate(handed - batch.batch_size)
            if self.job.on_handed is not None:
                self.job.on_handed(handed)
        elif self.job.in_flight_at_stop is None:
            trained = sum(trainer.stats.total_examples for trainer in self.trainers)
            self.job.in_flight_at_stop = self.reader.total_examples - trained
        answer = (batch, token) if effect.with_token else batch
        self.network.send(
            self.reader_host, self.trainer_hosts[t], batch_bytes(batch), resume, answer
        )

    def _lookups(self, t: int, effect: fx.Lookup, resume) -> None:
        assert self.sparse_policy or not effect.with_versions, "versions: policy shards only"
        wanted = effect.min_versions or [0] * len(self.servers)
        gather = Gather(len(effect.requests), resume)
        lookups = []
        for i, request in enumerate(effect.requests):
            size = nbytes(request.rows, request.offsets, request.weights)
            self.sent[t]["Lookup"] += size
            lookups.append((size, (t, i, request, wanted[request.shard], gather)))
        self.clock.fan_out(self._send_lookups, lookups)

    def _send_lookups(self, lookups: list[tuple]) -> None:
        for size, item in lookups:
            t, request = item[0], item[2]
            host = self.server_hosts[request.shard]
            self.network.send(self.trainer_hosts[t], host, size, self._lookup_arrived, item)

    def _send_pushes(self, item: tuple) -> None:
        """Fire and forget: the messages leave once the worker went on to its next effect."""
        host, updates = item
        for shard, rows, grads in updates:
            size = nbytes(rows, grads)
            self.network.send(
                host, self.server_hosts[shard], size, self._push_arrived, (shard, rows, grads)
            )

    def _lookup_arrived(self, item: tuple) -> None:
        _, _, request, min_version, _ = item
        if min_version and self.servers[request.shard].version < min_version:
            self.params.changed.wait(self._lookup_arrived, item)  # PSP: wait for that update
            return
        seconds = self.cost.request_s + self.cost.row_s * int(request.rows.numel())
        self.network.work(self.server_hosts[request.shard], seconds, self._lookup_served, item)

    def _lookup_served(self, item: tuple) -> None:
        t, i, request, _, gather = item
        server = self.servers[request.shard]
        answer = server.lookup(request.rows, request.offsets, request.weights)
        if self.sparse_policy:
            answer = (*answer, server.version)
        pooled = answer[0] if self.sparse_policy else answer
        server_host = self.server_hosts[request.shard]
        host = self.trainer_hosts[t]
        self.network.reply(server_host, host, nbytes(pooled), gather.deliver, (i, answer))

    def _push_arrived(self, item: tuple) -> None:
        shard, rows, _ = item
        seconds = self.cost.request_s + self.cost.row_s * rows.numel()
        self.network.work(self.server_hosts[shard], seconds, self._push_served, item)

    def _push_served(self, item: tuple) -> None:
        shard, rows, grads = item
        self.servers[shard].apply(rows, grads)

    def _exchange_arrived(self, item: tuple) -> None:
        t, effect, resume = item
        seconds = self.cost.request_s + self.cost.element_s * nbytes(effect.values) / 4
        self.network.work(self.sync_hosts[effect.server], seconds, self._exchange_served, item)

    def _exchange_served(self, item: tuple) -> None:
        t, effect, resume = item
        host = self.sync_hosts[effect.server]
        center = self.sync_servers[effect.server].exchange(effect.values)
        self.network.send(host, self.trainer_hosts[t], nbytes(center), resume, center)
