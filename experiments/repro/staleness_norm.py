"""Liu & Zhao (AAAI 2021), Fig. 5 and Fig. 6, in the simulator at 400 and 1,200 workers
(the paper's 1K and 3K, scaled by 0.4: see the cut below).

Fig. 5: async on the large cluster, no normalization vs the 1/tau rule of Zhang et al. (2016)
vs rho (eq. 7, kappa = 2) on the normalized staleness tau' = delta'(tau - mu)/delta + mu',
where (mu', delta') are the small cluster's staleness mean and standard deviation and (mu,
delta) the large cluster's, measured on the un-normalized runs of the same seed; the small
cluster's AUC is "what we expected". Fig. 6: data normalization (alpha x / E[x] - beta after
each hidden layer) on top of the staleness normalization, on both clusters.

Every run trains the same examples (TOTAL_STEPS updates of BATCH_SIZE), so a large-cluster
worker makes a third of a small-cluster worker's steps (240 and 80, as the 1K/3K setting
before the cut). The learning rates are tuned on the same grid (LR_FACTORS times the default
dense and sparse Adagrad rates), seed 0, over a quarter of the examples, once on each
un-normalized baseline: the small one's best is frozen for every run but the large
un-normalized baseline, which runs at its own best (issue 55: the no-normalization baseline
retuned, not left at a rate tuned for a fresher cluster). Every quality point (7 labels) runs
SEEDS (3); verdicts by `verdict.judge`, paired by seed. The workers' speeds spread by 5% and
each batch's time by 5%, which puts the staleness spread near the paper's (sd/mean 7.9% at 1K,
5.1% at 3K).

The cut (issue 55 asks for at most about 90 minutes on one core): at 1K and 3K workers with
240,000 updates a run, the plan (8 tuning runs of a quarter, 21 runs) is 5.5M simulated
updates, about 190 minutes of one core at 2.05 ms an update (the last full run: 37 minutes on
two processes, 1.08M updates on each). The simulator's cost is per update, not per worker
(on the shared, loaded machine 24,000 updates took 141 s of one core at 1,000 workers and 154
s at 3,000, about 6 ms an update there), so both clusters shrink by one factor (0.4) and so
does every run (96,000 updates), keeping each worker's steps, the 3:1 ratio of the clusters,
the staleness against the run's length and every label on 3 seeds: 2.2M updates, about 75
minutes of one core (MINUTES on two processes). What the cut gives up: the paper's absolute
worker counts; the staleness is compared with the paper's as the mean over the workers and
sd / mean.
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Any

from experiments.repro import async_at_scale
from experiments.repro.common import run_in_processes
from experiments.repro.registry import Progress, reproduction
from experiments.repro.staleness_norm_report import Labels, size_name, write_report
from recsync.coordinator.spec import ClusterSpec, JobSpec, plan_for
from recsync.data.synthetic import SyntheticSpec
from recsync.families.gradient.asynchronous import AsyncConfig
from recsync.model.spec import ModelSpec, default_tables
from recsync.optim.dense import DenseOptimizerSpec
from recsync.optim.rowwise import RowOptimizerSpec
from recsync.optim.train_spec import TrainSpec
from recsync.runtime.sim.job import SimJob
from recsync.strategy.staleness_norm import StalenessNorm

SMALL, LARGE = 400, 1_200  # workers (the paper's 1K and 3K, x0.4)
TOTAL_STEPS = 96_000  # updates per run: 240 per worker on the small cluster, 80 on the large
BATCH_SIZE = 64
NUM_TABLES, TABLE_ROWS, DIM = 8, 10_000, 8  # Zipf(1.05) ids: a long tail of rare rows
TUNING_FRACTION = 4  # tuning runs train 1/4 of the examples
TUNING_STEPS = TOTAL_STEPS // TUNING_FRACTION
LR_FACTORS = (0.0625, 0.125, 0.25, 0.5)
EVAL_POINTS = 10
SEEDS = (0, 1, 2)
FIG6_CLUSTERS = (SMALL, LARGE)  # where data normalization is tried over rho
LABELS = Labels(SMALL, LARGE)
# 2.2M updates at 2.05 ms (one core each), on two processes: tuning 3.3 min, the baselines
# 9.8, the normalized runs 26 (see the docstring)
MINUTES = 39.0
TEST_EXAMPLES = 20_000
PAPER: dict[str, Any] = {
    "staleness": {"1000": (875.0, 4770.0), "3000": (2090.0, 11300.0)},  # mean, variance
    "steps_per_worker": 12_000_000 // 3_000,
    "batch": 580,
    "fig6_gain": {"1000": "about +1% (0.75 -> 0.76)", "3000": "about +2% (0.74 -> 0.76)"},
}
# one dense and one embedding server (each step is 4 messages: the simulator's wall time is
# the real math); a worker's step takes ~0.2 s, so 3K workers would keep the dense server ~40%
# busy (1,200: ~16%)
NORM_COST = dataclasses.replace(
    async_at_scale.CLUSTER_COST, worker_flops=2.0e7, speed_spread=0.05, batch_noise=0.05
)


@dataclasses.dataclass(frozen=True)
class NormRun:
    """One simulated run: its label, cluster size, staleness rule, data normalization."""

    label: str
    workers: int
    norm: StalenessNorm | None = None
    data_norm: bool = False
    lr_factor: float = 1.0
    steps: int = TOTAL_STEPS
    seed: int = 0


def model(data_norm: bool) -> ModelSpec:
    return ModelSpec(
        tables=default_tables(NUM_TABLES, TABLE_ROWS, DIM),
        bottom_mlp=(64, 32),
        top_mlp=(64, 32),
        data_norm=data_norm,
    )


def train_spec(lr_factor: float, seed: int = 0) -> TrainSpec:
    dense, sparse = DenseOptimizerSpec(), RowOptimizerSpec()
    return TrainSpec(
        batch_size=BATCH_SIZE,
        seed=seed,
        dense_optimizer=dataclasses.replace(dense, lr=dense.lr * lr_factor),
        sparse_optimizer=dataclasses.replace(sparse, lr=sparse.lr * lr_factor),
    )


def steady_moments(histogram: dict[int, int], workers: int) -> dict[str, float]:
    """Mean, variance and standard deviation of the staleness once every worker has pushed:
    the lowest `workers` counts (each worker's first push finds fewer updates before it than
    later ones) are left out."""
    skip, total, weight, square = workers, 0.0, 0, 0.0
    for tau in sorted(histogram):
        count = histogram[tau]
        dropped = min(skip, count)
        skip, count = skip - dropped, count - dropped
        total += tau * count
        square += tau * tau * count
        weight += count
    assert weight > 0, "a run too short to leave any steady-state update"
    mean = total / weight
    variance = max(0.0, square / weight - mean * mean)
    return {"mean": mean, "variance": variance, "std": variance**0.5, "updates": weight}


def run_one(run: NormRun) -> dict[str, Any]:
    examples = run.steps * BATCH_SIZE
    synthetic = dataclasses.replace(
        SyntheticSpec(),
        num_train=examples,
        num_test=TEST_EXAMPLES,
        table_rows=(TABLE_ROWS,) * NUM_TABLES,
    )
    spec = JobSpec(
        model(run.data_norm),
        train_spec(run.lr_factor, run.seed),
        ClusterSpec(run.workers, 1, 1, num_dense_servers=1),
        AsyncConfig(staleness_norm=run.norm),
        synthetic,
    )
    sim = SimJob(spec, plan_for(spec), NORM_COST, eval_every=examples // EVAL_POINTS)
    summary = sim.run()
    dense = summary["dense_staleness"]
    histogram = {int(k): int(v) for k, v in dense["histogram"].items()}
    return {
        "label": run.label,
        "seed": run.seed,
        "workers": run.workers,
        "norm": run.norm.describe() if run.norm else "none",
        "data_norm": run.data_norm,
        "lr_factor": run.lr_factor,
        "examples": examples,
        "steps_per_worker": run.steps // run.workers,
        "final_auc": summary["test_auc"],
        "final_logloss": summary["test_logloss"],
        "teacher_auc": summary["teacher_auc"],
        "curve": sim.curve,
        "raw_staleness": {"mean": dense["mean"], "max": dense["max"]},
        "staleness": steady_moments(histogram, run.workers),
    }


def rho_on(small: dict[str, Any], large: dict[str, Any] | None) -> StalenessNorm:
    """Eq. 7 with mu' the small cluster's mean; for the large cluster on tau'."""
    target = small["staleness"]
    if large is None:
        return StalenessNorm(mu_prime=target["mean"], kappa=2.0)
    source = large["staleness"]
    return StalenessNorm(
        mu_prime=target["mean"],
        kappa=2.0,
        source_mean=source["mean"],
        source_std=source["std"],
        target_std=target["std"],
    )


