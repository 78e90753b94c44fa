"""Every id of Criteo Kaggle's 26 features (33.76M distinct, its per-feature cardinalities)
inserted into hash tables: whether they fit this machine's memory, and at what rate.

The keys (feature prefix, ids 0..cardinality-1 of each feature, shuffled) are spread over
the shards by `shard_of_keys`, as a job's layout spreads them, and each shard takes its
keys through training lookups (rows created on first sight, as in training, with row-wise
Adagrad state). `fraction` inserts that share of each feature's ids (a quicker run).
"""

from __future__ import annotations

import resource
import time
from typing import Any

import numpy as np
import torch

from recsync.data.keys import make_keys
from recsync.model.hash_spec import HashTables
from recsync.model.spec import TableSpec
from recsync.optim.rowwise import RowOptimizerSpec
from recsync.ps.hash_layout import HashLayout, shard_of_keys

CRITEO_CARDINALITIES = (
    1460, 583, 10131227, 2202608, 305, 24, 12517, 633, 3, 93145, 5683, 8351593, 3194,
    27, 14992, 5461306, 10, 5652, 2173, 4, 7046547, 18, 15, 286181, 105, 142572,
)  # fmt: skip


def all_keys(fraction: float, seed: int) -> torch.Tensor:
    """Every feature's ids (its first `fraction` of them) as keys, shuffled."""
    parts = [
        make_keys(f, np.arange(max(int(r * fraction), 1), dtype=np.int64))
        for f, r in enumerate(CRITEO_CARDINALITIES)
    ]
    keys = torch.from_numpy(np.concatenate(parts))
    return keys[torch.randperm(keys.numel(), generator=torch.Generator().manual_seed(seed))]


def insert_all(
    shards: int = 8, batch: int = 65_536, dim: int = 16, fraction: float = 1.0
) -> dict[str, Any]:
    """Insert the keys; the rate (ids/s, one torch thread), rows, peak resident memory of
    this process and the shards' bytes per row."""
    torch.set_num_threads(1)
    keys = all_keys(fraction, seed=0)
    tables = tuple(TableSpec(f"C{f + 1}", 1, dim) for f in range(26))
    layout = HashLayout(tables, shards, HashTables())
    optimizer = RowOptimizerSpec("rowwise_adagrad", lr=0.05)
    built = [layout.new_hash_shard(s, optimizer, seed=0) for s in range(shards)]
    owner = shard_of_keys(keys, shards)
    seconds = 0.0
    for s, shard in enumerate(built):
        mine = keys[owner == s]
        for start in range(0, mine.numel(), batch):
            part = mine[start : start + batch]
            begin = time.perf_counter()
            shard.lookup(part, torch.arange(part.numel() + 1))
            seconds += time.perf_counter() - begin
    rows = sum(s.num_rows for s in built)
    row_bytes = dim * 4 + 4  # the row and its row-wise Adagrad accumulator
    per_row = [s.bookkeeping_bytes_per_row() for s in built]
    return {
        "ids": int(keys.numel()),
        "rows": rows,
        "shards": shards,
        "dim": dim,
        "insert_ids_per_s": round(keys.numel() / seconds),
        "insert_seconds": round(seconds, 1),
        "peak_rss_gib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2),
        "arena_bytes_per_row": round(sum(s.capacity for s in built) * row_bytes / rows, 1),
        "bookkeeping_bytes_per_row": round(
            sum(p["total"] * s.num_rows for p, s in zip(per_row, built, strict=True)) / rows, 1
        ),
        "versions_bytes_per_row": round(
            sum(p["versions"] * s.num_rows for p, s in zip(per_row, built, strict=True)) / rows, 1
        ),
    }
