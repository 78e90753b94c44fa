"""A hash map from int64 keys to arena slots: open addressing, linear probing, numba kernels.

The table holds int32 slots only (-1: empty); the key of a slot lives in `keys[slot]`, so the
map costs 4 bytes per table position plus 8 per slot. Positions come from the high bits of the
splitmix64 finalizer of the key, which mixes all 64 bits (the keys of one shard were routed
to it by another hash of the key, so their low bits need not vary). Deletion shifts the
following cluster back (no tombstones). Freed slots form a free list threaded through `keys`.
Every operation takes a batch of keys; the per-key loops run compiled.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, cast

import numba
import numpy as np
import numpy.typing as npt

_Fn = TypeVar("_Fn", bound=Callable[..., Any])
Array = npt.NDArray[Any]
Int64s = npt.NDArray[np.int64]

MAX_LOAD = 0.75
# counters[...]: live keys, first slot never handed out, head of the free list (-1: empty)
SIZE, NEXT_SLOT, FREE_HEAD = 0, 1, 2


def njit(fn: _Fn) -> _Fn:
    """numba.njit(cache=True), typed for mypy."""
    return cast(_Fn, numba.njit(cache=True)(fn))


@njit
def mix64(key: int | np.uint64) -> np.uint64:
    """splitmix64's finalizer: a bijection of 64 bits in which every input bit moves every
    output bit."""
    z = np.uint64(key)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@njit
def home_shift(table: Array) -> np.uint64:
    """64 - log2(table size): a key's home position is mix64(key) >> home_shift."""
    bits = 0
    while (1 << bits) < table.size:
        bits += 1
    return np.uint64(64 - bits)


@njit
def probe(table: Array, keys: Array, key: int, shift: np.uint64) -> np.int64:
    """The table position holding `key`, or the empty position where it would go."""
    mask = table.size - 1
    pos = np.int64(mix64(key) >> shift)
    while table[pos] >= 0 and keys[table[pos]] != key:
        pos = (pos + 1) & mask
    return pos


@njit
def find_slots(table: Array, keys: Array, query: Array, out: Array) -> None:
    """out[i]: the slot of query[i], -1 if absent. Two passes (home positions, then keys) so
    the cache misses of many keys overlap instead of forming one chain per key."""
    shift = home_shift(table)
    mask = table.size - 1
    for i in range(query.size):
        out[i] = table[np.int64(mix64(query[i]) >> shift)]
    for i in range(query.size):
        if out[i] >= 0 and keys[out[i]] != query[i]:
            pos = (np.int64(mix64(query[i]) >> shift) + 1) & mask
            while table[pos] >= 0 and keys[table[pos]] != query[i]:
                pos = (pos + 1) & mask
            out[i] = table[pos]


@njit
def _find_or_insert(
    table: Array,
    keys: Array,
    counters: Array,
    query: Array,
    start: int,
    out: Array,
    inserted: Array,
) -> int:
    """Fills out[start:]; stops (returning where) when the table passes MAX_LOAD or no slot
    is left, for the caller to grow and resume."""
    max_size = int(table.size * MAX_LOAD)
    shift = home_shift(table)
    for i in range(start, query.size):
        pos = probe(table, keys, query[i], shift)
        if table[pos] >= 0:
            out[i] = table[pos]
            continue
        if counters[SIZE] >= max_size:
            return i
        slot = counters[FREE_HEAD]
        if slot >= 0:
            counters[FREE_HEAD] = keys[slot]
        elif counters[NEXT_SLOT] < keys.size:
            slot = counters[NEXT_SLOT]
            counters[NEXT_SLOT] += 1
        else:
            return i
        keys[slot] = query[i]
        table[pos] = slot
        counters[SIZE] += 1
        out[i] = slot
        inserted[i] = True
    return query.size


