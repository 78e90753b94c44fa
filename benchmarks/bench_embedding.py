"""Rows/s of one embedding shard: pooled lookup, and lookup + backward + Adagrad update.

One 1M x 16 shard, batches of 256 examples x 26 Zipf-distributed ids (one per bag), median
of repeats. The baseline in the same run is torch.nn.EmbeddingBag(sparse=True) with
torch.optim.Adagrad on the same ids. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

from recsync.optim.rowwise import RowOptimizerSpec
from recsync.ps.shard import EmbeddingShard, init_table, row_gradients


def zipf_ids(num_rows: int, count: int, exponent: float, gen: torch.Generator) -> torch.Tensor:
    probs = 1.0 / torch.arange(1, num_rows + 1, dtype=torch.float64) ** exponent
    return torch.multinomial(probs / probs.sum(), count, replacement=True, generator=gen)


def rows_per_second(fn, batches) -> float:
    start = time.perf_counter()
    for ids, offsets in batches:
        fn(ids, offsets)
    return sum(int(ids.numel()) for ids, _ in batches) / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--dim", type=int, default=16)
    parser.add_argument("--batches", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()

    gen = torch.Generator().manual_seed(0)
    per_batch = 256 * 26
    batches = [
        (zipf_ids(args.rows, per_batch, 1.05, gen), torch.arange(per_batch + 1))
        for _ in range(args.batches)
    ]
    weight = init_table(args.rows, args.dim, 0)
    shard = EmbeddingShard(
        weight.clone(), RowOptimizerSpec("adagrad", lr=0.05).build(args.rows, args.dim)
    )
    bag = torch.nn.EmbeddingBag(args.rows, args.dim, mode="sum", sparse=True)
    with torch.no_grad():
        bag.weight.copy_(weight)
    bag_opt = torch.optim.Adagrad(bag.parameters(), lr=0.05)
    upstream = torch.randn(per_batch, args.dim, generator=gen)

    def lookup(ids, offsets):
        shard.lookup(ids, offsets)

    def update(ids, offsets):
        shard.lookup(ids, offsets)
        rows, grads = row_gradients(ids, offsets, upstream)
        shard.apply_gradients(rows, grads)

    def baseline_lookup(ids, offsets):
        with torch.no_grad():
            bag(ids, offsets[:-1])

    def baseline_update(ids, offsets):
        bag_opt.zero_grad()
        (bag(ids, offsets[:-1]) * upstream).sum().backward()
        bag_opt.step()

    results: dict[str, list[float]] = {
        k: [] for k in ("lookup", "update", "base_lookup", "base_update")
    }
    fns = {
        "lookup": lookup,
        "update": update,
        "base_lookup": baseline_lookup,
        "base_update": baseline_update,
    }
    for fn in fns.values():
        rows_per_second(fn, batches[:5])
    for _ in range(args.repeats):
        for name, fn in fns.items():
            results[name].append(rows_per_second(fn, batches))
    median = {k: statistics.median(v) for k, v in results.items()}
    print(
        json.dumps(
            {
                "benchmark": "embedding_shard",
                "rows": args.rows,
                "dim": args.dim,
                "ids_per_batch": per_batch,
                "torch_threads": torch.get_num_threads(),
                "repeats": args.repeats,
                "lookup_rows_per_s": round(median["lookup"]),
                "update_rows_per_s": round(median["update"]),
                "baseline_lookup_rows_per_s": round(median["base_lookup"]),
                "baseline_update_rows_per_s": round(median["base_update"]),
                "lookup_ratio": round(median["lookup"] / median["base_lookup"], 3),
                "update_ratio": round(median["update"] / median["base_update"], 3),
            }
        )
    )


if __name__ == "__main__":
    main()
