"""The distributed job in virtual time: the same nodes and policies as the Ray engine, and
the real model math, run on a virtual clock in a deterministic order."""

from __future__ import annotations

import gc
from collections import defaultdict
from typing import Any

import torch

from recsync.coordinator.checkpoint import (
    JobState,
    copy_state,
    join_optimizer_states,
    layout_slices,
)
from recsync.coordinator.job import final_dense
from recsync.coordinator.planning import JobSpec, initial_dense
from recsync.coordinator.reader import ReaderNode
from recsync.coordinator.summary import JobOutcome, evaluate_model, job_summary
from recsync.data.batch import Batch
from recsync.io.sources import open_training_data
from recsync.ps.gradient_servers import DenseBlockServer, SparseShardServer
from recsync.ps.local import shard_weight
from recsync.ps.placement import JobPlan
from recsync.ps.servers import EmbeddingServerNode, SyncServerNode
from recsync.ps.shard import EmbeddingShard
from recsync.runtime.sim.clock import Clock, Gather
from recsync.runtime.sim.cost import CostModel, WorkerSpeeds
from recsync.runtime.sim.gradient import SimParameterServers
from recsync.runtime.sim.network import Collective, Network, Node
from recsync.runtime.sim.runner import LoopRunner
from recsync.runtime.sim.trainer_state import TrainerState
from recsync.trainer import effects as fx
from recsync.trainer.node import Loop, TrainerNode
from recsync.trainer.replica import DenseReplica

REQUEST_BYTES = 64


def nbytes(*tensors) -> int:
    return sum(t.numel() * t.element_size() for t in tensors if t is not None)


def batch_bytes(batch: Batch | None) -> int:
    if batch is None:
        return REQUEST_BYTES
    return nbytes(batch.dense, batch.ids, batch.offsets, batch.labels)


def steady_eps(handed: list[tuple[float, int]], low: float = 0.2, high: float = 0.8) -> float:
    """Examples/s while the middle of the data (from `low` to `high` of it) was handed out:
    the start (threads ramping up) and the tail (threads running dry) left out."""
    total = handed[-1][1] if handed else 0
    inside = [(t, n) for t, n in handed if low * total <= n <= high * total]
    if len(inside) < 2 or inside[-1][0] == inside[0][0]:
        return total / handed[-1][0] if handed and handed[-1][0] > 0 else 0.0
    return (inside[-1][1] - inside[0][1]) / (inside[-1][0] - inside[0][0])


