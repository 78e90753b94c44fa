"""Liu & Zhao (AAAI 2021), asynchronous SGD at extreme scale, in the simulator.

Two reproductions share a compute-bound cluster and a small model (embedding dim 8, MLPs
64-32; 25 Gbit/s NICs; enough dense servers not to saturate):

- staleness vs workers ("staleness ... scales linearly with workers"): `async` with n
  workers (n trainers of one worker thread) for SCALING_STEPS_PER_WORKER steps each; a
  gradient's dense staleness is the number of updates its dense block received between the
  worker's pull and the gradient's apply; the mean over the run is fitted against n.

Staleness normalization (Fig. 5, 6) is `staleness_norm`.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np

from experiments.repro import reviewer
from experiments.repro.claims import BUILT_IN, Claim, Effect
from experiments.repro.registry import Progress, reproduction
from experiments.repro.verdict import Verdict, judge
from recsync.app.runs.plots import new_figure, save_figure
from recsync.coordinator.spec import ClusterSpec, JobSpec, plan_for
from recsync.data.synthetic import SyntheticSpec
from recsync.families.gradient.asynchronous import AsyncConfig
from recsync.model.spec import ModelSpec, default_tables
from recsync.optim.train_spec import TrainSpec
from recsync.runtime.sim.cost import CostModel
from recsync.runtime.sim.job import SimJob

SCALING_WORKERS = (10, 20, 50, 100, 200, 500, 1000)
SCALING_STEPS_PER_WORKER = 12
BATCH_SIZE = 32
EMBEDDING_SERVERS = 8
DENSE_SERVERS = 8
# a worker needs ~20 ms for a step's dense math (0.2 MFLOP per example, 32 examples, at
# 0.33 GFLOP/s: one slow core), messages are 25 Gbit/s with 50 us latency, speeds spread by
# 20% (log-normal) and each batch's time by 10%: the spread shuffles the order of pushes.
CLUSTER_COST = CostModel(
    worker_flops=3.25e8,
    speed_spread=0.2,
    batch_noise=0.1,
    latency_s=5.0e-5,
    bandwidth_bytes_s=25e9 / 8,
    request_s=2.0e-5,
    row_s=5.0e-9,
    element_s=2.0e-10,
    reader_batch_s=1.0e-6,
)


def small_model() -> ModelSpec:
    return ModelSpec(
        tables=default_tables(num_rows=100, dim=8), bottom_mlp=(64, 32), top_mlp=(64, 32)
    )


def run_scaling_point(workers: int, seed: int = 0) -> dict[str, Any]:
    examples = workers * SCALING_STEPS_PER_WORKER * BATCH_SIZE
    synthetic = dataclasses.replace(SyntheticSpec(), num_train=examples, num_test=2_000)
    spec = JobSpec(
        small_model(),
        TrainSpec(batch_size=BATCH_SIZE, seed=seed),
        ClusterSpec(workers, 1, EMBEDDING_SERVERS, num_dense_servers=DENSE_SERVERS),
        AsyncConfig(),
        synthetic,
    )
    summary = SimJob(spec, plan_for(spec), CLUSTER_COST).run()
    dense, sparse = summary["dense_staleness"], summary["sparse_staleness"]
    return {
        "workers": workers,
        "examples": examples,
        "mean_staleness": dense["mean"],
        "max_staleness": dense["max"],
        "histogram": dense["histogram"],
        "mean_row_staleness": sparse["mean"],
        "virtual_seconds": summary["train_seconds"],
        "test_auc": summary["test_auc"],
    }


def linear_fit(x: list[float], y: list[float]) -> dict[str, float]:
    """Least-squares y = slope x + intercept and its coefficient of determination R^2."""
    slope, intercept = np.polyfit(np.asarray(x, float), np.asarray(y, float), 1)
    predicted = slope * np.asarray(x, float) + intercept
    residual = float(np.sum((np.asarray(y) - predicted) ** 2))
    total = float(np.sum((np.asarray(y) - np.mean(y)) ** 2))
    return {"slope": float(slope), "intercept": float(intercept), "r2": 1.0 - residual / total}


def _staleness_point(p: dict[str, Any]) -> str:
    return (
        f"{p['workers']:>5} workers: mean staleness {p['mean_staleness']:8.2f}, "
        f"max {p['max_staleness']}"
    )


@reproduction(
    "async-staleness",
    paper="Async SGD at extreme scale (Liu & Zhao 2021)",
    claim="mean staleness grows linearly with workers (10 ... 1,000)",
    report_dir="reports/async_staleness",
    minutes=2.0,
    seeds=(0,),
    cost={"cluster": CLUSTER_COST},
    show=_staleness_point,
)
def reproduce_staleness(
    out_dir: Path, progress: Progress | None = None, workers: tuple[int, ...] = SCALING_WORKERS
) -> dict[str, Any]:
    out_dir.mkdir(parents=True, exist_ok=True)
    points = []
    for n in workers:
        points.append(run_scaling_point(n))
        if progress:
            progress(points[-1])
    fit = linear_fit([p["workers"] for p in points], [p["mean_staleness"] for p in points])
    if progress:
        progress(
            f"fit: staleness = {fit['slope']:.4f} n {fit['intercept']:+.2f}, R^2 = {fit['r2']:.4f}"
        )
    result = {"points": points, "fit": fit}
    (out_dir / "points.json").write_text(json.dumps(result, indent=1))
    _plot_staleness(points, fit, out_dir / "staleness_vs_workers.png")
    (out_dir / "report.md").write_text(_staleness_report(points, fit))
    return result


def _plot_staleness(points: list[dict[str, Any]], fit: dict[str, float], path: Path) -> None:
    fig, (left, right) = new_figure(11, 4, columns=2)
    n = np.array([p["workers"] for p in points], float)
    left.plot(n, [p["mean_staleness"] for p in points], "o", label="mean dense staleness")
    left.plot(
        n,
        fit["slope"] * n + fit["intercept"],
        "-",
        label=f"fit {fit['slope']:.3f} n {fit['intercept']:+.1f} (R^2 {fit['r2']:.4f})",
    )
    left.set_xlabel("workers n")
    left.set_ylabel("staleness (updates between pull and apply)")
    left.set_title("async: mean staleness vs workers")
    left.grid(alpha=0.3)
    left.legend()
    for p in points:
        hist = {int(k): v for k, v in p["histogram"].items()}
        taus = np.array(sorted(hist), float)
        counts = np.array([hist[int(t)] for t in taus], float)
        edges = np.linspace(0.0, 2.5, 51)
        density, _ = np.histogram(taus / p["workers"], bins=edges, weights=counts, density=True)
        right.plot(edges[:-1], density, drawstyle="steps-post", label=f"n={p['workers']}")
    right.set_xlabel("staleness / n")
    right.set_ylabel("density")
    right.set_title("staleness histogram per n, scaled by n")
    right.grid(alpha=0.3)
    right.legend(fontsize=8)
    save_figure(fig, path)


def staleness_verdict(fit: dict[str, float]) -> Verdict:
    """The claim "staleness grows with the workers": the fitted slope above 0 (one seed:
    too few seeds, with the margin shown). The fit's R^2 says how linear the growth is."""
    return judge([fit["slope"]], 0.0, "higher")


