"""Rows/s of one embedding shard: pooled lookup, and lookup + backward + Adagrad update.

One 1M x 16 shard, batches of 256 examples x 26 Zipf-distributed ids (one per bag), median
of repeats. The baseline in the same run is torch.nn.EmbeddingBag(sparse=True) with
torch.optim.Adagrad on the same ids. Then, on one torch thread (per core), the hash shard
(`HashEmbeddingShard`) holding 1M keys of 26 features: hit-only pooled lookups (`peek` and the
training `lookup`, which also marks rows seen), batches with 10% never-seen keys (inserted),
lookup + update, and its bookkeeping bytes per row. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

from recsync.optim.rowwise import RowOptimizerSpec
from recsync.ps.hash_shard import HashEmbeddingShard, HashTableConfig
from recsync.ps.shard import EmbeddingShard, init_table, row_gradients

NUM_FEATURES = 26
ID_BITS = 56


def zipf_ids(num_rows: int, count: int, exponent: float, gen: torch.Generator) -> torch.Tensor:
    probs = 1.0 / torch.arange(1, num_rows + 1, dtype=torch.float64) ** exponent
    return torch.multinomial(probs / probs.sum(), count, replacement=True, generator=gen)


def rows_per_second(fn, batches) -> float:
    start = time.perf_counter()
    for ids, offsets in batches:
        fn(ids, offsets)
    return sum(int(ids.numel()) for ids, _ in batches) / (time.perf_counter() - start)


def feature_keys(ids: torch.Tensor, feature: torch.Tensor) -> torch.Tensor:
    """Raw-looking keys: feature in the top 8 bits, a scrambled 56-bit id below."""
    scrambled = (ids * -0x61C8864680B583EB) & ((1 << ID_BITS) - 1)
    return (feature << ID_BITS) | scrambled


def hash_shard_figures(args: argparse.Namespace, gen: torch.Generator) -> dict[str, object]:
    """The hash shard's rates on one torch thread, medians of `args.repeats`."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    per_batch = 256 * NUM_FEATURES
    per_feature = args.rows // NUM_FEATURES
    feature = torch.arange(per_batch) % NUM_FEATURES
    offsets = torch.arange(per_batch + 1)
    batches = [
        feature_keys(zipf_ids(per_feature, per_batch, 1.05, gen), feature)
        for _ in range(args.batches)
    ]
    everything = feature_keys(
        torch.arange(per_feature).repeat(NUM_FEATURES),
        torch.arange(NUM_FEATURES).repeat_interleave(per_feature),
    )
    config = HashTableConfig(dim=args.dim, initial_rows=everything.numel())
    shard = HashEmbeddingShard(config, RowOptimizerSpec("adagrad", lr=0.05))
    shard.lookup(everything, torch.arange(everything.numel() + 1))
    bookkeeping_at_start = shard.bookkeeping_bytes_per_row()
    upstream = torch.randn(per_batch, args.dim, generator=gen)
    fresh_from = per_feature

    def with_new_ids(ids: torch.Tensor) -> torch.Tensor:
        """`ids` with every 10th replaced by a key never seen before."""
        nonlocal fresh_from
        ids = ids.clone()
        count = ids[::10].numel()
        ids[::10] = feature_keys(torch.arange(fresh_from, fresh_from + count), feature[::10])
        fresh_from += count
        return ids

    def update(ids: torch.Tensor, offsets: torch.Tensor) -> None:
        shard.lookup(ids, offsets)
        rows, grads = row_gradients(ids, offsets, upstream)
        shard.apply_gradients(rows, grads)

    fns = {"peek": shard.peek, "lookup": shard.lookup, "update": update}
    results: dict[str, list[float]] = {name: [] for name in (*fns, "new_10pct")}
    for fn in fns.values():
        rows_per_second(fn, [(ids, offsets) for ids in batches[:5]])
    for _ in range(args.repeats):
        for name, fn in fns.items():
            results[name].append(rows_per_second(fn, [(ids, offsets) for ids in batches]))
        mixed = [(with_new_ids(ids), offsets) for ids in batches]
        results["new_10pct"].append(rows_per_second(shard.lookup, mixed))
    median = {name: statistics.median(values) for name, values in results.items()}
    torch.set_num_threads(threads)
    return {
        "hash_torch_threads": 1,
        "hash_rows_at_start": everything.numel(),
        "hash_rows_at_end": shard.num_rows,
        "hash_hit_peek_ids_per_s": round(median["peek"]),
        "hash_hit_lookup_ids_per_s": round(median["lookup"]),
        "hash_new_10pct_lookup_ids_per_s": round(median["new_10pct"]),
        "hash_update_rows_per_s": round(median["update"]),
        "hash_bookkeeping_bytes_per_row_at_start": {
            name: round(value, 2) for name, value in bookkeeping_at_start.items()
        },
        "hash_bookkeeping_bytes_per_row_at_end": {
            name: round(value, 2) for name, value in shard.bookkeeping_bytes_per_row().items()
        },
    }


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
    hashed = hash_shard_figures(args, gen)
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
                **hashed,
            }
        )
    )


if __name__ == "__main__":
    main()
