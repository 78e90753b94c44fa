"""Liu & Zhao (AAAI 2021), Fig. 5 and Fig. 6, in the simulator at 1,000 and 3,000 workers.

Fig. 5: async with 3K workers, no normalization vs the 1/tau rule of Zhang et al. (2016) vs
rho (eq. 7, kappa = 2) on the normalized staleness tau' = delta'(tau - mu)/delta + mu', where
(mu', delta') are the 1K cluster's staleness mean and standard deviation and (mu, delta) the 3K
cluster's, measured on the un-normalized runs; the 1K cluster's AUC is "what we expected".
Fig. 6: data normalization (alpha x / E[x] - beta after each hidden layer) on top of the
staleness normalization, at 1K and 3K workers.

Every run trains the same examples (TOTAL_STEPS updates of BATCH_SIZE), so a 3K worker makes
a third of a 1K worker's steps. The learning rates are tuned once, on the 1K un-normalized
baseline over a quarter of the examples (LR_FACTORS times the default dense and sparse
Adagrad rates), then frozen for every run. The workers' speeds spread by 5% and each batch's
time by 5%, which puts the staleness spread near the paper's (sd/mean 7.9% at 1K, 5.1% at 3K).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from experiments.repro import async_at_scale
from experiments.repro.common import run_in_processes
from experiments.repro.registry import Progress, reproduction
from experiments.repro.staleness_norm_report import write_report
from recsync.coordinator.spec import ClusterSpec, JobSpec, plan_for
from recsync.data.synthetic import SyntheticSpec
from recsync.families.gradient.asynchronous import AsyncConfig
from recsync.model.spec import ModelSpec, default_tables
from recsync.optim.dense import DenseOptimizerSpec
from recsync.optim.rowwise import RowOptimizerSpec
from recsync.optim.train_spec import TrainSpec
from recsync.runtime.sim.job import SimJob
from recsync.sync.staleness_norm import StalenessNorm

SMALL, LARGE = 1_000, 3_000  # workers
TOTAL_STEPS = 240_000  # updates per run: 240 per worker at 1K, 80 at 3K
BATCH_SIZE = 64
NUM_TABLES, TABLE_ROWS, DIM = 8, 10_000, 8  # Zipf(1.05) ids: a long tail of rare rows
TUNING_FRACTION = 4  # tuning runs train 1/4 of the examples
LR_FACTORS = (0.0625, 0.125, 0.25, 0.5)
EVAL_POINTS = 10
TEST_EXAMPLES = 20_000
PAPER: dict[str, Any] = {
    "staleness": {"1000": (875.0, 4770.0), "3000": (2090.0, 11300.0)},  # mean, variance
    "steps_per_worker": 12_000_000 // LARGE,
    "batch": 580,
    "fig6_gain": {"1000": "about +1% (0.75 -> 0.76)", "3000": "about +2% (0.74 -> 0.76)"},
}
# one dense and one embedding server (each step is 4 messages: the simulator's wall time is
# the real math); a worker's step takes ~0.2 s, so 3K workers keep the dense server ~40% busy
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


def model(data_norm: bool) -> ModelSpec:
    return ModelSpec(
        tables=default_tables(NUM_TABLES, TABLE_ROWS, DIM),
        bottom_mlp=(64, 32),
        top_mlp=(64, 32),
        data_norm=data_norm,
    )


def train_spec(lr_factor: float) -> TrainSpec:
    dense, sparse = DenseOptimizerSpec(), RowOptimizerSpec()
    return TrainSpec(
        batch_size=BATCH_SIZE,
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
        train_spec(run.lr_factor),
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


@reproduction(
    "staleness-norm",
    paper="Async SGD at extreme scale (Liu & Zhao 2021)",
    claim="Fig. 5, 6: async at 1K and 3K workers, no normalization vs 1/tau vs rho on the "
    "normalized staleness; data normalization over rho",
    report_dir="reports/staleness_norm",
    minutes=37.0,
    seeds=(0,),
    cost={"cluster": NORM_COST},
    show=_norm_run,
)
def reproduce(out_dir: Path, progress: Progress | None = None) -> dict[str, Any]:
    out_dir.mkdir(parents=True, exist_ok=True)
    tuning = run_in_processes(
        run_one,
        [
            NormRun(f"tuning x{f:g}", SMALL, lr_factor=f, steps=TOTAL_STEPS // TUNING_FRACTION)
            for f in LR_FACTORS
        ],
        progress,
    )
    lr = max(tuning, key=lambda r: r["final_auc"])["lr_factor"]
    base_small, base_large = run_in_processes(
        run_one,
        [
            NormRun("1K, no normalization", SMALL, lr_factor=lr),
            NormRun("3K, no normalization", LARGE, lr_factor=lr),
        ],
        progress,
    )
    small_rho, large_rho = rho_on(base_small, None), rho_on(base_small, base_large)
    runs = run_in_processes(
        run_one,
        [
            NormRun(
                "3K, 1/tau (Zhang et al. 2016)",
                LARGE,
                StalenessNorm("inverse"),
                lr_factor=lr,
            ),
            NormRun("3K, rho on tau'", LARGE, large_rho, lr_factor=lr),
            NormRun("1K, rho", SMALL, small_rho, lr_factor=lr),
            NormRun(
                "1K, rho + data norm",
                SMALL,
                small_rho,
                data_norm=True,
                lr_factor=lr,
            ),
            NormRun(
                "3K, rho on tau' + data norm",
                LARGE,
                large_rho,
                data_norm=True,
                lr_factor=lr,
            ),
        ],
        progress,
    )
    result = {
        "lr_factor": lr,
        "tuning": [{k: r[k] for k in ("lr_factor", "final_auc", "final_logloss")} for r in tuning],
        "runs": [base_small, base_large, *runs],
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
