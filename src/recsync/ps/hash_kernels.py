"""The hash shard's compiled loops over a batch of keys (numba): find and mark seen,
count sightings and admit, make initial rows from (seed, key)."""

from __future__ import annotations

import numpy as np

from recsync.ps.hash_index import Array, find_slots, mix64, njit

SKETCH_MAX = np.iinfo(np.uint16).max


@njit
def find_and_touch(
    table: Array, index_keys: Array, query: Array, out: Array, last_seen: Array, clock: int,
    admitted: Array,
) -> int:  # fmt: skip
    """Slots of present keys (marked seen, counted per table), -1 for absent; how many."""
    find_slots(table, index_keys, query, out)
    absent = 0
    for i in range(query.size):
        if out[i] < 0:
            absent += 1
        else:
            last_seen[out[i]] = clock
            admitted[(query[i] >> 56) & 0xFF] += 1
    return absent


@njit
def count_and_admit(
    sketch: Array, query: Array, seed: np.uint64, clock: int, min_count: int,
    probability: float, admitted: Array,
) -> None:  # fmt: skip
    """Count each sighting (saturating); admitted: count reached and the coin came up."""
    mask = np.uint64(sketch.shape[1] - 1)
    coin_salt = mix64(mix64(seed) ^ np.uint64(clock))
    for i in range(query.size):
        key = np.uint64(query[i])
        count = SKETCH_MAX
        for row in range(sketch.shape[0]):
            col = mix64(key ^ mix64(seed + np.uint64(row + 1))) & mask
            if sketch[row, col] < SKETCH_MAX:
                sketch[row, col] += 1
            count = min(count, sketch[row, col])
        coin = (mix64(key ^ coin_salt) >> np.uint64(11)) * 2.0**-53
        admitted[i] = count >= min_count and coin < probability


@njit
def fill_initial_rows(query: Array, seed: np.uint64, bound: float, out: Array) -> None:
    golden = np.uint64(0x9E3779B97F4A7C15)
    for i in range(query.size):
        row_hash = mix64(np.uint64(query[i]) ^ mix64(seed))
        for d in range(out.shape[1]):
            u = (mix64(row_hash + np.uint64(d) * golden) >> np.uint64(40)) * 2.0**-24
            out[i, d] = np.float32((u * 2 - 1) * bound)


@njit
def find_and_bump(
    table: Array, index_keys: Array, query: Array, out: Array, last_seen: Array, clock: int,
    versions: Array,
) -> int:  # fmt: skip
    """Slots of the keys an update touches: present ones get version + 1 and are marked
    seen; -1 for absent ones; returns how many are absent."""
    find_slots(table, index_keys, query, out)
    absent = 0
    for i in range(query.size):
        if out[i] < 0:
            absent += 1
        else:
            versions[out[i]] += 1
            last_seen[out[i]] = clock
    return absent
