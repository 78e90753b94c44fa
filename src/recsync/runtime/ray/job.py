"""The distributed job on Ray: start the nodes as actors, watch them, gather the measures."""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import ray

from recsync.coordinator.job import ClusterSpec, check_one_pass, final_dense, sync_measures
from recsync.io.sources import FileData, open_training_data
from recsync.metrics.quality import evaluate_predictions
from recsync.model.spec import ModelSpec
from recsync.ps.layout import EmbeddingLayout
from recsync.ps.local import LocalEmbeddings, shard_weight
from recsync.ps.placement import JobPlan, plan_job
from recsync.ps.shard import EmbeddingShard
from recsync.runtime.ray.actors import (
    EmbeddingServerActor,
    ReaderActor,
    SyncServerActor,
    TrainerActor,
)
from recsync.runtime.ray.effects import NodeFailure
from recsync.trainer.reference import TrainSpec, predict
from recsync.trainer.replica import DenseReplica

PING_EVERY_S = 2.0
PING_TIMEOUT_S = 10.0
COLLECTIVE_TIMEOUT_S = 60.0
PLAN_SAMPLE_BATCHES = 8
INLINE_OBJECT_BYTES = 4 << 20  # batches, pooled embeddings and row gradients skip the object store

Progress = Callable[[int, int | None, float], None]


@dataclass(frozen=True)
class JobSpec:
    """Everything a distributed run needs, in the lower layers' specs."""

    model: ModelSpec
    train: TrainSpec
    cluster: ClusterSpec
    strategy: Any
    synthetic: Any = None
    files: FileData | None = None


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


def plan_for(spec: JobSpec) -> JobPlan:
    """Placement from a sample of the data: tables on embedding servers, dense slices."""
    source = open_training_data(spec.synthetic, spec.files, spec.train.batch_size, spec.train.seed)
    sample = []
    for batch in source.train_batches():
        sample.append(batch)
        if len(sample) == PLAN_SAMPLE_BATCHES:
            break
    num_params = DenseReplica(spec.model, spec.train.seed, spec.train.dense_optimizer).num_params
    needs_center = spec.strategy.needs == "center"
    return plan_job(
        spec.model,
        spec.cluster.num_embedding_servers,
        spec.cluster.num_sync_servers if needs_center else 0,
        sample,
        num_params,
    )


class RayJob:
    """One training job on Ray actors: reader, embedding servers, sync servers, trainers."""

    def __init__(self, spec: JobSpec, plan: JobPlan):
        self.spec = spec
        self.plan = plan
        self.actors: dict[str, Any] = {}

    def _start(self) -> list:
        spec, cluster = self.spec, self.spec.cluster
        layout = self.plan.embeddings.layout
        threads = cluster.hogwild_threads
        reader = ReaderActor.options(max_concurrency=1).remote(
            spec.synthetic, spec.files, spec.train.batch_size, spec.train.seed, cluster.num_trainers
        )
        self.actors["reader"] = reader
        servers = []
        for i in range(layout.num_shards):
            weight = shard_weight(layout, i, spec.train.seed)
            actor = EmbeddingServerActor.options(max_concurrency=threads + 4).remote(
                i, weight, spec.train.sparse_optimizer
            )
            self.actors[f"embedding-server-{i}"] = actor
            servers.append(actor)
        sync_servers, ranges = [], None
        if self.plan.dense is not None:
            ranges = self.plan.dense.ranges
            initial = DenseReplica(spec.model, spec.train.seed, spec.train.dense_optimizer).flat
            for i, (start, stop) in enumerate(ranges):
                center = spec.strategy.make_center(initial[start:stop].clone())
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
            )
            actor = TrainerActor.options(max_concurrency=4).remote(
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
        spec, cluster = self.spec, self.spec.cluster
        stats = [o[0] for o in outcomes]
        reader = self.actors["reader"]
        handed = ray.get(reader.handed_examples.remote())
        trained = [s.total_examples for s in stats]
        dataset = spec.synthetic.num_train if spec.synthetic is not None else None
        check_one_pass(handed, trained, dataset)
        blocked: dict[str, float] = defaultdict(float)
        sent: dict[str, int] = defaultdict(int)
        for _, blocked_i, sent_i in outcomes:
            for kind, seconds in blocked_i.items():
                blocked[kind] += seconds
            sent["trainers"] += sum(sent_i.values())
        server_stats = {
            name: ray.get(actor.stats.remote())
            for name, actor in self.actors.items()
            if "server" in name
        }
        for name, st in server_stats.items():
            role = "embedding_servers" if name.startswith("embedding") else "sync_servers"
            sent[role] += st.bytes_sent
        quality, teacher_auc, skipped = self._evaluate(trainers)
        examples = sum(trained)
        return {
            "engine": "ray",
            "strategy": spec.strategy.describe(),
            "num_trainers": cluster.num_trainers,
            "workers_per_trainer": cluster.workers_per_trainer,
            "num_embedding_servers": cluster.num_embedding_servers,
            "num_sync_servers": len([n for n in self.actors if n.startswith("sync-server")]),
            "examples_trained": examples,
            "examples_per_trainer": trained,
            "train_seconds": train_seconds,
            "eps": examples / train_seconds,
            "elp": cluster.elp(spec.train.batch_size),
            **sync_measures(stats),
            "train_loss": sum(s.loss_sum for s in stats) / max(examples, 1),
            "bytes_sent": dict(sent),
            "blocked_seconds": {k: round(v, 3) for k, v in blocked.items()},
            **{f"test_{k}": v for k, v in quality.as_dict().items() if k != "examples"},
            "test_examples": quality.examples,
            "teacher_auc": teacher_auc,
            "skipped": skipped,
        }

    def _evaluate(self, trainers):
        spec = self.spec
        replicas = ray.get([t.replica.remote() for t in trainers])
        dense = DenseReplica(spec.model, spec.train.seed, spec.train.dense_optimizer)
        dense.load_flat(final_dense(replicas, spec.strategy.needs))
        layout: EmbeddingLayout = self.plan.embeddings.layout
        names = [f"embedding-server-{i}" for i in range(layout.num_shards)]
        weights = ray.get([self.actors[n].weight.remote() for n in names])
        row_opt = spec.train.sparse_optimizer
        shards = [EmbeddingShard(w, row_opt.build(w.shape[0], w.shape[1])) for w in weights]
        test, teacher_auc, skipped = ray.get(self.actors["reader"].test_set.remote())
        if test is None or test.batch_size == 0:
            raise NodeFailure("the held-out set is empty: cannot evaluate")
        probs = predict(dense.module, LocalEmbeddings(layout, shards), test)
        return evaluate_predictions(test.labels, probs), teacher_auc, skipped

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
