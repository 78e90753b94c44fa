"""How the Ray engine's EPS scales with trainers, workers and embedding servers, beside
the simulator's prediction for the same jobs (calibrated on this machine, in this run).

Grid (each point capped by --num-cpus, oversubscribed points on a small machine included):
  - S-EASGD and async over trainers in {1, 2, 4, 6, 8}, `--threads` workers each;
  - S-EASGD at `--server-trainers` trainers over embedding servers in {1, 2, 4, 8};
  - S-EASGD at 1 trainer over workers in {1, 2, 4, 8}: as processes of their own (the
    default, group "workers") and as threads of one process (group "threads").
Every group but "threads" runs the default: a trainer's workers in processes of their own
where the cluster has a CPU per worker, else threads (each point's `worker_processes`).
Trainer points use max(2, trainers) embedding servers, max(1, trainers // 4) sync servers
(S-EASGD) and max(1, trainers // 2) dense servers (async). Every point trains
`--examples-per-worker` x its workers examples (at least `--min-examples`), and each fit job
`--fit-examples`: on 2 cores runs of 4-8 s, since a run's first steps and its
last (connections opening, the reader's producer filling its pipe, workers ending apart)
cost the engine's EPS a share the simulator does not model (0-7% in runs of 3-6 s: see
docs/perf-log.md).

Prints one JSON line per point (real and simulated EPS, each the steady rate `eps_steady`,
docs/simulator.md "Examples per second"; the simulator's error, the engine's
CPU per example by role from its first run beside the CPU the simulator charged), then one
JSON object: `max_sim_error` over the grid (the "threads" group apart: the simulator models
no interpreter lock), the scaling efficiencies EPS(n) / (n x EPS(1)) and
the ratios the scaling targets name. The simulator is calibrated first as `recsync calibrate`
does (app/runs/calibrate.py): the math measured alone, a call's CPU at both ends, the
worker speed, a byte's CPU at both ends and a batch's at the reader's producer as the
engine spent them on three jobs outside the grid (each the median of `--repeats` runs). A
point's EPS is the median of `--repeats` runs made in rounds over the grid (each round runs
every point once), so a slow spell of the shared machine does not take all of one point's
runs. Every engine row also carries the CPU its nodes' own threads spent, by kind
(`thread_cpu_us_per_example`; the reader's producer under `helper_processes`).

The simulator is deterministic, so its side can run on another machine: `--engine-only`
prints the engine's figures (calibration's and each point's) as JSON lines, and
`--simulate FILE` reads such a file and prints what a whole run would have (the
simulator's side for the machine that ran the engine: its `num_cpus` shared cores).
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import os
import statistics
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import ray

from recsync.app.runs.calibrate import cost_from, cpu_per_example, engine_figures, simulated
from recsync.coordinator.spec import ClusterSpec, JobSpec
from recsync.data.synthetic import SyntheticSpec
from recsync.families import strategy_config
from recsync.model.spec import ModelSpec
from recsync.optim.train_spec import TrainSpec
from recsync.runtime.ray.job import connect, run_job
from recsync.runtime.sim.cost import CostModel

TRAINERS = (1, 2, 4, 6, 8)
THREADS = (1, 2, 4, 8)
SERVERS = (1, 2, 4, 8)


@dataclasses.dataclass(frozen=True)
class Point:
    """One job of the grid."""

    group: str  # which sweep it belongs to: trainers, workers, threads or servers
    strategy: str
    trainers: int
    threads: int  # workers per trainer
    embedding_servers: int

    @property
    def processes(self) -> bool | None:
        """Workers as threads (False), or as the default decides (None)."""
        return False if self.group == "threads" else None

    @property
    def dense_servers(self) -> int:
        """EASGD's sync servers (a quarter of the trainers), async's dense servers (half)."""
        share = 4 if self.strategy == "easgd" else 2
        return max(1, self.trainers // share)

    def spec(self, examples: int) -> JobSpec:
        cluster = ClusterSpec(
            self.trainers,
            self.threads,
            self.embedding_servers,
            num_dense_servers=self.dense_servers,
            worker_processes=self.processes,
        )
        synthetic = dataclasses.replace(SyntheticSpec(), num_train=examples, num_test=2_000)
        return JobSpec(ModelSpec(), TrainSpec(), cluster, strategy_config(self.strategy), synthetic)


def grid(num_cpus: int, threads: int, server_trainers: int) -> list[Point]:
    """The points this machine runs: trainers up to max(num_cpus // 2, 4), workers up to
    max(num_cpus // 2, 2) (on 2 cores: 4 trainers and 2 workers, both oversubscribed)."""
    max_trainers, max_threads = max(num_cpus // 2, 4), max(num_cpus // 2, 2)
    points = [
        Point("trainers", strategy, n, threads, max(2, n))
        for strategy in ("easgd", "async")
        for n in TRAINERS
        if n <= max_trainers
    ]
    points += [Point("servers", "easgd", server_trainers, threads, s) for s in SERVERS]
    points += [
        Point(group, "easgd", 1, m, 2)
        for group in ("workers", "threads")
        for m in THREADS
        if m <= max_threads
    ]
    return points


def engine_row(point: Point, examples: int, real: list[dict[str, Any]]) -> dict[str, Any]:
    """The engine's figures on one point from its runs `real`: the median EPS, and the
    first run's calls a batch and CPU an example by role (and by kind of thread)."""
    return {
        **dataclasses.asdict(point),
        "examples": examples,
        "real_eps_steady": round(statistics.median(r["eps_steady"] for r in real)),
        "real_eps_steady_each": [round(r["eps_steady"]) for r in real],
        "worker_processes": real[0]["worker_processes"],
        "trainer_calls_per_batch": real[0]["calls_per_batch"].get("trainers", {}).get("total"),
        "cpu_us_per_example": cpu_per_example(real[0]),
        "thread_cpu_us_per_example": {
            role: {kind: round(s / real[0]["examples_trained"] * 1e6, 1) for kind, s in k.items()}
            for role, k in real[0].get("thread_cpu_seconds", {}).items()
        },
    }


def simulated_point(row: dict[str, Any], cost: CostModel) -> dict[str, Any]:
    """An engine point's row with the simulator's EPS, its error and the CPU it charged."""
    fields = {f.name for f in dataclasses.fields(Point)}
    point = Point(**{k: v for k, v in row.items() if k in fields})
    sim = simulated(point.spec(row["examples"]), cost)
    return {
        **row,
        "sim_eps_steady": round(sim["eps_steady"]),
        "sim_error": round(sim["eps_steady"] / row["real_eps_steady"] - 1.0, 3),
        "sim_cpu_us_per_example": cpu_per_example(sim),
    }


def efficiencies(rows: list[dict[str, Any]], group: str, key: str, strategy: str) -> dict:
    """EPS(n) / (n x EPS(1)) over the points of one sweep, by the swept count."""
    sweep = {
        r[key]: r["real_eps_steady"]
        for r in rows
        if r["group"] == group and r["strategy"] == strategy
    }
    base = sweep.get(1)
    if not base:
        return {}
    return {str(n): round(eps / (n * base), 3) for n, eps in sorted(sweep.items())}


def run_grid(args: argparse.Namespace, num_cpus: int) -> Iterator[dict[str, Any]]:
    """The engine's figures on each point of the grid `args` selects, in `repeats` rounds
    over the points (a slow spell of the shared machine spreads over all of them instead of
    taking every run of one), each point's row as its last run ends."""
    points = [
        point
        for point in grid(num_cpus, args.threads, args.server_trainers)
        if not args.only or point.group in args.only
    ]
    examples = {
        point: max(args.min_examples, args.examples_per_worker * point.trainers * point.threads)
        for point in points
    }
    runs: dict[Point, list[dict[str, Any]]] = {point: [] for point in points}
    for round_ in range(args.repeats):
        for point in points:
            runs[point].append(run_job(point.spec(examples[point])))
            if round_ == args.repeats - 1:
                yield engine_row(point, examples[point], runs[point])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--num-cpus", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--server-trainers", type=int, default=2)
    parser.add_argument("--examples-per-worker", type=int, default=45_000)
    parser.add_argument("--min-examples", type=int, default=120_000)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--fit-examples", type=int, default=180_000)
    parser.add_argument(
        "--only",
        nargs="+",
        choices=("trainers", "servers", "workers", "threads"),
        default=None,
        help="Run these groups of the grid only.",
    )
    parser.add_argument(
        "--engine-only", action="store_true", help="The engine's figures only (JSON lines)."
    )
    parser.add_argument(
        "--simulate", type=Path, default=None, help="The simulator's side of an --engine-only file."
    )
    args = parser.parse_args()

    started = time.perf_counter()
    num_cpus = args.num_cpus
    if args.simulate:
        lines = [json.loads(line) for line in args.simulate.read_text().splitlines() if line]
        figures, num_cpus = lines[0]["engine_figures"], lines[0]["num_cpus"]
        engine_rows: Iterable[dict[str, Any]] = [line for line in lines[1:] if "group" in line]
        for row in engine_rows:
            if "real_eps_steady" not in row:
                raise SystemExit(
                    f"{args.simulate}: point {row['group']} {row['strategy']} has no steady "
                    "examples/s (real_eps_steady): run --engine-only again"
                )
    else:
        connect(None, num_cpus)
        figures = engine_figures(args.fit_examples, repeats=args.repeats)
        engine_rows = run_grid(args, num_cpus)
    cost = None
    if args.engine_only:
        print(json.dumps({"engine_figures": figures, "num_cpus": num_cpus}), flush=True)
    else:
        cost, measured, fits = cost_from(figures, num_cpus)
        print(json.dumps({"calibration": measured, "fits": fits}), flush=True)
    rows = []
    for row in engine_rows:
        rows.append(simulated_point(row, cost) if cost else row)
        print(json.dumps(rows[-1]), flush=True)
    if not args.simulate:
        ray.shutdown()

    def eps(group: str, strategy: str, **match: int) -> float | None:
        found = [
            r["real_eps_steady"]
            for r in rows
            if r["group"] == group
            and r["strategy"] == strategy
            and all(r[k] == v for k, v in match.items())
        ]
        return found[0] if found else None

    def ratio(a: float | None, b: float | None) -> float | None:
        return round(a / b, 3) if a and b else None

    servers = [r["real_eps_steady"] for r in rows if r["group"] == "servers"]
    most_trainers = max((r["trainers"] for r in rows if r["group"] == "trainers"), default=None)
    print(
        json.dumps(
            {
                "benchmark": "scaling",
                "num_cpus": num_cpus,
                "seconds": round(time.perf_counter() - started),
                "max_sim_error": max(
                    (
                        abs(r["sim_error"])
                        for r in rows
                        if "sim_error" in r and r["group"] != "threads"
                    ),
                    default=None,
                ),
                "max_sim_error_threads": max(
                    (
                        abs(r["sim_error"])
                        for r in rows
                        if "sim_error" in r and r["group"] == "threads"
                    ),
                    default=None,
                ),
                "efficiency_easgd_trainers": efficiencies(rows, "trainers", "trainers", "easgd"),
                "efficiency_async_trainers": efficiencies(rows, "trainers", "trainers", "async"),
                "efficiency_workers": efficiencies(rows, "workers", "threads", "easgd"),
                "efficiency_threads": efficiencies(rows, "threads", "threads", "easgd"),
                "easgd_6_over_1": ratio(
                    eps("trainers", "easgd", trainers=6), eps("trainers", "easgd", trainers=1)
                ),
                "easgd_8_over_6": ratio(
                    eps("trainers", "easgd", trainers=8), eps("trainers", "easgd", trainers=6)
                ),
                "workers_8_over_1": ratio(
                    eps("workers", "easgd", threads=8), eps("workers", "easgd", threads=1)
                ),
                "threads_8_over_1": ratio(
                    eps("threads", "easgd", threads=8), eps("threads", "easgd", threads=1)
                ),
                "servers_worst_step": min(
                    (round(b / a, 3) for a, b in itertools.pairwise(servers)), default=None
                ),
                "async_over_easgd_at_most_trainers": ratio(
                    eps("trainers", "async", trainers=most_trainers or 0),
                    eps("trainers", "easgd", trainers=most_trainers or 0),
                ),
            }
        )
    )


if __name__ == "__main__":
    main()