def _norm_run(r: dict[str, Any]) -> str:
    s = r["staleness"]
    return (
        f"{r['label']:>30} (lr x{r['lr_factor']:g}): AUC {r['final_auc']:.4f}, "
        f"staleness mean {s['mean']:.0f} sd {s['std']:.0f}"
    )


def best_factor(tuning: list[dict[str, Any]], workers: int) -> float:
    """The grid's factor with the highest final AUC at `workers` (a diverged run's NaN
    counts as lowest)."""
    rows = [r for r in tuning if r["workers"] == workers]
    best = max(rows, key=lambda r: -1.0 if math.isnan(r["final_auc"]) else r["final_auc"])
    return float(best["lr_factor"])


def tuning_runs() -> list[NormRun]:
    """The grid at both cluster sizes, un-normalized, seed 0, a quarter of the examples."""
    return [
        NormRun(f"tuning {size_name(workers)} x{f:g}", workers, lr_factor=f, steps=TUNING_STEPS)
        for workers in (SMALL, LARGE)
        for f in LR_FACTORS
    ]


def baseline_runs(lr: float, lr_large: float) -> list[NormRun]:
    """The un-normalized runs at both sizes, each at its own tuned rate, every seed."""
    return [
        run
        for seed in SEEDS
        for run in (
            NormRun(LABELS.base_small, SMALL, lr_factor=lr, steps=TOTAL_STEPS, seed=seed),
            NormRun(LABELS.base_large, LARGE, lr_factor=lr_large, steps=TOTAL_STEPS, seed=seed),
        )
    ]


