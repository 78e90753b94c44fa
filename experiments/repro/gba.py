"""GBA (Alibaba, NeurIPS 2022) in the simulator: gradient strategies under stragglers
(switching between strategies through checkpoints is `gba_switching`; the report's text and
figures are `gba_stragglers_report`).

The setting, beside the paper's (Tab. 5.2, 5.3; its shared cluster, hundreds of workers,
stragglers it does not quantify, production models trained for days):

- 16 workers (4 trainers x 4 threads), 8 embedding servers, 4 dense servers, 25 Gbit/s, the
  default DLRM and synthetic task, local batch 128 (global batch 2,048, as a sync step);
  workers 10x slower than the other reproductions' (a batch takes 29.9 ms), so that
  computing, not the dense servers' NICs, paces a step, as on the paper's CPU workers.
- Stragglers in stretches, as on a shared cluster: a set of the workers computes `slowdown`
  times slower, the set drawn anew every 10 fast steps. The main setting: 2 of the 16 workers
  (12.5%) 8x slower. A batch started slow spans about 7 global steps of the others, past
  GBA's threshold iota = 4, so GBA's token decay excludes gradients that BSP applies (the
  two differ; the report counts the excluded ones).
- 500 global steps a run (1,024,000 examples), seeds 0, 1, 2 (initial weights, data order,
  straggler draws; one draw of the task).
- Learning rates tuned once, on seed 0 in the main setting, by the test AUC: a factor on
  both Adagrad rates (dense 0.01, sparse 0.05) from SYNC_GRID for `sync`, whose rate the
  strategies of sync's global batch (GBA, BSP, Hop-BW) take as the paper says (tuning-free);
  from ASYNC_GRID for `async`, whose rate Hop-BS takes (one gradient an update, like async).
- The severity sweep: slowdowns SLOWDOWNS x straggler fractions FRACTIONS, `sync` and GBA,
  SWEEP_STEPS global steps a point in priced math (no tensors: EPS, staleness and GBA's
  exclusions only); AUC at the slowdowns AUC_SLOWDOWNS (main fraction) for GBA, and for
  BSP at BSP_SLOWDOWNS, in real math (at 4x a slow batch spans about 3 global steps, under
  iota: GBA excludes few or none, the report counts them, and applies what BSP applies when
  none, so BSP's runs there are cut). `sync`'s updates do not depend on the stragglers (a
  step waits for all of its gradients), so its AUC is the main setting's at every severity.

Cost, from runs on this project's loaded 2-core machine (process CPU, 18 ms a gradient in
real math, 26 ms for the one-gradient updates of async and Hop-BS, 9 ms priced, about 5 s
to start and score a run): 6 tuning runs (18 min), 13 more main runs (45 min), 9 severity
runs (22 min) and 54 priced points of 40 steps (7 min), about 92 minutes on one core;
`run_in_processes` runs two at a time. Cut to fit: BSP at 4x (see above), the sweep's
points to 40 global steps (EPS only), the AUC sweep to the main fraction.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from experiments.repro import gba_stragglers_report as report
from experiments.repro.common import (
    CLUSTER_COST,
    DENSE_SERVERS,
    WORKERS_PER_TRAINER,
    cluster,
    run_in_processes,
    strategy,
)
from experiments.repro.registry import Progress, reproduction
from recsync.coordinator.spec import JobSpec, plan_for
from recsync.data.synthetic import SyntheticSpec
from recsync.model.spec import ModelSpec
from recsync.optim.dense import DenseOptimizerSpec
from recsync.optim.rowwise import RowOptimizerSpec
from recsync.optim.train_spec import TrainSpec
from recsync.runtime.sim.cost import CostModel, Stragglers
from recsync.runtime.sim.job import SimJob

TRAINERS = 4
WORKERS = TRAINERS * WORKERS_PER_TRAINER  # 16
LOCAL_BATCH = 128
GLOBAL_BATCH = WORKERS * LOCAL_BATCH
GLOBAL_STEPS = 500
SEEDS = (0, 1, 2)
TEST_EXAMPLES = 20_000
# workers 10x slower than CLUSTER_COST's: computing paces a step, not the dense servers' NICs
STRAGGLER_COST = dataclasses.replace(CLUSTER_COST, worker_flops=CLUSTER_COST.worker_flops / 10)
STEP_S = LOCAL_BATCH * ModelSpec().dense_flops_per_example() / STRAGGLER_COST.worker_flops
PERIOD_S = 10 * STEP_S  # the slow set is drawn anew every 10 fast steps
MAIN_FRACTION, MAIN_SLOWDOWN = 2 / WORKERS, 8.0
SYNC_GRID = (0.25, 1.0, 4.0)  # factors on both default Adagrad rates
ASYNC_GRID = (1 / 16, 0.25, 1.0)
SLOWDOWNS = (1.0, 2.0, 4.0, 8.0, 16.0)
FRACTIONS = (MAIN_FRACTION, 4 / WORKERS)
SWEEP_STEPS = 40
AUC_SLOWDOWNS = (4.0, MAIN_SLOWDOWN, 16.0)  # GBA's AUC; BSP's where GBA's decay can fire:
BSP_SLOWDOWNS = (MAIN_SLOWDOWN, 16.0)  # below, GBA excludes none and applies what BSP does
BACKUP = round(MAIN_FRACTION * WORKERS)  # Hop-BW leaves out as many as are slow
# label -> (strategy, its fields, whose tuned rate it takes)
VARIANTS: dict[str, tuple[str, dict[str, Any], str]] = {
    "sync": ("sync", {}, "sync"),
    "GBA": ("gba", {"iota": 4}, "sync"),
    "BSP": ("bsp", {}, "sync"),
    "Hop-BW": ("backup_workers", {"num_backup": BACKUP}, "sync"),
    "async": ("async", {}, "async"),
    "Hop-BS": ("bounded_staleness", {"staleness": 4}, "async"),
}


@dataclasses.dataclass(frozen=True)
class Point:
    """One simulated run: a variant of VARIANTS, its seed, the stragglers (a `slowdown` of
    1 is none), the factor on the learning rates, its global steps and the math mode."""

    variant: str
    seed: int
    slowdown: float = MAIN_SLOWDOWN
    fraction: float = MAIN_FRACTION
    lr_factor: float = 1.0
    steps: int = GLOBAL_STEPS
    math: str = "real"


def stragglers(slowdown: float, fraction: float) -> Stragglers:
    if slowdown == 1.0:
        return Stragglers()
    return Stragglers(fraction=fraction, slowdown=slowdown, period_s=PERIOD_S)


def cost_of(slowdown: float, fraction: float) -> CostModel:
    return dataclasses.replace(STRAGGLER_COST, stragglers=stragglers(slowdown, fraction))


def train_spec(lr_factor: float, seed: int) -> TrainSpec:
    dense, sparse = DenseOptimizerSpec(), RowOptimizerSpec()
    return TrainSpec(
        batch_size=LOCAL_BATCH,
        dense_optimizer=dataclasses.replace(dense, lr=dense.lr * lr_factor),
        sparse_optimizer=dataclasses.replace(sparse, lr=sparse.lr * lr_factor),
        seed=seed,
    )


def run_point(point: Point) -> dict[str, Any]:
    name, fields, _ = VARIANTS[point.variant]
    examples = point.steps * GLOBAL_BATCH
    synthetic = dataclasses.replace(SyntheticSpec(), num_train=examples, num_test=TEST_EXAMPLES)
    spec = JobSpec(
        ModelSpec(),
        train_spec(point.lr_factor, point.seed),
        cluster(DENSE_SERVERS, TRAINERS),
        strategy(name, **fields),
        synthetic,
    )
    sim = SimJob(spec, plan_for(spec), cost_of(point.slowdown, point.fraction), math=point.math)
    summary = sim.run()
    return {
        **dataclasses.asdict(point),
        "examples": examples,
        "eps": summary["eps_steady"],
        "virtual_seconds": summary["train_seconds"],
        "global_steps": summary["global_steps"],
        "mean_staleness": summary["dense_staleness"]["mean"],
        "max_staleness": summary["dense_staleness"]["max"],
        "mean_row_staleness": summary["sparse_staleness"]["mean"],
        "dropped": summary["gradients_dropped"],
        "blocked_s": summary["blocked_seconds"].get("AwaitStart", 0.0),
        "test_auc": summary.get("test_auc"),
    }


def tuning_points() -> list[Point]:
    return [Point("sync", SEEDS[0], lr_factor=f, steps=GLOBAL_STEPS) for f in SYNC_GRID] + [
        Point("async", SEEDS[0], lr_factor=f, steps=GLOBAL_STEPS) for f in ASYNC_GRID
    ]


def best_factors(tuning: list[dict[str, Any]]) -> dict[str, float]:
    """The factor of the best test AUC for `sync` and for `async`."""
    return {
        who: max((r for r in tuning if r["variant"] == who), key=lambda r: r["test_auc"])[
            "lr_factor"
        ]
        for who in ("sync", "async")
    }


def study_points(lr: dict[str, float]) -> list[Point]:
    """The main table's runs, the severity runs for AUC (real math) and the priced sweep."""
    main = [
        Point(v, s, lr_factor=lr[VARIANTS[v][2]], steps=GLOBAL_STEPS)
        for v in VARIANTS
        for s in SEEDS
    ]
    severity = [
        Point(v, s, slowdown=x, lr_factor=lr["sync"], steps=GLOBAL_STEPS)
        for x in AUC_SLOWDOWNS
        if x != MAIN_SLOWDOWN
        for v in ("GBA", "BSP")
        if v == "GBA" or x in BSP_SLOWDOWNS
        for s in SEEDS
    ]
    sweep = [
        Point(v, s, x, f, lr["sync"], SWEEP_STEPS, "priced")
        for f in FRACTIONS
        for x in SLOWDOWNS
        if x != 1.0 or f == FRACTIONS[0]
        for v in ("sync", "GBA")
        for s in SEEDS
    ]
    return main + severity + sweep


