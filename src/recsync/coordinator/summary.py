"""The end of a distributed job, the same for both drivers: one-pass check, final model,
held-out quality and the summary of measures."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import torch

from recsync.coordinator.gradient_measures import gradient_measures
from recsync.coordinator.job import check_one_pass, final_dense, sync_measures
from recsync.coordinator.planning import JobSpec
from recsync.data.batch import Batch
from recsync.metrics.quality import Quality, evaluate_predictions
from recsync.ps.layout import EmbeddingLayout
from recsync.ps.local import LocalEmbeddings
from recsync.ps.servers import ServerStats
from recsync.ps.shard import EmbeddingShard
from recsync.trainer.node import TrainerStats
from recsync.trainer.reference import predict
from recsync.trainer.replica import DenseReplica


@dataclass
class JobOutcome:
    """What a driver gathered from the nodes when the data ran out."""

    engine: str
    trainer_stats: list[TrainerStats]
    blocked_seconds: list[dict[str, float]]
    bytes_sent: list[dict[str, int]]
    server_stats: dict[str, ServerStats]
    handed_examples: list[int]
    train_seconds: float
    replicas: list[torch.Tensor]
    shard_weights: list[torch.Tensor]
    test: Batch | None
    teacher_auc: float | None
    skipped: dict[str, Any]
    lost_examples: list[int] | None = None  # per trainer: handed out, lost in a crash


def evaluate_final(spec: JobSpec, layout: EmbeddingLayout, outcome: JobOutcome) -> Quality:
    """Held-out quality of the final model: final_dense(replicas) + the shards' rows."""
    if outcome.test is None or outcome.test.batch_size == 0:
        raise ValueError("the held-out set is empty: cannot evaluate")
    dense = final_dense(outcome.replicas, spec.strategy.needs)
    return evaluate_model(spec, layout, dense, outcome.shard_weights, outcome.test)


def evaluate_model(
    spec: JobSpec,
    layout: EmbeddingLayout,
    dense_flat: torch.Tensor,
    shard_weights: list[torch.Tensor],
    test: Batch,
) -> Quality:
    """Held-out quality of a dense vector and shard rows (read-only: nothing is trained)."""
    dense = DenseReplica(spec.model, spec.train.seed, spec.train.dense_optimizer)
    dense.load_flat(dense_flat)
    row_opt = spec.train.sparse_optimizer
    shards = [EmbeddingShard(w, row_opt.build(w.shape[0], w.shape[1])) for w in shard_weights]
    probs = predict(dense.module, LocalEmbeddings(layout, shards), test)
    return evaluate_predictions(test.labels, probs)


def job_summary(spec: JobSpec, layout: EmbeddingLayout, outcome: JobOutcome) -> dict[str, Any]:
    """Check one-pass accounting, evaluate, and gather every measure of the run."""
    cluster, stats = spec.cluster, outcome.trainer_stats
    trained = [s.total_examples for s in stats]
    lost = outcome.lost_examples or [0] * len(trained)
    dataset = None
    if spec.synthetic is not None:
        dataset = spec.synthetic.num_train - spec.start_example
        if spec.stop_after_examples is not None:
            batch = spec.train.batch_size
            dataset = min(dataset, spec.stop_after_examples // batch * batch)
    accounted = [a + b for a, b in zip(trained, lost, strict=True)]
    check_one_pass(outcome.handed_examples, accounted, dataset)
    blocked: dict[str, float] = defaultdict(float)
    for per_trainer in outcome.blocked_seconds:
        for kind, seconds in per_trainer.items():
            blocked[kind] += seconds
    sent = {"trainers": sum(sum(d.values()) for d in outcome.bytes_sent)}
    for name, st in outcome.server_stats.items():
        role = name.rsplit("-", 1)[0].replace("-", "_") + "s"
        sent[role] = sent.get(role, 0) + st.bytes_sent
    quality = evaluate_final(spec, layout, outcome)
    examples = sum(trained)
    if spec.strategy.sparse_policy:
        strategy_measures = gradient_measures(
            outcome.server_stats,
            outcome.train_seconds,
            sum(s.total_iterations for s in stats),
            cluster.hogwild_threads,
        )
    else:
        strategy_measures = sync_measures(stats, spec.strategy.timing.is_shadow)
    return {
        "engine": outcome.engine,
        "strategy": spec.strategy.describe(),
        "num_trainers": cluster.num_trainers,
        "workers_per_trainer": cluster.workers_per_trainer,
        "num_embedding_servers": cluster.num_embedding_servers,
        "num_sync_servers": sum(
            1 for n in outcome.server_stats if n.startswith(("sync-server", "dense-server"))
        ),
        "examples_trained": examples,
        "examples_per_trainer": trained,
        "examples_lost_in_crash": sum(lost),
        "train_seconds": outcome.train_seconds,
        "eps": examples / outcome.train_seconds,
        "elp": cluster.elp(spec.train.batch_size),
        **strategy_measures,
        "train_loss": sum(s.loss_sum for s in stats) / max(examples, 1),
        "bytes_sent": sent,
        "blocked_seconds": {k: round(v, 3) for k, v in blocked.items()},
        **{f"test_{k}": v for k, v in quality.as_dict().items() if k != "examples"},
        "test_examples": quality.examples,
        "teacher_auc": outcome.teacher_auc,
        "skipped": outcome.skipped,
    }
