"""A distributed job's specification and its placement plan (shared by both drivers)."""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch

from recsync.coordinator.checkpoint import JobState
from recsync.coordinator.machines import role_named
from recsync.data.batch import Batch
from recsync.data.shares import StreamPosition, readers_for
from recsync.data.synthetic import SyntheticSpec
from recsync.io.data_plan import DataPlan, first_batches, plan_data
from recsync.io.sources import FileData
from recsync.model.dlrm import dense_num_params
from recsync.model.spec import ModelSpec
from recsync.optim.train_spec import TrainSpec
from recsync.ps.placement import JobPlan, plan_job
from recsync.strategy.config import StrategyConfig
from recsync.trainer.replica import new_replica

PLAN_SAMPLE_BATCHES = 8
# worker threads one reader serves by default (docs/readers.md: a reader hands out about
# 10,000 batches/s at the simulator's default price; 64 workers take a batch every 6.4 ms)
WORKERS_PER_READER = 64


@dataclass(frozen=True)
class ClusterSpec:
    """How many nodes of each role a job runs. `num_dense_servers`: the servers that hold
    the dense part, whatever its strategy calls them (a gradient strategy's dense servers,
    the blocks of the dense part; a center strategy's sync servers, the center variable's
    shards; hierarchical training's group PSs of each group); a strategy whose trainers
    hold the dense part ignores it (its family's `dense_nodes` counts what a job runs).
    `worker_processes`: a trainer's workers run in processes of their own, sharing
    its state in shared memory (past the interpreter lock), or (False) as threads of one
    process; None: processes where the strategy allows and the cores suffice (topology.py
    `split_workers`).
    """

    num_trainers: int = 2
    workers_per_trainer: int = 2
    num_embedding_servers: int = 2
    num_dense_servers: int = 1
    trainer_slowdown: tuple[float, ...] = ()
    worker_processes: bool | None = None
    slowdown_window: tuple[float, float] = (0.0, float("inf"))
    server_slowdown: tuple[tuple[str, float], ...] = ()
    num_readers: int | None = None  # None: `readers_for` (data/shares.py) decides
    placement: tuple[tuple[str, tuple[str, ...]], ...] = ()  # pinned roles (machines.py)

    def __post_init__(self) -> None:
        for role, machines in self.placement:
            role_named(role)
            if not machines:
                raise ValueError(f"cluster.placement.{role}: give at least one machine")
        if self.num_readers is not None and self.num_readers < 1:
            raise ValueError(f"cluster.num_readers must be >= 1, got {self.num_readers}")
        for name in ("num_trainers", "workers_per_trainer", "num_embedding_servers"):
            if getattr(self, name) < 1:
                raise ValueError(f"cluster.{name} must be >= 1, got {getattr(self, name)}")
        if self.num_dense_servers < 0:
            raise ValueError(
                f"cluster.num_dense_servers must be >= 0, got {self.num_dense_servers}"
            )
        if self.trainer_slowdown and len(self.trainer_slowdown) != self.num_trainers:
            raise ValueError(
                f"cluster.trainer_slowdown: {len(self.trainer_slowdown)} factors for "
                f"{self.num_trainers} trainers"
            )
        if any(not factor >= 1.0 for factor in self.trainer_slowdown):
            raise ValueError(
                f"cluster.trainer_slowdown: factors must be >= 1, got {self.trainer_slowdown}"
            )
        start, stop = self.slowdown_window
        if not 0.0 <= start < stop:
            raise ValueError(
                f"cluster.slowdown_from_s / slowdown_until_s: need 0 <= from < until, got "
                f"{start} and {stop}"
            )
        if any(not factor >= 1.0 for _, factor in self.server_slowdown):
            raise ValueError(
                f"cluster.server_slowdown: factors must be >= 1, got {dict(self.server_slowdown)}"
            )

    def slowdown(self, trainer: int) -> float:
        """How many times slower than the machine allows trainer `trainer` computes (an
        emulated straggler, both drivers, during `slowdown_window`: seconds from the job's
        start)."""
        return self.trainer_slowdown[trainer] if self.trainer_slowdown else 1.0

    def server_factor(self, name: str) -> float:
        """How many times slower server `name` (e.g. embedding-server-0) answers."""
        return dict(self.server_slowdown).get(name, 1.0)

    @property
    def hogwild_threads(self) -> int:
        return self.num_trainers * self.workers_per_trainer

    @property
    def readers(self) -> int:
        """The reader nodes the job runs: `num_readers`, or one per WORKERS_PER_READER
        worker threads (data/shares.py `readers_for`)."""
        if self.num_readers is not None:
            return self.num_readers
        return readers_for(self.hogwild_threads, self.num_trainers, WORKERS_PER_READER)

    def reader_of(self, trainer: int) -> int:
        """The reader trainer `trainer` takes its batches from."""
        return trainer % self.readers

    def elp(self, batch_size: int) -> int:
        """Examples in flight at most: replicas x Hogwild threads x batch size."""
        return self.hogwild_threads * batch_size