def claims(results: dict[str, Any]) -> list[Claim]:
    """The report's headline claim, from its results file (points.json)."""
    points, fit = results["points"], results["fit"]
    workers = [p["workers"] for p in points]
    return [
        Claim(
            "staleness grows linearly with the number of asynchronous workers",
            "analysis: each of the other n-1 workers pushes about once per step",
            f"async, {min(workers):,} to {max(workers):,} workers ({len(workers)} counts): "
            f"mean staleness = {fit['slope']:.3f} n {fit['intercept']:+.2f}, R^2 "
            f"{fit['r2']:.4f} (one seed)",
            staleness_verdict(fit),
            "async",
            effect=Effect.of(fit["slope"], "staleness a worker (fitted slope)", "higher", digits=3),
            evidence=BUILT_IN,
            mechanism="with n workers of one mean step time, the simulated pushes put about n - 1 "
            "others' updates between a worker's pull and its apply",
        )
    ]


def _staleness_report(points: list[dict[str, Any]], fit: dict[str, float]) -> str:
    lines = [
        "# Staleness vs number of workers (async SGD, simulator)",
        "",
        f"`async` with n workers (one worker thread per trainer), {EMBEDDING_SERVERS} embedding "
        f"servers, {DENSE_SERVERS} dense servers, small model (dim 8, MLPs 64-32), batch "
        f"{BATCH_SIZE}, {SCALING_STEPS_PER_WORKER} steps per worker, the real math in virtual "
        "time. "
        f"Cost model: `{CLUSTER_COST}`.",
        "",
        "The staleness of a dense gradient is the number of updates its block received between "
        "the worker's pull and the gradient's apply (the server's version difference). The "
        "async-SGD paper's analysis says it grows linearly with n (each of the other n-1 "
        "workers pushes about once while one worker computes).",
        "",
        f"Least-squares fit: mean staleness = {fit['slope']:.4f} n {fit['intercept']:+.2f}, "
        f"R^2 = {fit['r2']:.4f}. Staleness grows with n (the slope above 0): "
        f"{staleness_verdict(fit).describe()}.",
        "",
        "![staleness vs workers](staleness_vs_workers.png)",
        "",
        "| workers | examples | mean dense staleness | max | mean row staleness | virtual s |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for p in points:
        lines.append(
            f"| {p['workers']} | {p['examples']:,} | {p['mean_staleness']:.2f} | "
            f"{p['max_staleness']} | {p['mean_row_staleness']:.2f} | "
            f"{p['virtual_seconds']:.3f} |"
        )
    return reviewer.appended("\n".join(lines), "async-staleness")
