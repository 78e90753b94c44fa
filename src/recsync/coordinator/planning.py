"""A distributed job's specification and its placement plan (shared by both drivers)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from recsync.coordinator.checkpoint import JobState
from recsync.coordinator.job import ClusterSpec
from recsync.io.sources import FileData, open_training_data
from recsync.model.spec import ModelSpec
from recsync.optim.train_spec import TrainSpec
from recsync.ps.placement import JobPlan, plan_job
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
    resume: JobState | None = None  # start from this checkpoint (its data position on)
    stop_after_examples: int | None = None  # hand out no more than this, then checkpoint

    @property
    def start_example(self) -> int:
        return 0 if self.resume is None else self.resume.data_position


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


def initial_dense(spec: JobSpec) -> torch.Tensor:
    """The dense parameters a job starts from: the model's initial ones, or the checkpoint's."""
    flat = DenseReplica(spec.model, spec.train.seed, spec.train.dense_optimizer).flat
    if spec.resume is None:
        return flat
    spec.resume.check_dense(flat.numel())
    return spec.resume.dense.clone()
