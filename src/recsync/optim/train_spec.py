"""The hyper-parameters of training shared by every strategy and driver."""

from __future__ import annotations

from dataclasses import dataclass, field

from recsync.optim.dense import DenseOptimizerSpec
from recsync.optim.rowwise import RowOptimizerSpec


@dataclass(frozen=True)
class TrainSpec:
    """Local batch size, the dense and sparse optimizers, the seed of every random draw
    (initial weights, data order), and the passes over the data: `epochs`, each after the
    first shuffled within blocks of `shuffle_buffer` examples (0: repeated in order)."""

    batch_size: int = 256
    dense_optimizer: DenseOptimizerSpec = field(default_factory=DenseOptimizerSpec)
    sparse_optimizer: RowOptimizerSpec = field(default_factory=RowOptimizerSpec)
    seed: int = 0
    epochs: int = 1
    shuffle_buffer: int = 100_000

    def __post_init__(self) -> None:
        if self.batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {self.batch_size}")
        if self.epochs < 1:
            raise ValueError(f"epochs must be >= 1, got {self.epochs}")
        if self.shuffle_buffer < 0:
            raise ValueError(f"shuffle_buffer must be >= 0, got {self.shuffle_buffer}")
