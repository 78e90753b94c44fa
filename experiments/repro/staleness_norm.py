"""Liu & Zhao (AAAI 2021), Fig. 5 and Fig. 6, in the simulator at 150 and 450 workers
(the paper's 1K and 3K, scaled by 0.15: see the cut below).

Fig. 5: async on the large cluster, no normalization vs the 1/tau rule of Zhang et al. (2016)
vs rho (eq. 7, kappa = 2) on the normalized staleness tau' = delta'(tau - mu)/delta + mu',
where (mu', delta') are the small cluster's staleness mean and standard deviation and (mu,
delta) the large cluster's, measured on the un-normalized runs of the same seed; the small
cluster's AUC is "what we expected". Fig. 6: data normalization (alpha x / E[x] - beta after
each hidden layer) on top of the staleness normalization, on both clusters.

Every run trains the same examples (TOTAL_STEPS updates of BATCH_SIZE), so a large-cluster
worker makes a third of a small-cluster worker's steps (240 and 80, as before the cut).
Every compared variant (no normalization at both sizes; 1/tau, rho and rho + data
normalization at the large size; rho and rho + data normalization at the small size) is
tuned on the same GRID of factors of the default dense and sparse Adagrad rates by
`settle.tune` (a best at an edge gets the next factor past it, up to 3 times), each point a
full-length run of seed 0 scored on a validation split (20,000 examples of the same teacher,
a stream apart from the test split the claims read); the chosen point is seed 0's run, and
seeds 1-4 run every variant at its own chosen factor (5 seeds, `settle.SEEDS`; verdicts by
`verdict.judge`, paired by seed). Tuning runs are full length, so no rate is carried from a
shorter run to a longer one. Every run records the test split's logloss EVAL_POINTS times;
the report states `settle.Flattening` (the loss improved by less than 0.5% of its final
value over the last quarter) for each run, and plots the curves. The workers' speeds spread
by 5% and each batch's time by 5%, which puts the staleness spread near the paper's (sd/mean
7.9% at 1K, 5.1% at 3K).

The cut. Before it (400 and 1,200 workers, 96,000 updates of 64 examples, tables of 10,000
rows, 3 seeds, two rates tuned on a quarter-length run) the reproduction took 98 minutes
on two processes and its runs had not flattened (the large cluster's held-out loss still
fell 1.4% over the last quarter). Five seeds and seven variants each tuned on a full-length
grid are about three times the runs, so the problem shrinks where the cost is: the
simulator's cost is per update (the math of a batch and four messages), not per worker, so
(1) both clusters shrink by one factor (x0.15 of the paper's: 150 and 450, the 3:1 ratio
and each worker's steps kept, 36,000 updates a run); (2) a batch carries 256 examples (the
paper's: about 580), four times the examples an update for about 1.5 times its cost; (3)
the tables shrink to 1,000 rows each (Zipf ids: a shorter tail of rare rows to learn), so
the held-out loss can settle within the run. What the cut gives up: the paper's absolute
worker counts (the staleness is compared with the paper's as the mean over the workers and
sd / mean) and the long tail of rare ids.

Cost, measured: a probe of this setting (9,000 updates, x0.5 the default rates, seed 0,
16 evaluations and the validation split) took 66.7 s of one core's CPU time at 150 workers
and 70.3 s at 450 on this machine while it was heavily loaded (7.4 and 7.8 ms an update,
its fixed costs included; a loaded machine is slower than an idle core, so the estimate
errs long): a run of 36,000 updates is about 4.6 minutes. The plan is 21 grid points,
about 7 extensions past an edge (1/tau's rate may sit far from the others'), and 28 runs
of seeds 1-4; on two processes, each round's odd run alone, that is about 29 runs' time,
135 minutes (MINUTES); if every variant extended its grid three times, 37 runs' time, 170
minutes. The length: the same probes' held-out loss improved 0.5% (150 workers) and 0.9%
(450) over their last quarter at a quarter of a run's length; the report says which full
runs flattened.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Hashable
from pathlib import Path
from typing import Any

from experiments.repro import async_at_scale, settle
from experiments.repro.common import run_in_processes
from experiments.repro.registry import Progress, reproduction
from experiments.repro.staleness_norm_report import write_report
from experiments.repro.staleness_norm_shape import Labels
from recsync.coordinator.outcome import evaluate_model
from recsync.coordinator.spec import ClusterSpec, JobSpec, plan_for
from recsync.data.synthetic import SyntheticSpec, SyntheticTask
from recsync.families.gradient.asynchronous import AsyncConfig
from recsync.model.spec import ModelSpec, default_tables
from recsync.optim.dense import DenseOptimizerSpec
from recsync.optim.rowwise import RowOptimizerSpec
from recsync.optim.train_spec import TrainSpec
from recsync.runtime.sim.job import SimJob
from recsync.strategy.staleness_norm import StalenessNorm

SMALL, LARGE = 150, 450  # workers (the paper's 1K and 3K, x0.15)
TOTAL_STEPS = 36_000  # updates per run: 240 per worker on the small cluster, 80 on the large
BATCH_SIZE = 256
NUM_TABLES, TABLE_ROWS, DIM = 8, 1_000, 8  # Zipf(1.05) ids: a tail of rare rows
# every variant on one grid of factors of the default Adagrad rates, extended past an edge
GRID = settle.Grid((0.25, 0.5, 1.0), step=2.0)
SEEDS = settle.SEEDS
TUNING_SEED = SEEDS[0]  # the tuning runs are this seed's full-length runs
EVAL_POINTS = 16  # held-out evaluations a run: the flattening window's start is one
FLATTENING = settle.Flattening()
FIG6_CLUSTERS = (SMALL, LARGE)  # where data normalization is tried over rho
LABELS = Labels(SMALL, LARGE)
# 29 runs' time on two processes (21 grid points, ~7 extensions, 28 runs of seeds 1-4, each
# round's odd run alone) x 4.6 minutes a run (see the docstring's cost)
MINUTES = 135.0
TEST_EXAMPLES = VALID_EXAMPLES = 20_000  # the test split; a validation split as large
PAPER: dict[str, Any] = {
    "staleness": {"1000": (875.0, 4770.0), "3000": (2090.0, 11300.0)},  # mean, variance
    "steps_per_worker": 12_000_000 // 3_000,
    "batch": 580,
    "fig6_gain": {"1000": "about +1% (0.75 -> 0.76)", "3000": "about +2% (0.74 -> 0.76)"},
}
# one dense and one embedding server (each step is 4 messages: the simulator's wall time is
# the real math); a worker's step takes ~0.2 s a batch of 64, so 3K workers would keep the
# dense server ~40% busy; at 256 examples a step is ~4x longer and 450 workers keep it a few
# per cent busy
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
    state = sim.final_state
    assert state is not None
    valid, _ = SyntheticTask(synthetic).day_test_set(0, VALID_EXAMPLES)
    validation = evaluate_model(spec, sim.plan.embeddings.layout, state.dense, state.shards, valid)
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
        "valid_auc": validation.auc,
        "valid_logloss": validation.logloss,
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
        f"{r['label']:>30} (lr x{r['lr_factor']:g}, seed {r['seed']}): AUC {r['final_auc']:.4f}, "
        f"validation AUC {r['valid_auc']:.4f}, staleness mean {s['mean']:.0f} sd {s['std']:.0f}"
    )


@dataclasses.dataclass(frozen=True)
class Variant:
    """A compared variant: its label, cluster size, staleness rule, data normalization."""

    label: str
    workers: int
    rule: str = "none"  # "none", "inverse" (1/tau) or "rho" (eq. 7; on tau' at LARGE)
    data_norm: bool = False


BASELINES = (Variant(LABELS.base_small, SMALL), Variant(LABELS.base_large, LARGE))
NORMALIZED = (
    Variant(LABELS.inverse, LARGE, "inverse"),
    Variant(LABELS.rho_large, LARGE, "rho"),
    Variant(LABELS.rho_large_data, LARGE, "rho", data_norm=True),
    *(
        (
            Variant(LABELS.rho_small, SMALL, "rho"),
            Variant(LABELS.rho_small_data, SMALL, "rho", True),
        )
        if SMALL in FIG6_CLUSTERS
        else ()
    ),
)
VARIANTS = {v.label: v for v in (*BASELINES, *NORMALIZED)}


def norm_run(
    variant: Variant,
    lr_factor: float,
    seed: int,
    small: dict[str, Any] | None = None,
    large: dict[str, Any] | None = None,
) -> NormRun:
    """`variant`'s run at `lr_factor` and `seed`; rho reads its moments off that seed's
    un-normalized runs `small` and `large` (the small one's alone at SMALL)."""
    norm: StalenessNorm | None = None
    if variant.rule == "inverse":
        norm = StalenessNorm("inverse")
    elif variant.rule == "rho":
        assert small is not None and small["seed"] == seed, "rho needs the seed's moments"
        if variant.workers == SMALL:
            norm = rho_on(small, None)
        else:
            assert large is not None and large["seed"] == seed, "rho needs the seed's moments"
            norm = rho_on(small, large)
    return NormRun(
        variant.label, variant.workers, norm, variant.data_norm, lr_factor, TOTAL_STEPS, seed
    )


def tuning_score(row: dict[str, Any]) -> float:
    """A tuning run's score: the validation AUC (a split apart from the test split the
    claims read); a diverged run's NaN stays NaN (`settle.best` ranks it last)."""
    return float(row["valid_auc"])


Made = dict[tuple[str, float], dict[str, Any]]


def tuning_runner(
    made: Made,
    bases: dict[int, dict[str, Any]] | None,
    progress: Progress | None,
) -> settle.Runner:
    """`settle.tune`'s runner: each (label, factor) point a full-length run of seed
    TUNING_SEED (the seed's own claim run where chosen), rho on the seed's moments from
    `bases` (un-normalized runs by workers), every row kept in `made`."""

    def run(points: list[tuple[Hashable, float]]) -> list[float]:
        small = bases[SMALL] if bases else None
        large = bases[LARGE] if bases else None
        runs = [
            norm_run(VARIANTS[str(label)], value, TUNING_SEED, small, large)
            for label, value in points
        ]
        rows = run_in_processes(run_one, runs, progress)
        for (label, value), row in zip(points, rows, strict=True):
            made[(str(label), value)] = row
        return [tuning_score(row) for row in rows]

    return run


def seed_runs(
    chosen: dict[str, float], variants: tuple[Variant, ...], bases: dict[tuple[int, int], Any]
) -> list[NormRun]:
    """Every seed but the tuning seed's runs of `variants` at their chosen factors; rho on
    each seed's moments (`bases` by (workers, seed), empty for the un-normalized runs)."""
    return [
        norm_run(v, chosen[v.label], seed, bases.get((SMALL, seed)), bases.get((LARGE, seed)))
        for seed in SEEDS
        if seed != TUNING_SEED
        for v in variants
    ]


def tuning_rows(made: Made) -> list[dict[str, Any]]:
    """Every tuning run's numbers (no curve), in the order they ran."""
    keys = ("label", "workers", "lr_factor", "valid_auc", "valid_logloss", "final_auc")
    return [{k: row[k] for k in keys} for row in made.values()]


@reproduction(
    "staleness-norm",
    paper="Async SGD at extreme scale (Liu & Zhao 2021)",
    claim=f"Fig. 5, 6: async at 1K and 3K workers (scaled to {SMALL} and {LARGE}), no "
    "normalization vs 1/tau vs rho on the normalized staleness; data normalization over rho",
    report_dir="reports/staleness_norm",
    minutes=MINUTES,
    seeds=SEEDS,
    cost={"cluster": NORM_COST},
    show=_norm_run,
)
def reproduce(out_dir: Path, progress: Progress | None = None) -> dict[str, Any]:
    out_dir.mkdir(parents=True, exist_ok=True)
    made: Made = {}
    tuned = settle.tune(
        [v.label for v in BASELINES], GRID, tuning_runner(made, None, progress), True
    )
    chosen = {str(label): t.chosen for label, t in tuned.items()}
    first = {v.workers: made[(v.label, chosen[v.label])] for v in BASELINES}
    tuned |= settle.tune(
        [v.label for v in NORMALIZED], GRID, tuning_runner(made, first, progress), True
    )
    chosen = {str(label): t.chosen for label, t in tuned.items()}
    bases = run_in_processes(run_one, seed_runs(chosen, BASELINES, {}), progress)
    moments = {(r["workers"], r["seed"]): r for r in bases} | {
        (w, TUNING_SEED): r for w, r in first.items()
    }
    normalized = run_in_processes(run_one, seed_runs(chosen, NORMALIZED, moments), progress)
    chosen_runs = [made[(label, chosen[label])] for label in VARIANTS]
    result = {
        "lr_factor": chosen[LABELS.base_small],
        "lr_factor_large": chosen[LABELS.base_large],
        "seeds": list(SEEDS),
        "tuning_seed": TUNING_SEED,
        "tuning_score": "validation AUC",
        "valid_examples": VALID_EXAMPLES,
        "grid": {"values": list(GRID.values), "step": GRID.step},
        "tuned": [tuned[label].as_dict() for label in VARIANTS],
        "tuning": tuning_rows(made),
        "flattening": {
            "last_fraction": FLATTENING.last_fraction,
            "tolerance": FLATTENING.tolerance,
        },
        "runs": [*chosen_runs, *bases, *normalized],
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
