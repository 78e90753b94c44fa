"""Simulator speed: 1,000 async workers vs the single-process reference trainer.

Both train the same small model (embedding dim 8, MLPs 64-32) on the same synthetic
examples (default 200,000, batch 32); the simulator runs 1,000 asynchronous workers (1,000
trainers of one worker thread, 2 dense servers, 2 embedding servers) with the real math, in
virtual time. Each repeat times both back to back, in alternating order (reference first,
then simulator first, ...), so that a drift of this shared machine's speed hits both alike.
Prints one JSON object: `ratio` = the median over repeats of simulator time / reference
time in the same repeat (the target is <= 1.5); `ratio_of_medians` as well.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

from recsync.coordinator.job import ClusterSpec
from recsync.coordinator.planning import JobSpec, plan_for
from recsync.data.synthetic import SyntheticSpec, SyntheticTask
from recsync.model.spec import ModelSpec, default_tables
from recsync.runtime.sim.cost import CostModel
from recsync.runtime.sim.job import SimJob
from recsync.sync.asynchronous import AsyncConfig
from recsync.trainer.reference import ReferenceTrainer, TrainSpec


def small_model() -> ModelSpec:
    return ModelSpec(
        tables=default_tables(num_rows=100, dim=8), bottom_mlp=(64, 32), top_mlp=(64, 32)
    )


def reference_seconds(model, train, synthetic) -> float:
    start = time.perf_counter()
    trainer = ReferenceTrainer(model, train)
    for batch in SyntheticTask(synthetic).train_batches(train.batch_size):
        trainer.train_step(batch)
    return time.perf_counter() - start


def sim_seconds(model, train, synthetic, workers: int, servers: int = 2) -> tuple[float, dict]:
    start = time.perf_counter()
    cluster = ClusterSpec(workers, 1, servers, servers)
    spec = JobSpec(model, train, cluster, AsyncConfig(), synthetic)
    summary = SimJob(spec, plan_for(spec), CostModel()).run()
    return time.perf_counter() - start, summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--examples", type=int, default=200_000)
    parser.add_argument("--workers", type=int, default=1000)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--servers", type=int, default=2, help="embedding servers, and as many dense servers"
    )
    args = parser.parse_args()
    torch.set_num_threads(1)
    model = small_model()
    train = TrainSpec(batch_size=args.batch_size)
    synthetic = SyntheticSpec(num_train=args.examples, num_test=10_000)
    ref, sim, summary = [], [], {}
    for repeat in range(args.repeats):
        if repeat % 2 == 0:
            ref.append(reference_seconds(model, train, synthetic))
        seconds, summary = sim_seconds(model, train, synthetic, args.workers, args.servers)
        sim.append(seconds)
        if repeat % 2 == 1:
            ref.append(reference_seconds(model, train, synthetic))
    print(
        json.dumps(
            {
                "benchmark": "bench_sim",
                "examples": args.examples,
                "workers": args.workers,
                "servers": args.servers,
                "batch_size": args.batch_size,
                "repeats": args.repeats,
                "reference_s_median": statistics.median(ref),
                "sim_s_median": statistics.median(sim),
                "reference_s": ref,
                "sim_s": sim,
                "ratio": statistics.median(s / r for s, r in zip(sim, ref, strict=True)),
                "ratio_of_medians": statistics.median(sim) / statistics.median(ref),
                "sim_mean_dense_staleness": summary["dense_staleness"]["mean"],
                "sim_test_auc": summary["test_auc"],
            }
        )
    )


if __name__ == "__main__":
    main()