@dataclass(frozen=True)
class JobSpec:
    """Everything a distributed run needs, in the lower layers' specs."""

    model: ModelSpec
    train: TrainSpec
    cluster: ClusterSpec
    strategy: StrategyConfig
    synthetic: SyntheticSpec | None = None
    files: FileData | None = None
    resume: JobState | None = None  # start from this checkpoint (its data position on)
    stop_after_examples: int | None = None  # hand out no more than this, then checkpoint

    @functools.cached_property
    def data(self) -> DataPlan:
        """The job's data as its readers share it, planned once (io/data_plan.py) and
        handed down: the placement's sample and every reader's share take it."""
        unit = None if self.resume is None else self.resume.data_unit
        return plan_data(self.files, self.train, unit, self.start_position)

    @property
    def start_example(self) -> int:
        """The stream's first example not handed out before the job started."""
        return 0 if self.resume is None else self.resume.data_position

    @property
    def start_position(self) -> StreamPosition:
        """The examples handed out before the job started (a resumed job's checkpoint)."""
        return StreamPosition() if self.resume is None else self.resume.stream_position

    @property
    def handed_before(self) -> int:
        """How many examples were handed out before the job started."""
        return self.start_position.handed

    def cut_refusal(self) -> str | None:
        """Why a running job cannot be cut for a checkpoint (None: it can): its strategy's
        reason, or a global step that does not split evenly among its readers (each counts
        the steps of its share: topology.py `step_share`)."""
        refusal = self.strategy.cut_refusal()
        cluster = self.cluster
        readers, workers = cluster.readers, cluster.hogwild_threads
        steps = self.strategy.batches_per_step(workers)
        served = [
            sum(cluster.reader_of(t) == r for t in range(cluster.num_trainers))
            * cluster.workers_per_trainer
            for r in range(readers)
        ]
        uneven = steps > 1 and any(steps * s % workers for s in served)  # 1: cut at once
        if refusal is None and readers > 1 and uneven:
            return (
                f"a global step of {steps} batches does not split evenly among {readers} "
                f"readers serving {served} of the {workers} workers (choose "
                "cluster.num_readers so that it does, or 1)"
            )
        return refusal

    @property
    def dense_blocks(self) -> int:
        """The blocks the job plan splits the dense part into, one a server:
        `cluster.num_dense_servers` for a strategy `dense_in_blocks`, else none."""
        return self.cluster.num_dense_servers if self.strategy.dense_in_blocks else 0


def sample_batches(spec: JobSpec, count: int = PLAN_SAMPLE_BATCHES) -> list[Batch]:
    """The first `count` batches of the job's data (the planner's sample)."""
    return first_batches(spec.data, spec.synthetic, spec.train, count)


def plan_for(spec: JobSpec) -> JobPlan:
    """Placement from a sample of the data: tables on embedding servers, dense slices."""
    num_params = dense_num_params(spec.model)
    return plan_job(
        spec.model,
        spec.cluster.num_embedding_servers,
        spec.dense_blocks,
        sample_batches(spec),
        num_params,
    )


def initial_dense(spec: JobSpec) -> torch.Tensor:
    """The dense parameters a job starts from: the model's initial ones, or the checkpoint's."""
    flat = new_replica(spec.model, spec.train.seed, spec.train.dense_optimizer).flat
    if spec.resume is None:
        return flat
    spec.resume.check_dense(flat.numel())
    return spec.resume.dense.clone()
