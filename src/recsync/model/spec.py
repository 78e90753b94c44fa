"""Shapes of a DLRM: the sparse part (table specs) and the dense part (MLP sizes)."""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import pairwise
from typing import Literal

from recsync.model.hash_spec import Admission, Eviction, HashTables

Pooling = Literal["sum", "mean"]
TableKind = Literal["hash", "fixed"]


@dataclass(frozen=True)
class TableSpec:
    """One embedding table: looked up by one categorical feature, pooled per example."""

    name: str
    num_rows: int
    dim: int
    pooling: Pooling = "sum"
    # a hash table's own admission and eviction (None: the model's `hash_tables`')
    admission: Admission | None = None
    eviction: Eviction | None = None
    # "fixed" in a model of hash tables: a table of `num_rows` rows among them (None: the
    # model's kind, see ModelSpec)
    kind: TableKind | None = None

    def __post_init__(self) -> None:
        if self.num_rows < 1:
            raise ValueError(f"table {self.name}: num_rows must be >= 1, got {self.num_rows}")
        if self.dim < 1:
            raise ValueError(f"table {self.name}: dim must be >= 1, got {self.dim}")
        if self.pooling not in ("sum", "mean"):
            raise ValueError(f"table {self.name}: pooling must be sum or mean, got {self.pooling}")
        if self.kind not in (None, "hash", "fixed"):
            raise ValueError(f"table {self.name}: kind must be hash or fixed, got {self.kind!r}")
        if self.kind == "fixed" and (self.admission or self.eviction):
            raise ValueError(f"table {self.name}: admission and eviction are a hash table's")


def default_tables(
    num_tables: int = 26, num_rows: int = 1000, dim: int = 16
) -> tuple[TableSpec, ...]:
    return tuple(TableSpec(f"C{i + 1}", num_rows, dim) for i in range(num_tables))


@dataclass(frozen=True)
class ModelSpec:
    """A DLRM. Defaults are the reference Criteo-Kaggle shape: dim 16, bottom MLP
    13-512-256-64-16, dot interaction without self-interaction, top MLP 367-512-256-1.
    `hash_tables`: the tables are hash tables keyed by raw ids (their `num_rows` then only
    sizes plans and fixed baselines), else fixed R x D tables.

    `interaction_dim`: the size D of the vectors the interaction multiplies (the bottom MLP's
    output); None: the tables' one dim. Tables may then differ in dim: a table whose dim is
    not D is projected to D by a linear map of its own, a dense parameter (`DenseArch`). The
    pooled embeddings the dense part takes are B x F x W, W the widest table's dim, a
    table's vector in its first `dim` entries (zeros after).

    With `hash_tables`, a table of kind "fixed" is a fixed table among hash tables: its ids
    are taken modulo its `num_rows` (`fixed_rows`), then keyed as the others' are, and its
    rows live in the hash shards' stores of their own (no admission, eviction or bound)."""

    num_dense: int = 13
    tables: tuple[TableSpec, ...] = field(default_factory=default_tables)
    bottom_mlp: tuple[int, ...] = (512, 256, 64)
    top_mlp: tuple[int, ...] = (512, 256)
    data_norm: bool = False
    hash_tables: HashTables | None = None  # None: fixed tables of `num_rows` rows
    interaction_dim: int | None = None  # None: the tables' one dim

    def __post_init__(self) -> None:
        if not self.tables:
            raise ValueError("model needs at least one embedding table")
        dims = {t.dim for t in self.tables}
        if self.interaction_dim is not None:
            if self.interaction_dim < 1:
                raise ValueError(f"interaction_dim must be >= 1, got {self.interaction_dim}")
            if dims == {self.interaction_dim}:  # no projection: the same model as without
                object.__setattr__(self, "interaction_dim", None)
        elif len(dims) != 1:
            raise ValueError(
                f"tables of different dims {sorted(dims)} need an interaction_dim (the size "
                "each is projected to)"
            )
        own = [t.name for t in self.tables if t.admission or t.eviction]
        if own and self.hash_tables is None:
            raise ValueError(f"table {own[0]}: admission and eviction are a hash table's")
        hashed = [t.name for t in self.tables if t.kind == "hash"]
        if hashed and self.hash_tables is None:
            raise ValueError(f"table {hashed[0]}: a hash table needs the model's hash_tables")
        if self.hash_tables is not None and all(t.kind == "fixed" for t in self.tables):
            raise ValueError("hash_tables: every table is fixed (a model of fixed tables)")
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
        """D: the size of the vectors the interaction multiplies (every table's dim, unless
        tables are projected to `interaction_dim`)."""
        return self.tables[0].dim if self.interaction_dim is None else self.interaction_dim

    @property
    def fixed_rows(self) -> tuple[tuple[int, int], ...]:
        """(feature, rows) of each fixed table among hash tables: its keys' ids are taken
        modulo its rows (none in a model of one kind)."""
        if self.hash_tables is None:
            return ()
        return tuple((f, t.num_rows) for f, t in enumerate(self.tables) if t.kind == "fixed")

    @property
    def table_dims(self) -> tuple[int, ...]:
        return tuple(t.dim for t in self.tables)

    @property
    def pooled_dim(self) -> int:
        """W: the width of the pooled embeddings the dense part takes (the widest table)."""
        return max(t.dim for t in self.tables)

    @property
    def projected(self) -> tuple[int, ...]:
        """The tables projected to `embedding_dim` (their dim differs from it)."""
        D = self.embedding_dim
        return tuple(f for f, t in enumerate(self.tables) if t.dim != D)

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
        macs += sum(self.tables[f].dim * self.embedding_dim for f in self.projected)
        return 2 * 3 * macs