class SimJob:
    """Builds the job's nodes in one process and runs their loops in virtual time."""

    def __init__(
        self,
        spec: JobSpec,
        plan: JobPlan,
        cost: CostModel,
        server_threads: int = 4,
        eval_every: int | None = None,
    ):
        """`eval_every`: evaluate the current model on the test set each time that many more
        examples were handed out (in virtual time, at no cost): `curve`."""
        self.spec, self.plan, self.cost = spec, plan, cost
        cluster, train, seed = spec.cluster, spec.train, spec.train.seed
        self.clock = clock = Clock()
        self.network = Network(clock, cost)
        self.source = open_training_data(
            spec.synthetic, spec.files, train.batch_size, seed, spec.start_example
        )
        strategy = spec.strategy
        self.gradient = strategy.needs == "dense_servers"
        self.sparse_policy = strategy.sparse_policy
        num_workers = cluster.hogwild_threads
        tokens = strategy.tokens_per_step(num_workers) if self.gradient else None
        self.reader = ReaderNode(
            iter(self.source.train_batches()),
            cluster.num_trainers,
            tokens,
            spec.stop_after_examples,
        )
        resume = spec.resume
        if resume is not None:
            resume.check_layout(plan.embeddings.layout)
        self.reader_host = Node("reader")
        layout = plan.embeddings.layout
        norm = getattr(strategy, "staleness_norm", None)
        self.servers, self.server_hosts = [], []
        for i in range(layout.num_shards):
            weight = shard_weight(layout, i, seed)
            shard = EmbeddingShard(weight, train.sparse_optimizer.build(*weight.shape))
            if resume is not None:
                shard.load_state_dict(resume.shards[i])
            if self.sparse_policy:
                policy = strategy.make_server(num_workers, True)
                self.servers.append(SparseShardServer(i, shard, policy, norm))
            else:
                self.servers.append(EmbeddingServerNode(i, shard))
            self.server_hosts.append(Node(f"embedding-server-{i}", server_threads))
        self.sync_servers, self.sync_hosts, ranges = [], [], None
        if plan.dense is not None:
            ranges = plan.dense.ranges
            initial = initial_dense(spec)
            role = "dense-server" if self.gradient else "sync-server"
            for i, (start, stop) in enumerate(ranges):
                values = initial[start:stop].clone()
                if self.gradient:
                    policy = strategy.make_server(num_workers, False)
                    node = DenseBlockServer(i, values, train.dense_optimizer, policy, norm)
                    if resume is not None:
                        node.optimizer.load_state_dict(resume.optimizer_slice(start, stop))
                else:
                    node = SyncServerNode(i, strategy.make_center(values))
                self.sync_servers.append(node)
                self.sync_hosts.append(Node(f"{role}-{i}", server_threads))
        m = cluster.workers_per_trainer
        # virtual-time workers compute one at a time: they can share one dense workspace
        workspace = DenseReplica(spec.model, seed, train.dense_optimizer) if self.gradient else None
        self.trainers = [
            TrainerNode(
                i,
                cluster.num_trainers,
                m,
                spec.model,
                train,
                layout,
                spec.strategy,
                ranges,
                workspace,
                None if resume is None else (resume.dense, resume.dense_optimizer),
            )
            for i in range(cluster.num_trainers)
        ]
        self.trainer_hosts = [Node(f"trainer-{i}", m) for i in range(cluster.num_trainers)]
        self.states = [TrainerState(clock, t) for t in self.trainers]
        self.speeds = WorkerSpeeds(cost, cluster.hogwild_threads, seed)
        self.flops_per_example = spec.model.dense_flops_per_example()
        self.collective = (
            Collective(clock, cost, cluster.num_trainers)
            if spec.strategy.needs == "allreduce"
            else None
        )
        self.params = None
        if self.sparse_policy:
            self.params = SimParameterServers(
                clock,
                self.network,
                self.speeds.delayed,
                self.sync_servers,
                self.sync_hosts,
                self.servers,
                self.server_hosts,
            )
        self.eval_every = eval_every
        self.curve: list[dict[str, float]] = []
        self.next_eval = eval_every or 0
        self.crashed: set[int] = set()
        self.in_flight_at_stop: int | None = None
        self.final_state: JobState | None = None
        faults = cost.faults
        if faults.crash_trainer is not None:
            if faults.crash_trainer >= cluster.num_trainers:
                raise ValueError(
                    f"faults.crash_trainer {faults.crash_trainer}: the job has "
                    f"{cluster.num_trainers} trainers"
                )
            if strategy.needs == "allreduce":
                raise ValueError(
                    f"faults.crash_trainer: {strategy.describe()} all-reduces across trainers; "
                    "a crash would stop the job (the Ray engine reports it as a node failure)"
                )
        self.handed: list[tuple[float, int]] = []  # (virtual time, examples handed so far)
        self.blocked = [defaultdict(float) for _ in self.trainers]
        self.sent = [defaultdict(int) for _ in self.trainers]

    def run(self, until: float | None = None) -> dict[str, Any]:
        """Train one pass in virtual time; returns the same summary as the Ray engine."""
        m = self.spec.cluster.workers_per_trainer
        for t, trainer in enumerate(self.trainers):
            for w in range(m):
                self._runner(t, t * m + w, trainer.worker_loop(w)).start()
            self._runner(t, None, trainer.sync_loop()).start()
        # what exists before the run (modules, the job's nodes) stays out of the collector's
        # full passes, which would otherwise re-scan it every time
        frozen_by_caller = gc.get_freeze_count()
        gc.freeze()
        try:
            self.clock.run(until=until)
        finally:
            if not frozen_by_caller:
                gc.unfreeze()
        outcome = JobOutcome(
            engine="sim",
            trainer_stats=[t.stats for t in self.trainers],
            blocked_seconds=[dict(b) for b in self.blocked],
            bytes_sent=[dict(s) for s in self.sent],
            server_stats={
                **{f"embedding-server-{s.index}": s.stats for s in self.servers},
                **{
                    host.name: s.stats
                    for s, host in zip(self.sync_servers, self.sync_hosts, strict=True)
                },
            },
            handed_examples=list(self.reader.handed_examples),
            lost_examples=[
                handed - trainer.stats.total_examples if t in self.crashed else 0
                for t, (handed, trainer) in enumerate(
                    zip(self.reader.handed_examples, self.trainers, strict=True)
                )
            ],
            train_seconds=self.clock.now,
            replicas=self._final_replicas(),
            shard_weights=[s.shard.weight for s in self.servers],
            test=self.source.test_set(),
            teacher_auc=self.source.teacher_auc,
            skipped=self.source.skips.as_dict(),
        )
        summary = job_summary(self.spec, self.plan.embeddings.layout, outcome)
        summary["eps_steady"] = steady_eps(self.handed)
        self.final_state = self._snapshot(outcome.replicas)
        if self.eval_every:
            self.curve.append(
                {
                    "examples": self.reader.total_examples,
                    "virtual_s": float(self.clock.now),
                    "auc": summary["test_auc"],
                    "logloss": summary["test_logloss"],
                }
            )
        summary["checkpoint"] = {
            "data_position": self.final_state.data_position,
            "global_step": self.final_state.global_step,
            "in_flight_examples": self.final_state.in_flight_examples,
        }
        return summary

    def _maybe_evaluate(self, examples: int) -> None:
        """Quality of the model as it is now, each time `eval_every` more examples went out."""
        if not self.eval_every or examples < self.next_eval:
            return
        while self.next_eval <= examples:
            self.next_eval += self.eval_every
        quality = evaluate_model(
            self.spec,
            self.plan.embeddings.layout,
            final_dense(self._final_replicas(), self.spec.strategy.needs),
            [s.shard.weight for s in self.servers],
            self.source.test_set(),
        )
        self.curve.append(
            {
                "examples": examples,
                "virtual_s": float(self.clock.now),
                "auc": quality.auc,
                "logloss": quality.logloss,
            }
        )

    def _snapshot(self, replicas) -> JobState:
        """The quiescent end state (every handed-out batch trained): a checkpoint."""
        spec = self.spec
        if self.gradient:
            optimizer = join_optimizer_states([s.optimizer.state_dict() for s in self.sync_servers])
            steps = self.sync_servers[0].stats.steps
        else:
            optimizer = self.trainers[0].replica.optimizer.state_dict()
            steps = sum(t.stats.total_iterations for t in self.trainers)
        return JobState(
            dense=final_dense(replicas, spec.strategy.needs).clone(),
            dense_optimizer=copy_state(optimizer),
            shards=[copy_state(s.shard.state_dict()) for s in self.servers],
            slices=layout_slices(self.plan.embeddings.layout),
            data_position=spec.start_example + self.reader.total_examples,
            global_step=(0 if spec.resume is None else spec.resume.global_step) + steps,
            in_flight_examples=self.in_flight_at_stop or 0,
            strategy=spec.strategy.describe(),
        )

    def _final_replicas(self):
        if self.gradient:
            return [torch.cat([s.values for s in self.sync_servers])]
        return [t.state() for t in self.trainers]

    def _crashed(self, t: int) -> bool:
        faults = self.cost.faults
        return faults.crash_trainer == t and self.clock.now >= faults.crash_at_s

    def _runner(self, t: int, worker: int | None, loop: Loop) -> LoopRunner:
        return LoopRunner(
            self.clock,
            t,
            worker,
            loop,
            self._dispatch,
            self.blocked[t],
            lambda: self._crashed(t),
            self._finished,
            self._crash,
        )

    def _finished(self, runner: LoopRunner) -> None:
        if runner.worker is not None:
            self.states[runner.trainer].worker_finished()

    def _crash(self, runner: LoopRunner) -> None:
        """A crashed worker thread: its batch is lost; gradient servers stop waiting for it."""
        self.crashed.add(runner.trainer)
        if runner.worker is not None and self.params is not None:
            self.params.worker_done(fx.WorkerDone(runner.worker), lambda _: self._finished(runner))
        else:
            self._finished(runner)

    def _dispatch(self, runner: LoopRunner, effect: fx.Effect) -> None:
        t, resume = runner.trainer, runner.resume
        host = self.trainer_hosts[t]
        if isinstance(effect, fx.NextBatch):
            self.states[t].progress()
            self.network.send(
                host, self.reader_host, REQUEST_BYTES, self._at_reader, (t, effect, resume)
            )
        elif isinstance(effect, fx.Lookup):
            self._lookups(t, effect, resume)
        elif isinstance(effect, fx.Compute):
            flops = effect.examples * self.flops_per_example
            seconds = self.speeds.compute_s(runner.worker, flops, self.clock.now)
            self.network.work(host, seconds, resume)
        elif isinstance(effect, fx.PushSparse):
            self.sent[t]["PushSparse"] += sum(
                nbytes(rows, grads) for _, rows, grads in effect.updates
            )
            self.clock.soon(self._send_pushes, (host, effect.updates), urgent=True)
            resume(None)
        elif isinstance(effect, fx.Exchange):
            size = nbytes(effect.values)
            self.sent[t]["Exchange"] += size
            sync_host = self.sync_hosts[effect.server]
            self.network.send(host, sync_host, size, self._exchange_arrived, (t, effect, resume))
        elif isinstance(effect, fx.AllReduce):
            self.sent[t]["AllReduce"] += nbytes(effect.values)
            self.collective.contribute(t, effect.values, effect.done, resume)
        elif isinstance(effect, fx.Now):
            resume(self.clock.now)
        elif isinstance(effect, fx.AwaitStart):
            self.params.await_start(effect, resume)
        elif isinstance(effect, fx.PullDense):
            self.params.pull_dense(host, effect, self.sent[t], resume)
        elif isinstance(effect, fx.PushGradients):
            self.params.push(host, effect, self.sent[t])
            resume(None)
        elif isinstance(effect, fx.WorkerDone):
            self.params.worker_done(effect, resume)
        else:
            self.states[t].handle(effect, resume)

    def _at_reader(self, item: tuple) -> None:
        self.network.work(self.reader_host, self.cost.reader_batch_s, self._hand_batch, item)

    def _hand_batch(self, item: tuple) -> None:
        t, effect, resume = item
        batch, token = self.reader.next_batch_with_token(t)
        if batch is not None:
            self.handed.append((self.clock.now, self.reader.total_examples))
            self._maybe_evaluate(self.reader.total_examples - batch.batch_size)
        elif self.in_flight_at_stop is None:
            trained = sum(trainer.stats.total_examples for trainer in self.trainers)
            self.in_flight_at_stop = self.reader.total_examples - trained
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
        if len(lookups) == 1:
            self._send_lookups(lookups)
        else:  # concurrent requests leave once the worker is waiting for them
            self.clock.soon(self._send_lookups, lookups, urgent=True)

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
        self.network.send(
            self.server_hosts[request.shard],
            self.trainer_hosts[t],
            nbytes(pooled),
            self._lookup_answered,
            (gather, i, answer),
        )

    def _lookup_answered(self, item: tuple) -> None:
        gather, i, answer = item
        delay = self.speeds.delayed()
        if delay:
            self.clock.at(self.clock.now + delay, gather.deliver, (i, answer))
        else:
            gather.deliver((i, answer))

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
