"""What a trainer is built from, what it did and holds at the end, and who it talks to."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from recsync.model.spec import ModelSpec
from recsync.optim.train_spec import TrainSpec
from recsync.protocol.address import Address
from recsync.ps.layout import EmbeddingLayout
from recsync.trainer.replica import DenseReplica


@dataclass
class TrainerStats:
    """What one trainer did: per worker thread iterations and examples, loss, syncs."""

    iterations: list[int]
    examples: list[int]
    loss_sum: float = 0.0
    syncs: int = 0
    workers_done: int = 0
    trained_when_dry: int | None = None  # examples trained when the data first ran out

    @property
    def total_examples(self) -> int:
        return sum(self.examples)

    @property
    def total_iterations(self) -> int:
        return sum(self.iterations)

    def count_step(self, thread: int, examples: int, loss: float) -> None:
        """A step whose updates left the worker: trained (a crash after this loses nothing)."""
        self.iterations[thread] += 1
        self.examples[thread] += examples
        self.loss_sum += loss * examples

    def note_dry(self) -> None:
        """A worker found the data consumed; the first time, remember what was trained."""
        if self.trained_when_dry is None:
            self.trained_when_dry = self.total_examples


@dataclass
class TrainerReport:
    """A trainer at the end: its stats, and (replicated dense part) a copy of its replica
    and of its optimizer state."""

    stats: TrainerStats
    replica: torch.Tensor | None = None
    optimizer: dict[str, Any] | None = None


@dataclass(frozen=True)
class TrainerSetup:
    """What every trainer is built from, whatever its strategy: its index among
    `num_trainers`, its `num_workers` worker threads, the model and its training, the table
    layout, its wiring, and the dense parameters and optimizer state to start from (a
    resumed job; None: the model's initial ones)."""

    index: int
    num_trainers: int
    num_workers: int
    model: ModelSpec
    train: TrainSpec
    layout: EmbeddingLayout
    wiring: Wiring
    initial: tuple[torch.Tensor, dict[str, Any]] | None = None

    def __post_init__(self) -> None:
        if self.num_workers < 1:
            raise ValueError(f"trainer needs >= 1 worker thread, got {self.num_workers}")

    @property
    def name(self) -> str:
        return f"trainer-{self.index}"

    @property
    def first_worker(self) -> int:
        """The job-wide index of this trainer's first worker thread."""
        return self.index * self.num_workers

    def replica(self) -> DenseReplica:
        """A dense replica of the model at the setup's starting point."""
        replica = DenseReplica(self.model, self.train.seed, self.train.dense_optimizer)
        if self.initial is not None:
            replica.load_flat(self.initial[0])
            replica.optimizer.load_state_dict(self.initial[1])
        return replica


@dataclass(frozen=True)
class Wiring:
    """The nodes a trainer talks to: the reader, the embedding shards (in shard order), and
    the servers of the dense part (sync servers of EASGD or dense servers of a gradient
    strategy) with the slice of the flat dense vector each holds."""

    reader: Address
    shards: tuple[Address, ...]
    dense: tuple[Address, ...] = ()
    dense_ranges: tuple[tuple[int, int], ...] = field(default=())
