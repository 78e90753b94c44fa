"""Simulator speed: 1,000 async workers vs the single-process reference trainer.

Both train the same small model (embedding dim 8, MLPs 64-32) on the same synthetic
examples (default 200,000, batch 32); the simulator runs 1,000 asynchronous workers (1,000
trainers of one worker thread, 2 dense servers, 2 embedding servers) with the real math, in
virtual time. This machine's speed drifts by tens of percent within seconds, so by default
(`--method interleaved`) the two run in step in one process: each time the simulator has
handed out CHUNK_BATCHES more batches, the reference trains on its next CHUNK_BATCHES, timed
apart (its time is taken out of the simulator's); both thus see the same machine. With
`--method paired`, each repeat times both back to back, alternating which goes first.
Prints one JSON object: `ratio` = the median over repeats of simulator time / reference
time in the same repeat (the target is <= 1.5); `ratio_of_medians` as well.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from itertools import islice

import torch

from recsync.coordinator.spec import ClusterSpec, JobSpec, plan_for
from recsync.data.synthetic import SyntheticSpec, SyntheticTask
from recsync.families.gradient.asynchronous import AsyncConfig
from recsync.model.spec import ModelSpec, default_tables
from recsync.optim.train_spec import TrainSpec
from recsync.runtime.sim.cost import CostModel
from recsync.runtime.sim.job import SimJob
from recsync.trainer.reference import ReferenceTrainer


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
    cluster = ClusterSpec(workers, 1, servers, num_dense_servers=servers)
    spec = JobSpec(model, train, cluster, AsyncConfig(), synthetic)
    summary = SimJob(spec, plan_for(spec), CostModel()).run()
    return time.perf_counter() - start, summary


CHUNK_BATCHES = 250  # reference steps per turn in an interleaved run (about 0.3 s here)


class ReferenceInStep:
    """The reference trainer on the simulator's example stream, advanced in turns: called
    with the examples the simulator has handed out so far, it trains on as many batches of
    its own (a turn of CHUNK_BATCHES at a time). `seconds`: its whole time; `during`: the
    part spent inside the simulator's run, to take out of that run's time."""

    def __init__(self, model, train, synthetic):
        start = time.perf_counter()
        self.trainer = ReferenceTrainer(model, train)
        self.batches = iter(SyntheticTask(synthetic).train_batches(train.batch_size))
        self.turn_examples = CHUNK_BATCHES * train.batch_size
        self.next_turn = self.turn_examples
        self.seconds = time.perf_counter() - start
        self.during = 0.0

    def __call__(self, handed: int) -> None:
        if handed >= self.next_turn:
            self.next_turn += self.turn_examples
            self.during += self.train(CHUNK_BATCHES)

    def train(self, batches: int | None = None) -> float:
        start = time.perf_counter()
        for batch in islice(self.batches, batches):
            self.trainer.train_step(batch)
        seconds = time.perf_counter() - start
        self.seconds += seconds
        return seconds


def interleaved_seconds(model, train, synthetic, workers: int, servers: int):
    """(reference seconds, simulator seconds, simulator summary) of one run in step."""
    reference = ReferenceInStep(model, train, synthetic)
    start = time.perf_counter()
    cluster = ClusterSpec(workers, 1, servers, num_dense_servers=servers)
    spec = JobSpec(model, train, cluster, AsyncConfig(), synthetic)
    summary = SimJob(spec, plan_for(spec), CostModel(), on_handed=reference).run()
    sim = time.perf_counter() - start - reference.during
    reference.train()  # what is left of the stream
    return reference.seconds, sim, summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--examples", type=int, default=200_000)
    parser.add_argument("--workers", type=int, default=1000)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--servers", type=int, default=2, help="embedding servers, and as many dense servers"
    )
    parser.add_argument("--method", choices=("interleaved", "paired"), default="interleaved")
    args = parser.parse_args()
    torch.set_num_threads(1)
    model = small_model()
    train = TrainSpec(batch_size=args.batch_size)
    synthetic = SyntheticSpec(num_train=args.examples, num_test=10_000)
    ref, sim, summary = [], [], {}
    for repeat in range(args.repeats):
        if args.method == "interleaved":
            r, seconds, summary = interleaved_seconds(
                model, train, synthetic, args.workers, args.servers
            )
            ref.append(r)
            sim.append(seconds)
            continue
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
                "method": args.method,
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
