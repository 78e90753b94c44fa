"""An expandable embedding shard keyed by raw 64-bit ids (DeepRec's EmbeddingVariable).

Rows live in a growable arena (weight, optimizer state, versions, last_seen) addressed through
a `HashIndex`. Slot 0 holds the shared default vector (zeros, never trained) that keys not
(yet) admitted read. Admission counts the sightings of absent keys in a count-min sketch;
eviction drops rows unseen for long (by `clock`, which every update and `mark` advances), or
small ones, or the least recently seen when the shard reaches `max_rows` (the policies are
`model/hash_spec.py`'s). A row starts from values that depend on (seed, key) only. Byte
`key >> 56` is the key's table, for counters and messages only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F_

from recsync.errors import RecsyncError
from recsync.model.hash_spec import Admission, Eviction
from recsync.model.priced import is_priced, pooled_shape
from recsync.optim.rowwise import RowOptimizerSpec
from recsync.ps.hash_index import HashIndex, Int64s
from recsync.ps.hash_kernels import (
    SKETCH_MAX,
    count_and_admit,
    fill_initial_rows,
    find_and_bump,
    find_and_touch,
)

DEFAULT_SLOT = 0
NUM_TABLES = 256
COUNTERS = ("inserted", "evicted", "admitted_lookups", "refused_lookups")


class TableFullError(RecsyncError):
    """A hash shard at `max_rows` with on_full="error" met a key it has no row for."""


@dataclass(frozen=True)
class HashTableConfig:
    """A hash shard: row width, admission, eviction (its `on_full` acts at `max_rows` live
    rows), first arena, the seed of initial rows and coins, the admission sketch's size."""

    dim: int
    admission: Admission = field(default_factory=Admission)
    eviction: Eviction = field(default_factory=Eviction)
    max_rows: int | None = None
    initial_rows: int = 1024
    seed: int = 0
    sketch_depth: int = 4
    sketch_width: int = 1 << 16
    table_names: tuple[str, ...] = ()  # by table index (a key's top byte), for messages

    def __post_init__(self) -> None:
        if self.dim < 1:
            raise ValueError(f"dim must be >= 1, got {self.dim}")
        if self.initial_rows < 1:
            raise ValueError(f"initial_rows must be >= 1, got {self.initial_rows}")
        if self.max_rows is not None and self.max_rows < 1:
            raise ValueError(f"max_rows must be >= 1 or None, got {self.max_rows}")
        if self.admission.min_count > SKETCH_MAX:
            raise ValueError(f"admission.min_count must be <= {SKETCH_MAX} (the sketch saturates)")
        if not 1 <= self.sketch_depth <= 16:
            raise ValueError(f"sketch_depth must be in [1, 16], got {self.sketch_depth}")
        if self.sketch_width < 2 or self.sketch_width & (self.sketch_width - 1):
            raise ValueError(f"sketch_width must be a power of two, got {self.sketch_width}")


def tables_of(keys: Int64s) -> Int64s:
    return (keys >> 56) & 0xFF


