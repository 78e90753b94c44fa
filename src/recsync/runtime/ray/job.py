"""The distributed job on Ray: start the nodes as actors, watch them, gather the measures."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import ray
import torch

from recsync.coordinator.checkpoint import JobState, join_optimizer_states, layout_slices
from recsync.coordinator.job import final_dense
from recsync.coordinator.planning import JobSpec, initial_dense, plan_for
from recsync.coordinator.summary import JobOutcome, job_summary
from recsync.ps.local import shard_weight
from recsync.ps.placement import JobPlan
from recsync.runtime.ray import wire
from recsync.runtime.ray.actors import (
    EmbeddingServerActor,
    ReaderActor,
    SyncServerActor,
    TrainerActor,
)
from recsync.runtime.ray.effects import NodeFailure
from recsync.runtime.ray.gradient_actors import GradientServerActor

PING_EVERY_S = 2.0
PING_TIMEOUT_S = 10.0
COLLECTIVE_TIMEOUT_S = 60.0
INLINE_OBJECT_BYTES = 4 << 20  # batches, pooled embeddings and row gradients skip the object store

Progress = Callable[[int, int | None, float], None]


def connect(address: str | None, num_cpus: int | None) -> bool:
    """Join the cluster at `address`, or start a local one. True if we started it."""
    if ray.is_initialized():
        return False
    if address:
        ray.init(address=address, log_to_driver=False)
        return False
    ray.init(
        num_cpus=num_cpus or 2,
        include_dashboard=False,
        log_to_driver=False,
        _system_config={"max_direct_call_object_size": INLINE_OBJECT_BYTES},
    )
    return True


class RayJob:
    """One training job on Ray actors: reader, embedding servers, sync servers, trainers."""

    def __init__(self, spec: JobSpec, plan: JobPlan):
        self.spec = spec
        self.plan = plan
        self.actors: dict[str, Any] = {}
        self.final_state: JobState | None = None

    def _start(self) -> list:
        spec, cluster = self.spec, self.spec.cluster
        layout = self.plan.embeddings.layout
        threads = cluster.hogwild_threads
        gradient = spec.strategy.needs == "dense_servers"
        sparse_policy = spec.strategy.sparse_policy
        tokens = spec.strategy.tokens_per_step(threads) if gradient else None
        reader = ReaderActor.options(max_concurrency=1).remote(
            spec.synthetic,
            spec.files,
            spec.train.batch_size,
            spec.train.seed,
            cluster.num_trainers,
            tokens,
            spec.start_example,
            spec.stop_after_examples,
        )
        self.actors["reader"] = reader
        resume = spec.resume
        if resume is not None:
            resume.check_layout(layout)
        servers = []
        for i in range(layout.num_shards):
            weight = shard_weight(layout, i, spec.train.seed)
            state = None if resume is None else resume.shards[i]
            if sparse_policy:
                actor = GradientServerActor.options(max_concurrency=2 * threads + 4).remote(
                    i,
                    spec.strategy,
                    threads,
                    spec.train.sparse_optimizer,
                    weight=weight,
                    state=state,
                )
            else:
                actor = EmbeddingServerActor.options(max_concurrency=threads + 4).remote(
                    i, weight, spec.train.sparse_optimizer, state
                )
            self.actors[f"embedding-server-{i}"] = actor
            servers.append(actor)
        sync_servers, ranges = [], None
        if self.plan.dense is not None:
            ranges = self.plan.dense.ranges
            initial = initial_dense(spec)
            for i, (start, stop) in enumerate(ranges):
                values = initial[start:stop].clone()
                if gradient:
                    state = None if resume is None else resume.optimizer_slice(start, stop)
                    actor = GradientServerActor.options(max_concurrency=2 * threads + 4).remote(
                        i, spec.strategy, threads, spec.train.dense_optimizer, values, state=state
                    )
                    self.actors[f"dense-server-{i}"] = actor
                else:
                    center = spec.strategy.make_center(values)
                    actor = SyncServerActor.options(max_concurrency=threads + 4).remote(i, center)
                    self.actors[f"sync-server-{i}"] = actor
                sync_servers.append(actor)
        trainers = []
        for i in range(cluster.num_trainers):
            node_args = dict(
                index=i,
                num_trainers=cluster.num_trainers,
                num_workers=cluster.workers_per_trainer,
                model=spec.model,
                train=spec.train,
                layout=layout,
                strategy=spec.strategy,
                dense_ranges=ranges,
                initial=None if resume is None else (resume.dense, resume.dense_optimizer),
            )
            actor = TrainerActor.options(max_concurrency=cluster.workers_per_trainer + 4).remote(
                f"trainer-{i}", node_args, reader, servers, sync_servers, cluster.slowdown(i)
            )
            self.actors[f"trainer-{i}"] = actor
            trainers.append(actor)
        if spec.strategy.needs == "allreduce":
            address = ray.get(trainers[0].collective_address.remote())
            ray.get(
                [
                    t.init_collective.remote(address, len(trainers), COLLECTIVE_TIMEOUT_S)
                    for t in trainers
                ]
            )
        return trainers

    def _check_alive(self) -> None:
        names = list(self.actors)
        refs = [self.actors[n].ping.remote() for n in names]
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=PING_TIMEOUT_S)
        for name, ref in zip(names, refs, strict=True):
            if ref not in ready:
                raise NodeFailure(f"{name} did not answer within {PING_TIMEOUT_S:.0f} s (hung?)")
            try:
                ray.get(ref)
            except ray.exceptions.RayActorError as error:
                raise NodeFailure(f"{name} is dead or unreachable ({error})") from None

    def _watch(self, trainers: list, on_progress: Progress | None, started: float) -> list:
        runs = {ref: f"trainer-{i}" for i, ref in enumerate(t.run.remote() for t in trainers)}
        results: dict[str, Any] = {}
        last_ping = time.perf_counter()
        while len(results) < len(runs):
            ready, _ = ray.wait(
                [r for r in runs if runs[r] not in results], num_returns=1, timeout=0.5
            )
            for ref in ready:
                try:
                    results[runs[ref]] = ray.get(ref)
                except ray.exceptions.RayTaskError as error:
                    cause = error.as_instanceof_cause()
                    raise NodeFailure(f"{runs[ref]}: {cause}") from None
                except ray.exceptions.RayActorError as error:
                    raise NodeFailure(f"{runs[ref]} is dead or unreachable ({error})") from None
            if time.perf_counter() - last_ping > PING_EVERY_S:
                self._check_alive()
                last_ping = time.perf_counter()
            if on_progress is not None:
                done, total = ray.get(self.actors["reader"].progress.remote())
                on_progress(done, total, done / max(time.perf_counter() - started, 1e-9))
        return [results[f"trainer-{i}"] for i in range(len(trainers))]

    def run(self, on_progress: Progress | None = None) -> dict[str, Any]:
        """Train one pass; returns the summary (measures and held-out quality)."""
        trainers = self._start()
        ray.get([a.ping.remote() for a in self.actors.values()])
        started = time.perf_counter()
        outcomes = self._watch(trainers, on_progress, started)
        train_seconds = time.perf_counter() - started
        return self._summarize(trainers, outcomes, train_seconds)

    def _summarize(self, trainers, outcomes, train_seconds: float) -> dict[str, Any]:
        reader = self.actors["reader"]
        servers = {n: a for n, a in self.actors.items() if "server" in n}
        layout = self.plan.embeddings.layout
        embedding = [self.actors[f"embedding-server-{i}"] for i in range(layout.num_shards)]
        test, teacher_auc, skipped = ray.get(reader.test_set.remote())
        outcome = JobOutcome(
            engine="ray",
            trainer_stats=[o[0] for o in outcomes],
            blocked_seconds=[o[1] for o in outcomes],
            bytes_sent=[o[2] for o in outcomes],
            server_stats=dict(
                zip(servers, ray.get([a.stats.remote() for a in servers.values()]), strict=True)
            ),
            handed_examples=ray.get(reader.handed_examples.remote()),
            train_seconds=train_seconds,
            replicas=self._replicas(trainers),
            shard_weights=ray.get([a.weight.remote() for a in embedding]),
            test=wire.batch_back(test),
            teacher_auc=teacher_auc,
            skipped=skipped,
        )
        try:
            summary = job_summary(self.spec, layout, outcome)
        except ValueError as error:
            raise NodeFailure(str(error)) from None
        self.final_state = self._snapshot(outcome, trainers)
        summary["checkpoint"] = {
            "data_position": self.final_state.data_position,
            "global_step": self.final_state.global_step,
            "in_flight_examples": self.final_state.in_flight_examples,
        }
        return summary

    def _snapshot(self, outcome: JobOutcome, trainers) -> JobState:
        """The quiescent end state (every handed-out batch trained): a checkpoint. Examples
        in flight: handed out when the reader stopped minus trained when each trainer saw
        the end of the data (trainers notice a little after the stop: a lower bound)."""
        spec = self.spec
        layout = self.plan.embeddings.layout
        shards = ray.get(
            [
                self.actors[f"embedding-server-{i}"].shard_state.remote()
                for i in range(layout.num_shards)
            ]
        )
        if spec.strategy.needs == "dense_servers":
            blocks = [a for n, a in self.actors.items() if n.startswith("dense-server")]
            optimizer = join_optimizer_states(ray.get([a.optimizer_state.remote() for a in blocks]))
            steps = outcome.server_stats["dense-server-0"].steps
        else:
            optimizer = ray.get(trainers[0].optimizer_state.remote())
            steps = sum(s.total_iterations for s in outcome.trainer_stats)
        handed = ray.get(self.actors["reader"].handed_when_stopped.remote())
        dry = ray.get([t.trained_when_dry.remote() for t in trainers])
        in_flight = 0
        if handed is not None and all(d is not None for d in dry):
            in_flight = max(0, handed - sum(dry))
        return JobState(
            dense=final_dense(outcome.replicas, spec.strategy.needs).clone(),
            dense_optimizer=optimizer,
            shards=shards,
            slices=layout_slices(layout),
            data_position=spec.start_example + sum(outcome.handed_examples),
            global_step=(0 if spec.resume is None else spec.resume.global_step) + steps,
            in_flight_examples=in_flight,
            strategy=spec.strategy.describe(),
        )

    def _replicas(self, trainers) -> list:
        if self.spec.strategy.needs == "dense_servers":
            blocks = [a for n, a in self.actors.items() if n.startswith("dense-server")]
            return [torch.cat(ray.get([a.values.remote() for a in blocks]))]
        return ray.get([t.replica.remote() for t in trainers])

    def shutdown(self) -> None:
        for actor in self.actors.values():
            ray.kill(actor, no_restart=True)
        self.actors.clear()


def run_job(
    spec: JobSpec,
    address: str | None = None,
    num_cpus: int | None = None,
    on_progress: Progress | None = None,
    on_start: Callable[[RayJob], None] | None = None,
) -> dict[str, Any]:
    """Plan, start, train, evaluate, stop. Starts (and stops) a local Ray if no address."""
    started_ray = connect(address, num_cpus)
    job = RayJob(spec, plan_for(spec))
    try:
        if on_start is not None:
            on_start(job)
        return job.run(on_progress)
    finally:
        job.shutdown()
        if started_ray:
            ray.shutdown()
