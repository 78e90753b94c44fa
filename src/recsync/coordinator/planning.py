"""A distributed job's specification and its placement plan (shared by both drivers)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from recsync.coordinator.job import ClusterSpec
from recsync.io.sources import FileData, open_training_data
from recsync.model.spec import ModelSpec
from recsync.ps.placement import JobPlan, plan_job
from recsync.trainer.reference import TrainSpec
from recsync.trainer.replica import DenseReplica

PLAN_SAMPLE_BATCHES = 8


@dataclass(frozen=True)
class JobSpec:
    """Everything a distributed run needs, in the lower layers' specs."""

    model: ModelSpec
    train: TrainSpec
    cluster: ClusterSpec
    strategy: Any
    synthetic: Any = None
    files: FileData | None = None


def plan_for(spec: JobSpec) -> JobPlan:
    """Placement from a sample of the data: tables on embedding servers, dense slices."""
    source = open_training_data(spec.synthetic, spec.files, spec.train.batch_size, spec.train.seed)
    sample = []
    for batch in source.train_batches():
        sample.append(batch)
        if len(sample) == PLAN_SAMPLE_BATCHES:
            break
    num_params = DenseReplica(spec.model, spec.train.seed, spec.train.dense_optimizer).num_params
    needs_center = spec.strategy.needs in ("center", "dense_servers")
    return plan_job(
        spec.model,
        spec.cluster.num_embedding_servers,
        spec.cluster.num_sync_servers if needs_center else 0,
        sample,
        num_params,
    )
