"""The hyper-parameters of training shared by every strategy and driver."""

from __future__ import annotations

from dataclasses import dataclass, field

from recsync.optim.dense import DenseOptimizerSpec
from recsync.optim.rowwise import RowOptimizerSpec


@dataclass(frozen=True)
class TrainSpec:
    """Local batch size, the dense and sparse optimizers, and the seed of every random draw
    (initial weights, data order)."""

    batch_size: int = 256
    dense_optimizer: DenseOptimizerSpec = field(default_factory=DenseOptimizerSpec)
    sparse_optimizer: RowOptimizerSpec = field(default_factory=RowOptimizerSpec)
    seed: int = 0

    def __post_init__(self) -> None:
        if self.batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {self.batch_size}")
