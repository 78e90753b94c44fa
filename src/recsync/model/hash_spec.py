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
    """Which ids earn a row of a hash table; until admitted, an id reads a shared default
    vector (zeros) and trains nothing.

    As DeepRec's counter / Bloom-filter admission and Paddle's CountFilterEntry /
    ProbabilityEntry."""

    min_count: int = field(
        default=1,
        metadata={
            "doc": "An id gets a row at its min_count-th sighting (counted in a count-min "
            "sketch; rarer ids cost no row).",
            "values": ">= 1",
        },
    )
    probability: float = field(
        default=1.0,
        metadata={
            "doc": "Each sighting admits the id with this probability (seeded, deterministic).",
            "values": "(0, 1]",
        },
    )

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
    """Which rows of a hash table go: at checkpoint cuts and at a job's end (so at each
    day's end in continual training), when a shard is full, and at the start of a day."""

    ttl_steps: int | None = field(
        default=None,
        metadata={
            "doc": "Rows not seen for this many updates of their shard go (at cuts and at "
            "the end).",
            "unset": "off",
            "values": ">= 1",
        },
    )
    min_l2: float | None = field(
        default=None,
        metadata={
            "doc": "Rows whose L2 norm fell below this go (at cuts and at the end).",
            "unset": "off",
            "values": "> 0",
        },
    )
    on_full: OnFull = field(
        default="evict",
        metadata={
            "doc": "A new id at a shard holding max_rows rows: evict the least recently seen "
            "rows to make room, or stop with an error naming the table."
        },
    )
    ttl_days: int | None = field(
        default=None,
        metadata={
            "doc": "Continual training: rows not seen for this many days go at the start of "
            "each day.",
            "unset": "off",
            "values": ">= 1",
        },
    )

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
    """How hash tables (keyed by raw ids, rows made as ids arrive) admit, evict and bound
    their rows."""

    admission: Admission = field(
        default_factory=Admission, metadata={"doc": "Which ids earn a row."}
    )
    eviction: Eviction = field(default_factory=Eviction, metadata={"doc": "Which rows go."})
    max_rows: int | None = field(
        default=None,
        metadata={
            "doc": "The most rows each embedding shard holds (eviction.on_full says what then).",
            "unset": "unbounded",
            "values": ">= 1",
        },
    )
    initial_rows: int = field(
        default=4096,
        metadata={
            "doc": "Rows each shard allocates at first; it grows as ids arrive.",
            "values": ">= 1",
        },
    )

    def __post_init__(self) -> None:
        if self.max_rows is not None and self.max_rows < 1:
            raise ValueError(f"max_rows must be >= 1, got {self.max_rows}")
        if self.initial_rows < 1:
            raise ValueError(f"initial_rows must be >= 1, got {self.initial_rows}")