class HashEmbeddingShard:
    """Rows keyed by int64 keys, created on first admitted sight; `EmbeddingShard`'s interface
    (requests name KEYS where the fixed shard names row indices) plus admission, eviction,
    counters; its states (`state_dict`) are what incremental checkpoints diff
    (hash_delta.py)."""

    def __init__(
        self, config: HashTableConfig, optimizer: RowOptimizerSpec, name: str = "hash_shard"
    ):
        self.config = config
        self.name = name
        self.optimizer_spec = optimizer
        self.global_step = 0
        self.clock = 0
        self.skipped_updates = 0
        self._seed = np.uint64(config.seed % 2**64)
        shape = (
            (0, 0) if config.admission.admits_all else (config.sketch_depth, config.sketch_width)
        )
        self.sketch = np.zeros(shape, dtype=np.uint16)
        self.counters = {counter: np.zeros(NUM_TABLES, dtype=np.int64) for counter in COUNTERS}
        self.day_starts: torch.Tensor | None = None  # continual training's days (hash_days.py)
        self._new_arena(config.initial_rows)

    # ------------------------------------------------------------------ arena and index
    def _new_arena(self, rows: int) -> None:
        capacity = rows + 1 if self.config.max_rows is None else min(rows, self.config.max_rows) + 1
        self.index = HashIndex(capacity, first_slot=DEFAULT_SLOT + 1)
        self.weight = torch.zeros(capacity, self.dim)
        self.optimizer = self.optimizer_spec.build(capacity, self.dim)
        self.versions = torch.zeros(capacity, dtype=torch.int64)
        self.last_seen = np.zeros(capacity, dtype=np.int32)

    @property
    def num_rows(self) -> int:
        return len(self.index)

    @property
    def dim(self) -> int:
        return self.config.dim

    @property
    def capacity(self) -> int:
        return self.index.slot_capacity

    def _reserve(self, rows: int) -> None:
        """Room for `rows` live rows (growing the arena by half, within max_rows: a
        third of it is slack at most, rows and bookkeeping alike)."""
        if rows + 1 <= self.capacity:
            return
        new = max(rows + 1, self.capacity + self.capacity // 2)
        if self.config.max_rows is not None:
            new = min(new, self.config.max_rows + 1)
        assert rows + 1 <= new
        old = self.capacity
        self.index.reserve_slots(new)
        self.weight = torch.cat([self.weight, self.weight.new_zeros(new - old, self.dim)])
        self.versions = torch.cat([self.versions, self.versions.new_zeros(new - old)])
        self.last_seen = np.concatenate([self.last_seen, np.zeros(new - old, np.int32)])
        self.optimizer.resize(new)

    def initial_rows(self, keys: Int64s) -> torch.Tensor:
        """len(keys) x D starting rows, uniform in +-0.05/sqrt(D), from (seed, key) only."""
        out = np.empty((keys.size, self.dim), dtype=np.float32)
        fill_initial_rows(keys, self._seed, 0.05 / self.dim**0.5, out)
        return torch.from_numpy(out)

    def _insert(self, keys: Int64s) -> None:
        """Rows for absent `keys`, at their initial values."""
        self._reserve(self.num_rows + keys.size)
        slots, inserted = self.index.find_or_insert(keys)
        assert inserted.all()
        self._start_rows(slots, keys)

    def _start_rows(self, slots: Int64s, keys: Int64s) -> None:
        """The new rows of `keys` at `slots`: initial values, fresh state, version 0."""
        rows = torch.from_numpy(slots)
        self.weight[rows] = self.initial_rows(keys)
        self.optimizer.reset_rows(rows)
        self.versions[rows] = 0
        self.last_seen[slots] = self.clock
        self.counters["inserted"] += np.bincount(tables_of(keys), minlength=NUM_TABLES)

    def _remove(self, slots: Int64s) -> None:
        keys = self.index.keys[slots]
        self.index.delete(keys)
        self.counters["evicted"] += np.bincount(tables_of(keys), minlength=NUM_TABLES)

    def _make_room(self, keys: Int64s) -> Int64s:
        """The prefix of `keys` (new rows) that fits under max_rows, evicting first."""
        bound = self.config.max_rows
        if bound is None or self.num_rows + keys.size <= bound:
            return keys
        room = bound - self.num_rows
        if self.config.eviction.on_full == "error":
            key = int(keys[room])
            table = (key >> 56) & 0xFF
            names = self.config.table_names
            name = names[table] if table < len(names) else f"table {table}"
            raise TableFullError(
                f"hash shard {self.name!r} is full: model.hash_tables.max_rows = {bound} rows "
                f"a shard, with eviction.on_full = 'error'; table {name} met a new id "
                f"({key & (1 << 56) - 1}). Raise max_rows, add shards, or let it evict."
            )
        self._evict_least_recent(max(keys.size - room, bound // 64))
        return keys[: bound - self.num_rows]

    def _evict_least_recent(self, count: int) -> None:
        """Evict `count` rows seen least recently (ties: smaller key first), sparing the rows
        seen at the current clock."""
        slots = self.index.live_slots()
        slots = slots[self.last_seen[slots] < self.clock]
        if count < slots.size:
            seen = self.last_seen[slots]
            cut = np.partition(seen, count - 1)[count - 1]
            tied = slots[seen == cut]
            tied = tied[np.argsort(self.index.keys[tied], kind="stable")]
            slots = np.concatenate([slots[seen < cut], tied[: count - int((seen < cut).sum())]])
        self._remove(slots)

    # ------------------------------------------------------------------ requests
    def lookup(
        self, rows: torch.Tensor, offsets: torch.Tensor, weights: torch.Tensor | None = None
    ) -> torch.Tensor:
        """num_bags x D pooled rows of the keys `rows`, for training: absent keys are counted,
        admitted ones get a row, refused ones read the default vector."""
        assert rows.dtype == torch.int64
        keys = rows.numpy()
        slots = np.empty(keys.size, dtype=np.int64)
        absent = find_and_touch(
            self.index.table, self.index.keys, keys, slots, self.last_seen, self.clock,
            self.counters["admitted_lookups"],
        )  # fmt: skip
        if absent:
            self._admit_absent(keys, slots)
        return self._pool(torch.from_numpy(slots), self.weight, offsets, weights)

    def _admit_absent(self, keys: Int64s, slots: Int64s) -> None:
        where = np.flatnonzero(slots < 0)
        absent = keys[where]
        admission = self.config.admission
        bound = self.config.max_rows
        if admission.admits_all and (bound is None or self.num_rows + absent.size <= bound):
            # every absent key gets a row and there is room: one pass inserts them all
            self._reserve(self.num_rows + absent.size)
            found, inserted = self.index.find_or_insert(absent)
            self._start_rows(found[inserted], absent[inserted])
            slots[where] = found
            self.counters["admitted_lookups"] += np.bincount(
                tables_of(absent), minlength=NUM_TABLES
            )
            return
        if not admission.admits_all:
            admitted = np.empty(absent.size, dtype=np.bool_)
            count_and_admit(
                self.sketch, absent, self._seed, self.clock, admission.min_count,
                admission.probability, admitted,
            )  # fmt: skip
            candidates = absent[admitted]
        else:
            candidates = absent
        unique, first = np.unique(candidates, return_index=True)
        new_keys = self._make_room(unique[np.argsort(first)])
        if new_keys.size:
            self._insert(new_keys)
        found = self.index.find(absent)
        got = found >= 0
        slots[where] = np.where(got, found, DEFAULT_SLOT)
        tables = tables_of(absent)
        self.counters["admitted_lookups"] += np.bincount(tables[got], minlength=NUM_TABLES)
        self.counters["refused_lookups"] += np.bincount(tables[~got], minlength=NUM_TABLES)

    def peek(
        self, rows: torch.Tensor, offsets: torch.Tensor, weights: torch.Tensor | None = None
    ) -> torch.Tensor:
        """`lookup` for evaluation and serving: changes nothing; an absent key reads its
        would-be initial row when admission is off, else the default vector."""
        keys = rows.numpy()
        slots = self.index.find(keys)
        absent = slots < 0
        if not absent.any():
            return self._pool(torch.from_numpy(slots), self.weight, offsets, weights)
        slots[absent] = DEFAULT_SLOT
        if not self.config.admission.admits_all:
            return self._pool(torch.from_numpy(slots), self.weight, offsets, weights)
        vectors = self.weight.index_select(0, torch.from_numpy(slots))
        vectors[torch.from_numpy(absent)] = self.initial_rows(keys[absent])
        return self._pool(torch.arange(keys.size), vectors, offsets, weights)

    @staticmethod
    def _pool(
        slots: torch.Tensor,
        table: torch.Tensor,
        offsets: torch.Tensor,
        weights: torch.Tensor | None,
    ) -> torch.Tensor:
        if (priced := pooled_shape(offsets, table)) is not None:
            return priced
        return F_.embedding_bag(
            slots, table, offsets, mode="sum", per_sample_weights=weights, include_last_offset=True
        )

    def apply_gradients(
        self, rows: torch.Tensor, grads: torch.Tensor, lr_scale: float = 1.0
    ) -> None:
        """Update the U unique keys `rows` by U x D `grads`; keys with no row (refused, or
        evicted since their lookup) are skipped and counted. Advances the clock."""
        keys = rows.numpy()
        slots = np.empty(keys.size, dtype=np.int64)
        absent = find_and_bump(
            self.index.table, self.index.keys, keys, slots, self.last_seen, self.clock,
            self.versions.numpy(),
        )  # fmt: skip
        if absent:
            self.skipped_updates += absent
            present = slots >= 0
            grads = grads[torch.from_numpy(present)]
            slots = slots[present]
        if not is_priced(self.weight):  # priced math: no values to update
            found = torch.from_numpy(slots)
            self.optimizer.apply(self.weight, found, grads, self.global_step, lr_scale)
        self.global_step += 1
        self.clock += 1

    def versions_of(self, rows: torch.Tensor) -> torch.Tensor:
        """Each key's version (updates applied to its row), 0 for absent keys."""
        slots = self.index.find(rows.numpy())
        return self.versions[torch.from_numpy(np.maximum(slots, DEFAULT_SLOT))]

    # ------------------------------------------------------------------ eviction, stats
    def evict(self, day_start_clock: int | None = None) -> int:
        """Drop the rows the eviction config names, and (days-based TTL) those last seen
        before `day_start_clock`; returns how many went. Their slots are reused."""
        slots = self.index.live_slots()
        seen = self.last_seen[slots]
        gone = np.zeros(slots.size, dtype=np.bool_)
        ttl, min_l2 = self.config.eviction.ttl_steps, self.config.eviction.min_l2
        if ttl is not None:
            gone |= self.clock - seen > ttl
        if min_l2 is not None:
            gone |= (self.weight[torch.from_numpy(slots)].norm(dim=1) < min_l2).numpy()
        if day_start_clock is not None:
            gone |= seen < day_start_clock
        self._remove(slots[gone])
        return int(gone.sum())

    def evict_at_cut(self) -> int:
        """The eviction a checkpoint cut (and a job's end) runs, if the config asks for any."""
        return self.evict() if self.config.eviction.at_cuts else 0

    def bookkeeping_bytes_per_row(self) -> dict[str, float]:
        """Bytes per live row besides weight and optimizer state (arena slack included)."""
        rows = max(self.num_rows, 1)
        parts = {**self.index.nbytes(), "last_seen": self.last_seen.nbytes}
        out = {name: nbytes / rows for name, nbytes in parts.items()}
        return {**out, "total": sum(out.values()), "versions": self.versions.nbytes / rows}

    def stats(self) -> dict[str, Any]:
        """Live rows and counters per table (those with any activity) and in total."""
        c = self.counters
        per_table = {
            int(t): {"rows": int(c["inserted"][t] - c["evicted"][t])}
            | {name: int(c[name][t]) for name in COUNTERS}
            for t in np.flatnonzero(sum(c.values()))
        }
        return {
            "num_rows": self.num_rows,
            "capacity": self.capacity,
            "skipped_updates": self.skipped_updates,
            "totals": {name: int(c[name].sum()) for name in COUNTERS},
            "per_table": per_table,
            "bookkeeping_bytes_per_row": self.bookkeeping_bytes_per_row(),
            "sketch_bytes": int(self.sketch.nbytes),
        }

    # ------------------------------------------------------------------ checkpoints
    def _rows_state(self, slots: Int64s) -> dict[str, Any]:
        slots = slots[np.argsort(self.index.keys[slots])]
        rows = torch.from_numpy(slots)
        return {
            "keys": torch.from_numpy(self.index.keys[slots].copy()),
            "weight": self.weight[rows],
            "versions": self.versions[rows],
            "last_seen": torch.from_numpy(self.last_seen[slots]),
            "optimizer": {n: t[rows] for n, t in self.optimizer.state_dict().items()},
            "global_step": self.global_step,
            "clock": self.clock,
            "skipped_updates": self.skipped_updates,
            # the uint16 counters' bits as int16: torch pickles no uint16 tensor
            "sketch": torch.from_numpy(self.sketch.view(np.int16).copy()),
            "counters": {n: torch.from_numpy(c.copy()) for n, c in self.counters.items()},
            **({} if self.day_starts is None else {"day_starts": self.day_starts.clone()}),
        }

    def _load_rows_state(self, state: dict[str, Any]) -> None:
        keys = state["keys"].numpy()
        self._reserve(self.num_rows + int((self.index.find(keys) < 0).sum()))
        slots, _ = self.index.find_or_insert(keys)
        rows = torch.from_numpy(slots)
        self.weight[rows] = state["weight"]
        self.versions[rows] = state["versions"]
        self.last_seen[slots] = state["last_seen"].numpy()
        for name, tensor in self.optimizer.state_dict().items():
            tensor[rows] = state["optimizer"][name]
        self.global_step = int(state["global_step"])
        self.clock = int(state["clock"])
        self.skipped_updates = int(state["skipped_updates"])
        self.sketch = state["sketch"].numpy().view(np.uint16).copy()
        self.counters = {n: c.numpy().copy() for n, c in state["counters"].items()}
        starts = state.get("day_starts")
        self.day_starts = None if starts is None else starts.clone()

    def state_dict(self) -> dict[str, Any]:
        """The live rows, compacted and sorted by key, and every scalar, sketch and counter."""
        return self._rows_state(self.index.live_slots())

    def load_state_dict(self, state: dict[str, Any]) -> None:
        rows, bound = int(state["keys"].numel()), self.config.max_rows
        if bound is not None and rows > bound:
            raise ValueError(
                f"hash shard {self.name!r}: checkpoint of {rows} rows > max_rows={bound}"
            )
        self._new_arena(max(self.config.initial_rows, rows))
        self._load_rows_state(state)