def normalized_runs(lr: float, small: dict[str, Any], large: dict[str, Any]) -> list[NormRun]:
    """One seed's normalized runs at the small baseline's rate, rho read off that seed's
    un-normalized runs `small` and `large`."""
    small_rho, large_rho = rho_on(small, None), rho_on(small, large)
    at: dict[str, Any] = {"lr_factor": lr, "steps": TOTAL_STEPS, "seed": small["seed"]}
    runs = [
        NormRun(LABELS.inverse, LARGE, StalenessNorm("inverse"), **at),
        NormRun(LABELS.rho_large, LARGE, large_rho, **at),
        NormRun(LABELS.rho_large_data, LARGE, large_rho, data_norm=True, **at),
    ]
    if SMALL in FIG6_CLUSTERS:
        runs += [
            NormRun(LABELS.rho_small, SMALL, small_rho, **at),
            NormRun(LABELS.rho_small_data, SMALL, small_rho, data_norm=True, **at),
        ]
    return runs


@reproduction(
    "staleness-norm",
    paper="Async SGD at extreme scale (Liu & Zhao 2021)",
    claim="Fig. 5, 6: async at 1K and 3K workers (scaled to 400 and 1,200), no normalization "
    "vs 1/tau vs rho on the normalized staleness; data normalization over rho",
    report_dir="reports/staleness_norm",
    minutes=MINUTES,
    seeds=SEEDS,
    cost={"cluster": NORM_COST},
    show=_norm_run,
)
def reproduce(out_dir: Path, progress: Progress | None = None) -> dict[str, Any]:
    out_dir.mkdir(parents=True, exist_ok=True)
    tuning = run_in_processes(run_one, tuning_runs(), progress)
    lr, lr_large = best_factor(tuning, SMALL), best_factor(tuning, LARGE)
    bases = run_in_processes(run_one, baseline_runs(lr, lr_large), progress)
    small = {r["seed"]: r for r in bases if r["workers"] == SMALL}
    large = {r["seed"]: r for r in bases if r["workers"] == LARGE}
    runs = run_in_processes(
        run_one,
        [run for seed in SEEDS for run in normalized_runs(lr, small[seed], large[seed])],
        progress,
    )
    result = {
        "lr_factor": lr,
        "lr_factor_large": lr_large,
        "seeds": list(SEEDS),
        "tuning": [
            {k: r[k] for k in ("workers", "lr_factor", "final_auc", "final_logloss")}
            for r in tuning
        ],
        "runs": [*bases, *runs],
        "paper": PAPER,
        "setting": {
            "total_steps": TOTAL_STEPS,
            "batch_size": BATCH_SIZE,
            "tables": f"{NUM_TABLES} x {TABLE_ROWS} rows, dim {DIM}",
            "cost": str(NORM_COST),
        },
    }
    (out_dir / "results.json").write_text(json.dumps(result, indent=1))
    write_report(result, out_dir)
    return result
