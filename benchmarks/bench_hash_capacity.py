"""Every id of Criteo Kaggle's 26 features (33.76M distinct, its per-feature cardinalities)
inserted into hash tables: whether they fit this machine's memory and at what rate.

The keys (feature prefix, ids 0..cardinality-1 of each feature, shuffled) are spread over
`--shards` hash shards by `shard_of_keys`, as a job's layout spreads them, and each shard
takes its keys through training lookups of `--batch` ids (rows created on first sight, as
in training, with row-wise Adagrad state, dim 16). Reports the insert rate (ids/s, one
torch thread), the rows held, the process's peak resident memory and the shards' bytes per
row (row, optimizer state, bookkeeping). `--fraction` inserts that share of the ids (a
quicker run). Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import resource
import time

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
    parts = [
        make_keys(f, np.arange(max(int(r * fraction), 1), dtype=np.int64))
        for f, r in enumerate(CRITEO_CARDINALITIES)
    ]
    keys = torch.from_numpy(np.concatenate(parts))
    return keys[torch.randperm(keys.numel(), generator=torch.Generator().manual_seed(seed))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--shards", type=int, default=8)
    parser.add_argument("--batch", type=int, default=65_536)
    parser.add_argument("--dim", type=int, default=16)
    parser.add_argument("--fraction", type=float, default=1.0)
    args = parser.parse_args()
    torch.set_num_threads(1)
    keys = all_keys(args.fraction, seed=0)
    tables = tuple(TableSpec(f"C{f + 1}", 1, args.dim) for f in range(26))
    layout = HashLayout(tables, args.shards, HashTables())
    optimizer = RowOptimizerSpec("rowwise_adagrad", lr=0.05)
    shards = [layout.new_shard(s, optimizer, seed=0) for s in range(args.shards)]
    owner = shard_of_keys(keys, args.shards)
    per_shard = [keys[owner == s] for s in range(args.shards)]
    seconds = 0.0
    for shard, mine in zip(shards, per_shard, strict=True):
        for start in range(0, mine.numel(), args.batch):
            part = mine[start : start + args.batch]
            offsets = torch.arange(part.numel() + 1)
            begin = time.perf_counter()
            shard.lookup(part, offsets)
            seconds += time.perf_counter() - begin
    rows = sum(s.num_rows for s in shards)
    row_bytes = args.dim * 4 + 4  # the row and its row-wise Adagrad accumulator
    bookkeeping = sum(s.bookkeeping_bytes_per_row()["total"] * s.num_rows for s in shards)
    versions = sum(s.bookkeeping_bytes_per_row()["versions"] * s.num_rows for s in shards)
    arena = sum(s.capacity * row_bytes for s in shards)
    print(
        json.dumps(
            {
                "benchmark": "hash_capacity",
                "ids": int(keys.numel()),
                "rows": rows,
                "shards": args.shards,
                "dim": args.dim,
                "insert_ids_per_s": round(keys.numel() / seconds),
                "insert_seconds": round(seconds, 1),
                "peak_rss_gib": round(
                    resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2
                ),
                "arena_bytes_per_row": round(arena / rows, 1),
                "bookkeeping_bytes_per_row": round(bookkeeping / rows, 1),
                "versions_bytes_per_row": round(versions / rows, 1),
            }
        )
    )


if __name__ == "__main__":
    main()