@njit
def _delete(table: Array, keys: Array, counters: Array, query: Array) -> int:
    """Remove the keys present; returns how many. Backward-shift: each entry after the hole
    moves into it unless its home lies cyclically in (hole, entry]."""
    mask = table.size - 1
    shift = home_shift(table)
    removed = 0
    for i in range(query.size):
        hole = probe(table, keys, query[i], shift)
        slot = table[hole]
        if slot < 0:
            continue
        keys[slot] = counters[FREE_HEAD]
        counters[FREE_HEAD] = slot
        counters[SIZE] -= 1
        removed += 1
        pos = hole
        while True:
            pos = (pos + 1) & mask
            if table[pos] < 0:
                break
            home = np.int64(mix64(keys[table[pos]]) >> shift)
            if (pos - home) & mask >= (pos - hole) & mask:
                table[hole] = table[pos]
                hole = pos
        table[hole] = -1
    return removed


@njit
def _rehash(old: Array, keys: Array, new: Array) -> None:
    shift = home_shift(new)
    for pos in range(old.size):
        if old[pos] >= 0:
            new[probe(new, keys, keys[old[pos]], shift)] = old[pos]


class HashIndex:
    """int64 key -> slot in [first_slot, slot_capacity), inserting into free slots.

    Slots below `first_slot` are never handed out (the owner reserves them). `keys` grows by
    doubling when the slots run out, the table by doubling past load MAX_LOAD.
    """

    def __init__(self, slot_capacity: int = 16, first_slot: int = 0):
        assert slot_capacity > first_slot >= 0
        self.keys = np.zeros(slot_capacity, dtype=np.int64)
        self.table = np.full(_table_size(slot_capacity), -1, dtype=np.int32)
        self.counters = np.array([0, first_slot, -1], dtype=np.int64)

    def __len__(self) -> int:
        return int(self.counters[SIZE])

    @property
    def slot_capacity(self) -> int:
        return int(self.keys.size)

    def find(self, query: Int64s) -> Int64s:
        """The slot of each key (int64), -1 where absent. Read-only."""
        out = np.empty(query.size, dtype=np.int64)
        find_slots(self.table, self.keys, query, out)
        return out

    def find_or_insert(self, query: Int64s) -> tuple[Int64s, npt.NDArray[np.bool_]]:
        """(slot of each key, whether this call inserted it); absent keys take a freed slot
        or the next unused one."""
        out = np.empty(query.size, dtype=np.int64)
        inserted = np.zeros(query.size, dtype=np.bool_)
        done = 0
        while True:
            done = _find_or_insert(self.table, self.keys, self.counters, query, done, out, inserted)
            if done == query.size:
                return out, inserted
            if len(self) >= int(self.table.size * MAX_LOAD):
                self._grow_table(2 * self.table.size)
            else:
                self.reserve_slots(2 * self.slot_capacity)

    def delete(self, query: Int64s) -> int:
        """Remove the present keys (absent ones are ignored); returns how many went."""
        return int(_delete(self.table, self.keys, self.counters, query))

    def live_slots(self) -> Int64s:
        """The slots holding a key, in table order."""
        return self.table[self.table >= 0].astype(np.int64)

    def reserve_slots(self, slot_capacity: int) -> None:
        """Grow to `slot_capacity` slots (no-op if there are as many)."""
        if slot_capacity <= self.slot_capacity:
            return
        assert slot_capacity < 2**31, "slots are int32 in the table"
        keys = np.zeros(slot_capacity, dtype=np.int64)
        keys[: self.slot_capacity] = self.keys
        self.keys = keys

    def nbytes(self) -> dict[str, int]:
        return {"keys": int(self.keys.nbytes), "index": int(self.table.nbytes)}

    def _grow_table(self, size: int) -> None:
        table = np.full(size, -1, dtype=np.int32)
        _rehash(self.table, self.keys, table)
        self.table = table


def _table_size(slots: int) -> int:
    """The power of two that holds `slots` keys under MAX_LOAD."""
    size = 2
    while size * MAX_LOAD < slots:
        size *= 2
    return size
