"""How far this machine's cores scale the math itself: n processes, each training the
reference train step (default dense part, 26 tables of 100,000 rows, batch 256, one torch
thread) on its own batches at once, no Ray and no messages. Their summed examples/s over n
times one process's is the ceiling any engine on this machine can reach for n workers:
cores that share a physical core (SMT), memory bandwidth and caches slow each other down
whatever the engine does.

Prints one JSON line per process count (median of `--repeats`), then one JSON object with
the efficiencies EPS(n) / (n x EPS(1)) and `ceiling_12_over_2` (the most 12 workers can
make over 2: bench_scaling's 6 x 2 over 1 x 2).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import statistics
import time
from typing import Any

import torch

from recsync.data.synthetic import SyntheticSpec, SyntheticTask
from recsync.model.spec import ModelSpec, default_tables
from recsync.optim.train_spec import TrainSpec
from recsync.trainer.reference import ReferenceTrainer

COUNTS = (1, 2, 4, 6, 8, 12, 16)
TABLE_ROWS = 100_000


def _train(seed: int, seconds: float, start: Any, results: Any) -> None:
    """One process: warm up, wait for the others, train for `seconds`, report examples."""
    torch.set_num_threads(1)
    task = SyntheticTask(
        SyntheticSpec(num_train=256 * 32, table_rows=(TABLE_ROWS,) * 26, seed=seed)
    )
    batches = list(task.train_batches(256))
    trainer = ReferenceTrainer(ModelSpec(tables=default_tables(num_rows=TABLE_ROWS)), TrainSpec())
    for batch in batches[:4]:
        trainer.train_step(batch)
    start.wait()
    examples, began = 0, time.perf_counter()
    while time.perf_counter() - began < seconds:
        for batch in batches:
            trainer.train_step(batch)
            examples += batch.batch_size
    results.put(examples / (time.perf_counter() - began))


def machine_eps(processes: int, seconds: float) -> float:
    """Summed examples/s of `processes` processes training at once."""
    context = mp.get_context("spawn")
    start, results = context.Barrier(processes), context.Queue()
    workers = [
        context.Process(target=_train, args=(seed, seconds, start, results))
        for seed in range(processes)
    ]
    for worker in workers:
        worker.start()
    total = sum(results.get() for _ in workers)
    for worker in workers:
        worker.join()
    return total


def machine_scaling(num_cpus: int, seconds: float, repeats: int) -> dict[str, Any]:
    """EPS per process count up to `num_cpus`, the efficiencies and the 12-over-2 ceiling."""
    eps: dict[int, float] = {}
    for n in (c for c in COUNTS if c <= num_cpus):
        eps[n] = statistics.median(machine_eps(n, seconds) for _ in range(repeats))
        print(json.dumps({"group": "machine", "processes": n, "eps": round(eps[n])}), flush=True)
    return {
        "machine_eps": {str(n): round(e) for n, e in eps.items()},
        "machine_efficiency": {str(n): round(e / (n * eps[1]), 3) for n, e in eps.items()},
        "ceiling_12_over_2": round(eps[12] / eps[2], 3) if 12 in eps else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--num-cpus", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args()
    print(
        json.dumps(
            {"benchmark": "cores", **machine_scaling(args.num_cpus, args.seconds, args.repeats)}
        )
    )


if __name__ == "__main__":
    main()
