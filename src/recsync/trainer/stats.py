"""What a trainer is built from, what it did and holds at the end, and who it talks to."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import torch

from recsync.model.spec import ModelSpec
from recsync.optim.train_spec import TrainSpec
from recsync.protocol.address import Address
from recsync.protocol.messages import Message
from recsync.protocol.node import Node
from recsync.protocol.reading import CloseReceipts, Receipts
from recsync.ps.layout import TableLayout
from recsync.trainer.receipts import ReceiptLog
from recsync.trainer.replica import DenseReplica, new_replica

ITERATIONS, EXAMPLES, LOSS_SUM, DONE, SYNCS, DRY = range(6)  # the columns of TrainerStats


class TrainerStats:
    """What one trainer did, as one float64 table: a row per worker (iterations, examples,
    loss sum, done, syncs it ran, trainer examples when it found the data consumed; -1 none)
    and a last row for the trainer's own loop (syncs of its shadow thread). Each worker
    writes its own row only, so worker processes of one trainer can share the table
    (trainer/shared_state.py). `receipts`: what each worker took from its reader
    (trainer/receipts.py; a process's own workers' only)."""

    def __init__(self, num_workers: int):
        self.num_workers = num_workers
        rows = np.zeros((num_workers + 1, 6))  # float64, made without a tensor op: no
        rows[:, DRY] = -1.0  # dispatch under priced math's mode (10,000 trainers' build)
        self.table = torch.from_numpy(rows)
        self.receipts = ReceiptLog(num_workers)

    @property
    def table(self) -> torch.Tensor:
        return self._table

    @table.setter
    def table(self, table: torch.Tensor) -> None:
        """The table, and a NumPy view of the same memory: a step's counts are written
        through the view (a tensor's element update costs a dispatch: tens of
        microseconds a step in the simulator)."""
        self._table, self._rows = table, table.numpy()

    @property
    def own_row(self) -> int:
        """The row of the trainer's own (shadow) loop."""
        return self.num_workers

    def _column(self, column: int) -> list[int]:
        return [int(v) for v in self._rows[: self.num_workers, column].tolist()]

    @property
    def iterations(self) -> list[int]:
        return self._column(ITERATIONS)

    @property
    def examples(self) -> list[int]:
        return self._column(EXAMPLES)

    def _count(self, column: int) -> int:
        """A column of counts summed, through the NumPy view: whole numbers, so the sum is
        exact in any order (a tensor's sum costs a dispatch: under priced math's mode, tens
        of microseconds, a job's end at 10,000 trainers seconds)."""
        return int(self._rows[:, column].sum())

    @property
    def total_examples(self) -> int:
        return self._count(EXAMPLES)

    @property
    def total_iterations(self) -> int:
        return self._count(ITERATIONS)

    @property
    def loss_sum(self) -> float:
        return float(self.table[:, LOSS_SUM].sum())

    @property
    def syncs(self) -> int:
        return self._count(SYNCS)

    @property
    def workers_done(self) -> int:
        return self._count(DONE)

    @property
    def trained_when_dry(self) -> int | None:
        """Examples the trainer had trained when one of its workers first found the data
        consumed (None: none has)."""
        dry = self._rows[: self.num_workers, DRY]
        seen = dry[dry >= 0]
        return int(seen.min()) if seen.size else None

    def pushed(self, worker: int) -> int:
        """Steps of worker `worker` whose updates left (`count_step`)."""
        return int(self._rows[worker, ITERATIONS])

    def count_step(self, worker: int, examples: int, loss: float) -> None:
        """A step whose updates left the worker: trained (a crash after this loses nothing)."""
        row = self._rows[worker]
        row[ITERATIONS] += 1
        row[EXAMPLES] += examples
        row[LOSS_SUM] += loss * examples

    def count_sync(self, row: int) -> None:
        """A sync round run by worker `row` (or by the trainer's own loop: `own_row`)."""
        self._rows[row, SYNCS] += 1

    def finish(self, worker: int) -> None:
        """Worker `worker` has ended its loop."""
        self._rows[worker, DONE] = 1.0

    def note_dry(self, worker: int) -> None:
        """Worker `worker` found the data consumed: remember what the trainer had trained."""
        if self._rows[worker, DRY] < 0:
            self._rows[worker, DRY] = float(self.total_examples)

    def detached(self) -> TrainerStats:
        """A copy of its own (the report of a trainer whose table is shared)."""
        copy = TrainerStats(self.num_workers)
        copy.table.copy_(self.table)
        return copy


class ReceivingTrainer(Node):
    """A trainer node that answers `CloseReceipts` (every family's trainer is one): its
    `index`, its `stats` with its workers' logs (trainer/receipts.py)."""

    handles: ClassVar[dict[type[Message], str]] = {CloseReceipts: "close_receipts"}
    index: int
    stats: TrainerStats

    def close_receipts(self, message: CloseReceipts) -> Receipts:
        stats = self.stats
        first = self.index * stats.num_workers  # its first worker's job-wide index
        received, dry, pushed = {}, [], {}
        for thread, (numbers, told_dry) in enumerate(stats.receipts.close(message.fence)):
            worker = first + thread
            received[worker] = numbers
            pushed[worker] = stats.pushed(thread)
            if told_dry:
                dry.append(worker)
        return Receipts(received, dry, pushed)


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
    resumed job; None: the model's initial ones); `incarnation`: how many times it was
    lost and restarted."""

    index: int
    num_trainers: int
    num_workers: int
    model: ModelSpec
    train: TrainSpec
    layout: TableLayout
    wiring: Wiring
    initial: tuple[torch.Tensor, dict[str, Any]] | None = None
    incarnation: int = 0

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
        replica = new_replica(self.model, self.train.seed, self.train.dense_optimizer)
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
