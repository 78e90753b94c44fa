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

`--math-modes`: the simulator alone on the same job in both math modes (`real`, and
`priced`: shapes only, runtime/sim/math_modes.py), each in a fresh process: wall seconds,
effects (loop events) per second, the process's peak resident memory, and the priced/real
ratios; `--top-mlp` makes the dense part larger (e.g. 4096,4096: 17 M parameters).

`--scale`: priced math at each of `--sizes` workers (default 100, 1,000, 10,000; one-worker
trainers), `--steps` batches a worker (default 100), each in a fresh process under
`--size-timeout` seconds: wall seconds, peak resident memory, effects a second, and how
time and memory grow from one size to the next (a size past its timeout says so).
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from itertools import islice

import torch

from recsync.coordinator.spec import ClusterSpec, JobSpec, plan_for
from recsync.data.synthetic import SyntheticSpec, SyntheticTask
from recsync.families.gradient.asynchronous import AsyncConfig
from recsync.model.dlrm import dense_num_params
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


def one_mode(args: argparse.Namespace) -> dict:
    """The simulator on the benchmark's job in `args.one_mode` math, in this process."""
    torch.set_num_threads(1)
    top = tuple(int(n) for n in args.top_mlp.split(","))
    model = ModelSpec(tables=default_tables(num_rows=100, dim=8), bottom_mlp=(64, 32), top_mlp=top)
    train = TrainSpec(batch_size=args.batch_size)
    synthetic = SyntheticSpec(num_train=args.examples, num_test=10_000)
    cluster = ClusterSpec(args.workers, 1, args.servers, num_dense_servers=args.servers)
    spec = JobSpec(model, train, cluster, AsyncConfig(), synthetic)
    start = time.perf_counter()
    job = SimJob(spec, plan_for(spec), CostModel(), math=args.one_mode)
    summary = job.run()
    wall = time.perf_counter() - start
    effects = sum(sum(h.measures.effects.values()) for h in job.hosts.values())
    return {
        "math": args.one_mode,
        "wall_s": wall,
        "effects": effects,
        "effects_per_s": effects / wall,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "virtual_train_seconds": summary["train_seconds"],
        "dense_params": dense_num_params(model),
        "test_auc": summary["test_auc"],
    }


def math_modes(args: argparse.Namespace) -> dict:
    """Both math modes, each in a fresh process (peak memory of its own)."""
    runs = {}
    for math in ("real", "priced"):
        command = [sys.executable, __file__, "--one-mode", math, "--top-mlp", args.top_mlp]
        command += ["--examples", str(args.examples), "--workers", str(args.workers)]
        command += ["--servers", str(args.servers), "--batch-size", str(args.batch_size)]
        done = subprocess.run(command, capture_output=True, text=True, check=True)
        runs[math] = json.loads(done.stdout.strip().splitlines()[-1])
    real, priced = runs["real"], runs["priced"]
    return {
        "benchmark": "bench_sim --math-modes",
        "examples": args.examples,
        "workers": args.workers,
        "same_virtual_time": real["virtual_train_seconds"] == priced["virtual_train_seconds"],
        "real": real,
        "priced": priced,
        "wall_ratio_priced_over_real": priced["wall_s"] / real["wall_s"],
        "events_per_s_ratio_priced_over_real": priced["effects_per_s"] / real["effects_per_s"],
        "peak_rss_ratio_priced_over_real": priced["peak_rss_mb"] / real["peak_rss_mb"],
    }


def scale(args: argparse.Namespace) -> dict:
    """Priced math at each size, each in a fresh process (peak memory of its own)."""
    sizes = [int(s) for s in args.sizes.split(",")]
    rows: list[dict] = []
    for workers in sizes:
        examples = workers * args.steps * args.batch_size
        command = [sys.executable, __file__, "--one-mode", "priced", "--top-mlp", args.top_mlp]
        command += ["--examples", str(examples), "--workers", str(workers)]
        command += ["--servers", str(args.servers), "--batch-size", str(args.batch_size)]
        start = time.perf_counter()
        try:
            done = subprocess.run(
                command, capture_output=True, text=True, check=True, timeout=args.size_timeout
            )
        except subprocess.TimeoutExpired:
            rows.append(
                {"workers": workers, "examples": examples, "timed_out_s": args.size_timeout}
            )
            continue
        run = json.loads(done.stdout.strip().splitlines()[-1])
        run |= {"workers": workers, "examples": examples, "process_s": time.perf_counter() - start}
        rows.append(run)
    for before, after in zip(rows, rows[1:], strict=False):
        if "wall_s" in before and "wall_s" in after:
            after["wall_growth"] = after["wall_s"] / before["wall_s"]
            after["peak_rss_growth"] = after["peak_rss_mb"] / before["peak_rss_mb"]
            after["workers_growth"] = after["workers"] / before["workers"]
    return {"benchmark": "bench_sim --scale", "steps_a_worker": args.steps, "sizes": rows}


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
    parser.add_argument("--math-modes", action="store_true", help="the simulator in both modes")
    parser.add_argument("--one-mode", choices=("real", "priced"), help=argparse.SUPPRESS)
    parser.add_argument("--top-mlp", default="64,32", help="--math-modes: the top MLP's widths")
    parser.add_argument("--scale", action="store_true", help="priced math at growing sizes")
    parser.add_argument("--sizes", default="100,1000,10000", help="--scale: workers, by commas")
    parser.add_argument("--steps", type=int, default=100, help="--scale: batches a worker")
    parser.add_argument("--size-timeout", type=float, default=600.0, help="--scale: seconds")
    args = parser.parse_args()
    if args.one_mode:
        print(json.dumps(one_mode(args)))
        return
    if args.math_modes:
        print(json.dumps(math_modes(args), indent=1))
        return
    if args.scale:
        print(json.dumps(scale(args), indent=1))
        return
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
