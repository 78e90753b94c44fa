"""Expandable embedding tables keyed by raw ids: admission, eviction and the memory bound.

A job's tables are either fixed (R x D matrices, ids taken modulo R) or hash tables: rows
are created when an id is first admitted, found through a hash map from its 64-bit key
(`data/keys.py`: the feature index in the top 8 bits, the id in the low 56) and removed by
eviction. `HashTables` on `ModelSpec.hash_tables` says which, and how the hash tables behave.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

OnFull = Literal["evict", "error"]


@dataclass(frozen=True)
class Admission:
    """Which ids earn a row (DeepRec's counter / Bloom-filter admission, Paddle's
    CountFilterEntry / ProbabilityEntry). `min_count`: an id gets a row at its min_count-th
    sighting (counted in a count-min sketch, so ids seen fewer times cost no row);
    `probability`: each sighting admits it with this probability (seeded, deterministic).
    Until admitted, an id reads a shared default vector (zeros) and trains nothing."""

    min_count: int = 1
    probability: float = 1.0

    def __post_init__(self) -> None:
        if self.min_count < 1:
            raise ValueError(f"admission.min_count must be >= 1, got {self.min_count}")
        if not 0.0 < self.probability <= 1.0:
            raise ValueError(f"admission.probability must be in (0, 1], got {self.probability}")

    @property
    def admits_all(self) -> bool:
        return self.min_count == 1 and self.probability == 1.0


@dataclass(frozen=True)
class Eviction:
    """Which rows go, at checkpoint cuts and at a job's end (so at each day's end in
    continual training): rows not seen for `ttl_steps` updates of their shard, and rows whose
    L2 norm fell below `min_l2`. `on_full`: when a shard holds `max_rows` rows and a new id
    arrives, "evict" the least recently seen rows to make room, or stop with an "error"
    naming the table and its bound. `ttl_days` (continual training, one job a day): rows not
    seen for `ttl_days` days go at the start of each day (`ps/hash_days.py`)."""

    ttl_steps: int | None = None
    min_l2: float | None = None
    on_full: OnFull = "evict"
    ttl_days: int | None = None

    def __post_init__(self) -> None:
        if self.ttl_steps is not None and self.ttl_steps < 1:
            raise ValueError(f"eviction.ttl_steps must be >= 1, got {self.ttl_steps}")
        if self.ttl_days is not None and self.ttl_days < 1:
            raise ValueError(f"eviction.ttl_days must be >= 1, got {self.ttl_days}")
        if self.min_l2 is not None and not self.min_l2 > 0:
            raise ValueError(f"eviction.min_l2 must be > 0, got {self.min_l2}")
        if self.on_full not in ("evict", "error"):
            raise ValueError(f"eviction.on_full must be 'evict' or 'error', got {self.on_full!r}")

    @property
    def at_cuts(self) -> bool:
        """Whether anything is evicted at a cut (the memory bound acts on inserts)."""
        return self.ttl_steps is not None or self.min_l2 is not None


@dataclass(frozen=True)
class HashTables:
    """The job's tables are hash tables: `max_rows` bounds each embedding shard's rows
    (None: unbounded), `initial_rows` is each shard's first arena."""

    admission: Admission = field(default_factory=Admission)
    eviction: Eviction = field(default_factory=Eviction)
    max_rows: int | None = None
    initial_rows: int = 4096

    def __post_init__(self) -> None:
        if self.max_rows is not None and self.max_rows < 1:
            raise ValueError(f"max_rows must be >= 1, got {self.max_rows}")
        if self.initial_rows < 1:
            raise ValueError(f"initial_rows must be >= 1, got {self.initial_rows}")
