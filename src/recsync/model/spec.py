"""Shapes of a DLRM: the sparse part (table specs) and the dense part (MLP sizes)."""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import pairwise
from typing import Literal

from recsync.model.hash_spec import HashTables

Pooling = Literal["sum", "mean"]


@dataclass(frozen=True)
class TableSpec:
    """One embedding table: looked up by one categorical feature, pooled per example."""

    name: str
    num_rows: int
    dim: int
    pooling: Pooling = "sum"

    def __post_init__(self) -> None:
        if self.num_rows < 1:
            raise ValueError(f"table {self.name}: num_rows must be >= 1, got {self.num_rows}")
        if self.dim < 1:
            raise ValueError(f"table {self.name}: dim must be >= 1, got {self.dim}")
        if self.pooling not in ("sum", "mean"):
            raise ValueError(f"table {self.name}: pooling must be sum or mean, got {self.pooling}")


def default_tables(
    num_tables: int = 26, num_rows: int = 1000, dim: int = 16
) -> tuple[TableSpec, ...]:
    return tuple(TableSpec(f"C{i + 1}", num_rows, dim) for i in range(num_tables))


@dataclass(frozen=True)
class ModelSpec:
    """A DLRM. Defaults are the reference Criteo-Kaggle shape: dim 16, bottom MLP
    13-512-256-64-16, dot interaction without self-interaction, top MLP 367-512-256-1.
    `hash_tables`: the tables are hash tables keyed by raw ids (their `num_rows` then only
    sizes plans and fixed baselines), else fixed R x D tables."""

    num_dense: int = 13
    tables: tuple[TableSpec, ...] = field(default_factory=default_tables)
    bottom_mlp: tuple[int, ...] = (512, 256, 64)
    top_mlp: tuple[int, ...] = (512, 256)
    data_norm: bool = False
    hash_tables: HashTables | None = None  # None: fixed tables of `num_rows` rows

    def __post_init__(self) -> None:
        if not self.tables:
            raise ValueError("model needs at least one embedding table")
        dims = {t.dim for t in self.tables}
        if len(dims) != 1:
            raise ValueError(f"dot interaction needs one embedding dim for all tables, got {dims}")
        if self.hash_tables is not None and len(self.tables) > 256:
            raise ValueError(
                f"hash tables: at most 256 tables (8-bit feature prefix), got {len(self.tables)}"
            )
        if self.num_dense < 0:
            raise ValueError(f"num_dense must be >= 0, got {self.num_dense}")
        for name, sizes in (("bottom_mlp", self.bottom_mlp), ("top_mlp", self.top_mlp)):
            if any(s < 1 for s in sizes):
                raise ValueError(f"{name}: layer sizes must be >= 1, got {sizes}")

    @property
    def embedding_dim(self) -> int:
        return self.tables[0].dim

    @property
    def num_features(self) -> int:
        return len(self.tables)

    @property
    def num_interactions(self) -> int:
        """Pairs among the F pooled embeddings and the bottom MLP output, no self pairs."""
        n = self.num_features + (1 if self.num_dense else 0)
        return n * (n - 1) // 2

    @property
    def top_input(self) -> int:
        """The interactions and the first-order input: the bottom MLP's output (D), or with
        no dense feature the F pooled embeddings themselves (F x D)."""
        D = self.embedding_dim
        return self.num_interactions + (D if self.num_dense else self.num_features * D)

    def dense_flops_per_example(self) -> int:
        """Multiply-adds x 2 of forward + backward (3x forward) of the dense part."""
        sizes = [self.num_dense, *self.bottom_mlp, self.embedding_dim] if self.num_dense else []
        top = [self.top_input, *self.top_mlp, 1]
        macs = sum(a * b for a, b in pairwise(sizes))
        macs += sum(a * b for a, b in pairwise(top))
        n = self.num_features + (1 if self.num_dense else 0)
        macs += n * n * self.embedding_dim
        return 2 * 3 * macs
