"""The distributed job in virtual time: the same nodes and policies as the Ray engine, and
the real model math, run on a virtual clock in a deterministic order."""

from __future__ import annotations

import gc
from collections import defaultdict
from collections.abc import Callable
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
from recsync.io.sources import open_training_data
from recsync.ps.gradient_servers import DenseBlockServer, SparseShardServer
from recsync.ps.local import shard_weight
from recsync.ps.placement import JobPlan
from recsync.ps.servers import EmbeddingServerNode, SyncServerNode
from recsync.ps.shard import EmbeddingShard
from recsync.runtime.sim.clock import Clock
from recsync.runtime.sim.cost import CostModel, WorkerSpeeds
from recsync.runtime.sim.dispatch import EffectDispatch
from recsync.runtime.sim.gradient import SimParameterServers
from recsync.runtime.sim.network import Collective, Network, Node
from recsync.runtime.sim.runner import LoopRunner
from recsync.runtime.sim.trainer_state import TrainerState
from recsync.trainer import effects as fx
from recsync.trainer.node import Loop, TrainerNode
from recsync.trainer.replica import DenseReplica


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
        on_handed: Callable[[int], None] | None = None,
    ):
        """`eval_every`: evaluate the current model on the test set each time that many more
        examples were handed out (in virtual time, at no cost): `curve`. `on_handed(n)`:
        called each time the reader hands out a batch, with the examples handed out so far
        (a progress bar)."""
        self.on_handed = on_handed
        self.spec, self.plan, self.cost = spec, plan, cost
        cluster, train, seed = spec.cluster, spec.train, spec.train.seed
        self.clock = clock = Clock()
        self.speeds = WorkerSpeeds(cost, cluster.hogwild_threads, seed)
        self.network = Network(clock, cost, self.speeds.delayed)
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
        # each worker checks its gradient once per step: the servers need not check each push
        self.servers, self.server_hosts = [], []
        for i in range(layout.num_shards):
            weight = shard_weight(layout, i, seed)
            shard = EmbeddingShard(weight, train.sparse_optimizer.build(*weight.shape))
            if resume is not None:
                shard.load_state_dict(resume.shards[i])
            if self.sparse_policy:
                policy = strategy.make_server(num_workers, True)
                self.servers.append(SparseShardServer(i, shard, policy, norm, check_finite=False))
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
                    node = DenseBlockServer(
                        i, values, train.dense_optimizer, policy, norm, check_finite=False
                    )
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
        self.dispatch = EffectDispatch(self)

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

    def maybe_evaluate(self, examples: int) -> None:
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

    def _runner(self, t: int, worker: int | None, loop: Loop) -> LoopRunner:
        return LoopRunner(
            self.clock,
            t,
            worker,
            loop,
            self.dispatch,
            self.blocked[t],
            self.cost.faults.crash_at_s if self.cost.faults.crash_trainer == t else None,
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
