"""Key -> slot maps for hash tables, measured on the same keys: the candidates the shard's
map was chosen from.

1M int64 keys (26 features' prefixes, random 40-bit ids) held; batches of 256 x 26 keys,
Zipf-skewed over the held keys (hits), and the same with 10% never-seen keys inserted.
- `numba`: recsync's open-addressing map (ps/hash_index.py), compiled, batched;
- `dict`: a Python dict (keys as ints; the baseline);
- `sorted`: a sorted key array searched with numpy's searchsorted (vectorised; an insert
  merges the new keys in, a sort of the whole array).
Reports ids per second (median of repeats, one thread) and each over the dict. Prints one
JSON object.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable

import numpy as np

from recsync.ps.hash_index import HashIndex

Keys = np.ndarray


def keys_and_batches(rows: int, batches: int, seed: int) -> tuple[Keys, list[Keys], list[Keys]]:
    rng = np.random.default_rng(seed)
    features = rng.integers(0, 26, rows, dtype=np.int64)
    held = np.unique((features << 56) | rng.integers(0, 2**40, rows, dtype=np.int64))
    ranks = np.minimum(rng.zipf(1.05, (batches, 256 * 26)), held.size) - 1
    hits = [held[r] for r in ranks]
    fresh = []
    for batch in hits:
        mixed = batch.copy()
        new = rng.random(batch.size) < 0.1
        mixed[new] = (25 << 56) | rng.integers(2**41, 2**42, int(new.sum()), dtype=np.int64)
        fresh.append(mixed)
    return held, hits, fresh


def ids_per_second(fn: Callable[[Keys], object], batches: list[Keys]) -> float:
    start = time.perf_counter()
    for batch in batches:
        fn(batch)
    return sum(b.size for b in batches) / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--batches", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    held, hits, fresh = keys_and_batches(args.rows, args.batches, seed=0)

    index = HashIndex(held.size + 1)
    index.find_or_insert(held)
    table = {int(k): i for i, k in enumerate(held)}
    ordered = np.sort(held)

    def numba_insert(batch: Keys) -> object:
        return index.find_or_insert(batch)

    def dict_find(batch: Keys) -> object:
        return [table.get(k, -1) for k in batch.tolist()]

    def dict_insert(batch: Keys) -> object:
        return [table.setdefault(k, len(table)) for k in batch.tolist()]

    def sorted_find(batch: Keys) -> object:
        at = np.minimum(np.searchsorted(ordered, batch), ordered.size - 1)
        return np.where(ordered[at] == batch, at, -1)

    def sorted_insert(batch: Keys) -> object:
        nonlocal ordered
        missing = batch[~np.isin(batch, ordered)]
        if missing.size:
            ordered = np.sort(np.concatenate([ordered, np.unique(missing)]))
        return sorted_find(batch)

    runs = {
        "numba_hit": (index.find, hits),
        "dict_hit": (dict_find, hits),
        "sorted_hit": (sorted_find, hits),
        "numba_new10": (numba_insert, fresh),
        "dict_new10": (dict_insert, fresh),
        "sorted_new10": (sorted_insert, fresh),
    }
    figures: dict[str, list[float]] = {name: [] for name in runs}
    for fn, batches in runs.values():  # warm-up (numba compiles from its cache)
        ids_per_second(fn, batches[:2])
    for _ in range(args.repeats):
        for name, (fn, batches) in runs.items():
            figures[name].append(ids_per_second(fn, batches))
    median = {name: statistics.median(v) for name, v in figures.items()}
    result: dict[str, object] = {
        "benchmark": "hash_map",
        "rows": int(held.size),
        "ids_per_batch": 256 * 26,
        "repeats": args.repeats,
    }
    result |= {f"{name}_ids_per_s": round(v) for name, v in median.items()}
    for kind in ("hit", "new10"):
        for name in ("numba", "sorted"):
            result[f"{name}_{kind}_over_dict"] = round(
                median[f"{name}_{kind}"] / median[f"dict_{kind}"], 2
            )
    print(json.dumps(result))


if __name__ == "__main__":
    main()
