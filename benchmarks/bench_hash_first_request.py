"""CPU a hash embedding server spends on its first request in a fresh process, against the
requests after it: the first call of each compiled kernel loads it from numba's cache
(compiles it where the cache is missing), which a server built in a new process pays inside
the engine's run (its CPU from when the node was built, its clock from the job's start).

Each of `--processes` fresh interpreters builds a hash shard over the default model's
tables (one shard, `HashTables()` defaults), then serves `--batches` batches of the keyed
synthetic task (a lookup and the push of its row gradients, process CPU time each): prints
one JSON object per process and a summary of medians, with the machine's load average (the
CPU time of a loaded machine runs higher). The simulator charges a hash row `row_s +
hash_row_s` and nothing once a process (runtime/sim/cost.py): on a job of ~60K examples the
first requests alone are ~20-30 us of server CPU an example (docs/perf-log.md)."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

CHILD = """
import dataclasses, json, sys, time
import torch
torch.set_num_threads(1)
from recsync.data.synthetic import SyntheticSpec, SyntheticTask
from recsync.model.hash_spec import HashTables
from recsync.model.spec import ModelSpec
from recsync.optim.train_spec import TrainSpec
from recsync.ps.hash_layout import HashLayout
from recsync.ps.shard import row_gradients
batches = int(sys.argv[1])
model, train = ModelSpec(), TrainSpec()
keyed = dataclasses.replace(SyntheticSpec(), num_train=train.batch_size * batches, keyed=True)
stream = list(SyntheticTask(keyed).train_batches(train.batch_size))
started = time.process_time()
layout = HashLayout(model.tables, 1, HashTables())
shard = layout.new_shard(0, train.sparse_optimizer, train.seed)
built_s = time.process_time() - started
spent = []
for batch in stream:
    request = layout.route(batch)[0]
    started = time.process_time()
    pooled = shard.lookup(request.rows, request.offsets, request.weights)
    shard.apply_gradients(*row_gradients(request.rows, request.offsets, pooled, request.weights))
    spent.append(time.process_time() - started)
rest = sorted(spent[1:])
print(json.dumps({"build_s": round(built_s, 4), "first_s": round(spent[0], 4),
                  "next_median_s": round(rest[len(rest) // 2], 5)}))
"""


def one_process(batches: int) -> dict[str, float]:
    """A fresh interpreter's build, first request and median later request (CPU seconds)."""
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(batches)],
        check=True,
        capture_output=True,
        text=True,
        env=os.environ,
    )
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--processes", type=int, default=3)
    parser.add_argument("--batches", type=int, default=20, help="requests a process serves")
    args = parser.parse_args()
    if args.processes < 1 or args.batches < 2:
        raise ValueError("--processes must be >= 1 and --batches >= 2")
    load_before = os.getloadavg()
    started = time.perf_counter()
    runs = []
    for _ in range(args.processes):
        run = one_process(args.batches)
        print(json.dumps(run), flush=True)
        runs.append(run)
    summary = {
        key: statistics.median(run[key] for run in runs)
        for key in ("build_s", "first_s", "next_median_s")
    }
    summary["first_beyond_next_s"] = round(summary["first_s"] - summary["next_median_s"], 4)
    print(
        json.dumps(
            {
                "benchmark": "bench_hash_first_request",
                "processes": args.processes,
                "median": summary,
                "load_before": load_before,
                "load_after": os.getloadavg(),
                "wall_s": round(time.perf_counter() - started, 1),
            }
        )
    )


if __name__ == "__main__":
    main()
