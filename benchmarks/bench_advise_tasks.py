"""`recsync advise` with its points run as Ray tasks: wall seconds of the same advice in
this process, on a local Ray of 1 core and on one of 2 (each run into a fresh folder, so
every point is measured), medians of `--repeats`; prints JSON with the ratios against the
in-process run and 2 cores against 1. The job is the embedded default; the cluster file
and the strategies are options (defaults: examples/cluster-dev-2core.toml, three
strategies, small slices so that a repeat takes a minute or two)."""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import ray
import torch

from recsync.app.advise.advice import AdviseOptions, advise
from recsync.app.advise.candidates import JobSource
from recsync.app.advise.cluster import load_cluster
from recsync.app.advise.report import advice_rows
from recsync.runtime.ray.tasks import TaskPool

ROOT = Path(__file__).resolve().parent.parent


def one_run(options: AdviseOptions, cluster_file: Path, cores: int | None) -> tuple[float, list]:
    job, cluster = JobSource(None, {}), load_cluster(cluster_file)
    pool = None if cores is None else TaskPool("local", num_cpus=cores)
    try:
        with tempfile.TemporaryDirectory() as folder:
            start = time.perf_counter()
            advice = advise(job, cluster, options, Path(folder), runner=pool)
            seconds = time.perf_counter() - start
    finally:
        if pool is not None:
            pool.close()
    return seconds, advice_rows(advice)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cluster", type=Path, default=ROOT / "examples/cluster-dev-2core.toml")
    parser.add_argument("--strategies", default="async,easgd,sync")
    parser.add_argument("--slice", type=int, default=4000)
    parser.add_argument("--sample", type=int, default=4000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    torch.set_num_threads(1)
    options = AdviseOptions(
        strategies=args.strategies.split(","),
        slice_examples=args.slice,
        quality_examples=args.sample,
        quality_test_examples=1000,
        seeds=(0, 1),
    )
    ways = {"in_process": None, "ray_1_core": 1, "ray_2_cores": 2}
    seconds: dict[str, list[float]] = {name: [] for name in ways}
    rows: dict[str, list] = {}
    for _ in range(args.repeats):
        for name, cores in ways.items():  # interleaved: each repeat sees the same machine
            assert not ray.is_initialized()
            took, rows[name] = one_run(options, args.cluster, cores)
            seconds[name].append(took)
    medians = {name: statistics.median(values) for name, values in seconds.items()}
    record = {
        "benchmark": "bench_advise_tasks",
        "strategies": options.strategies,
        "candidates": len(rows["in_process"]),
        "seconds": seconds,
        "median_s": medians,
        "same_advice": rows["ray_1_core"] == rows["in_process"] == rows["ray_2_cores"],
        "ratio_2_cores_over_1": medians["ray_2_cores"] / medians["ray_1_core"],
        "ratio_2_cores_over_in_process": medians["ray_2_cores"] / medians["in_process"],
    }
    text = json.dumps(record, indent=1)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