def _point_row(r: dict[str, Any]) -> str:
    auc = "priced" if r["test_auc"] is None else f"AUC {r['test_auc']:.4f}"
    dropped = sum(r["dropped"].values())
    return (
        f"{r['variant']:>7} seed {r['seed']} x{r['slowdown']:g} of {r['fraction']:.3f} "
        f"(lr x{r['lr_factor']:g}): {r['eps']:>10,.0f} ex/s, {r['global_steps']} steps, "
        f"{dropped} dropped, {auc}"
    )


@reproduction(
    "gba-stragglers",
    paper="GBA (Alibaba, NeurIPS 2022)",
    claim="Tab. 5.2, 5.3: throughput, staleness, drops and AUC of every gradient strategy "
    "under stragglers, and over the stragglers' severity",
    report_dir="reports/gba_stragglers",
    minutes=50.0,
    seeds=SEEDS,
    cost={"main stragglers": cost_of(MAIN_SLOWDOWN, MAIN_FRACTION)},
    show=_point_row,
)
def reproduce_stragglers(out_dir: Path, progress: Progress | None = None) -> dict[str, Any]:
    out_dir.mkdir(parents=True, exist_ok=True)
    tuning = run_in_processes(run_point, tuning_points(), progress)
    lr = best_factors(tuning)
    done = {Point(**{k: r[k] for k in Point.__dataclass_fields__}): r for r in tuning}
    todo = [p for p in study_points(lr) if p not in done]
    done |= dict(zip(todo, run_in_processes(run_point, todo, progress), strict=True))
    rows = [done[p] for p in study_points(lr)]
    result = {
        "setting": setting(),
        "lr": lr,
        "tuning": tuning,
        "main": [r for r in rows if r["math"] == "real" and r["slowdown"] == MAIN_SLOWDOWN],
        "severity": [r for r in rows if r["math"] == "real" and r["variant"] in ("GBA", "BSP")],
        "sweep": [r for r in rows if r["math"] == "priced"],
    }
    (out_dir / "results.json").write_text(json.dumps(result, indent=1))
    report.write(result, out_dir)
    return result


def setting() -> dict[str, Any]:
    """What the report states of the setting (kept in results.json beside the runs)."""
    return {
        "workers": WORKERS,
        "trainers": TRAINERS,
        "local_batch": LOCAL_BATCH,
        "global_steps": GLOBAL_STEPS,
        "seeds": list(SEEDS),
        "step_ms": STEP_S * 1e3,
        "main_fraction": MAIN_FRACTION,
        "main_slowdown": MAIN_SLOWDOWN,
        "sync_grid": list(SYNC_GRID),
        "async_grid": list(ASYNC_GRID),
        "sweep_steps": SWEEP_STEPS,
        "backup": BACKUP,
        "cost": str(STRAGGLER_COST),
    }
