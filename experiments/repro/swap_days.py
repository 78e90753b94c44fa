"""Liu & Zhao (AAAI 2021), Fig. 7 in the simulator: SWAP keeps Adagrad improving over days.

The paper trains its model incrementally for 10 days (each day restored from yesterday's
checkpoint, scored on the next day) with plain Adagrad, Adagrad whose accumulator decays at
every step (Zeiler 2012, lambda = 0.999999) and Adagrad-SWAP (lambda0 = 0.8 every T = 1.4e7
steps): plain Adagrad's AUC stalls after 3-4 days, SWAP's keeps rising.

Ours: a synthetic task of DAYS days whose teacher drifts by DRIFT a day, async with 4 workers,
a small DLRM; each day resumes from the previous day's checkpoint and is scored on the next
day's held-out examples. Seeds `settle.SEEDS` (0-4): TrainSpec.seed (initial weights, data
order, the workers' speeds); the task (its teacher, drift and examples) is one draw for every
seed. Scaled equivalents: the paper's T is about one day of its iterations
(7e9 examples a day at ~580 an iteration: 1.2e7), so T = one day of updates here (each dense
block and each embedding shard counts its own updates; both see every push); the per-step
decay keeps the paper's window relative to a day: lambda^(updates a day) = 0.999999^1.2e7.
The same decays apply to the dense Adagrad and to the embedding rows' Adagrad.

Settling (`settle.py`): every variant is tuned on the same grid of one factor that scales
both default Adagrad rates (dense 0.01, rows 0.05), on seed TUNING_SEED, scored by the
held-out logloss after the last day on a validation split of the last day (the task's own
test stream, not the examples the claims read); the grid grows past an edge. Each day is
trained as SEGMENTS chained segments, the held-out logloss of the day being trained scored
after each, so each day's curve is checked by `settle.Flattening`. Cut for this machine: a
day holds PER_DAY = 262,144 examples (4x the earlier 65,536; the paper's 7e9), the longest
that fits ~2 hours with tuning: about 24 runs of 11 days (measured: ~6,500 examples/s of one
core, so ~7.4 core-minutes a run).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Hashable
from pathlib import Path
from typing import Any

from experiments.repro.common import (
    CLUSTER_COST,
    run_in_processes,
    run_segment,
    strategy,
)
from experiments.repro.registry import Progress, reproduction
from experiments.repro.settle import SEEDS, Tuned, tune
from experiments.repro.swap_days_report import report, write_figures
from experiments.repro.swap_days_setting import (
    DAYS,
    GRID,
    HELD_OUT,
    PER_DAY,
    RULE,
    SEGMENTS,
    TEST_PER_DAY,
    TUNING_SEED,
    VALIDATION,
    VARIANTS,
    model,
    task,
    train_spec,
)
from recsync.coordinator.outcome import evaluate_model
from recsync.data.batch import Batch
from recsync.data.synthetic import SyntheticTask
from recsync.metrics.quality import Quality


def run_variant(item: tuple[str, int] | tuple[str, int, float]) -> dict[str, Any]:
    """One variant (a key of VARIANTS) on one training seed at one rate factor (1 when not
    given), over every day: the next-day AUC and logloss, each day's held-out curve (the
    loss of the day being trained, at the day's start and after each of its SEGMENTS), its
    change by RULE, and the validation logloss after the last day (the tuning's score)."""
    label, seed, factor = (*item, 1.0) if len(item) == 2 else item
    synthetic = task()
    tests = SyntheticTask(synthetic)
    state, sim = None, None
    auc: list[float] = []
    logloss: list[float] = []
    curve: list[tuple[float, float]] = []
    changes: list[float] = []
    for day in range(DAYS - 1):
        held = tests.day_test_set(day, HELD_OUT)[0]
        points: list[tuple[float, float]] = []
        if state is not None:
            points.append((0.0, _quality(sim, state, held).logloss))
        for segment in range(SEGMENTS):
            sim, _ = run_segment(
                strategy("async"),
                synthetic,
                PER_DAY // SEGMENTS,
                state,
                model=model(),
                train=train_spec(VARIANTS[label], seed, factor),
                trainers=1,
            )
            state = sim.final_state
            points.append(((segment + 1) / SEGMENTS, _quality(sim, state, held).logloss))
        changes.append(RULE.change(points))
        curve += [(day + position, loss) for position, loss in points]
        nxt = _quality(sim, state, tests.day_test_set(day + 1, TEST_PER_DAY)[0])
        auc.append(nxt.auc)
        logloss.append(nxt.logloss)
    validation = SyntheticTask(dataclasses.replace(synthetic, num_test=VALIDATION)).test_set()[0]
    return {
        "variant": label,
        "seed": seed,
        "factor": factor,
        "next_day_auc": auc,
        "next_day_logloss": logloss,
        "held_out_curve": curve,
        "day_change": changes,
        "validation_logloss": _quality(sim, state, validation).logloss,
    }


def _quality(sim: Any, state: Any, test: Batch) -> Quality:
    return evaluate_model(sim.spec, sim.plan.embeddings.layout, state.dense, state.shards, test)


def tuning(progress: Progress | None = None) -> tuple[dict[str, Tuned], list[dict[str, Any]]]:
    """Every variant tuned on GRID (seed TUNING_SEED, by its validation logloss); the
    tuning's runs, to reuse the chosen ones as that seed's."""
    runs: list[dict[str, Any]] = []

    def run(points: list[tuple[Hashable, float]]) -> list[float]:
        items = [(str(label), TUNING_SEED, factor) for label, factor in points]
        rows = run_in_processes(run_variant, items, progress)
        runs.extend(rows)
        return [r["validation_logloss"] for r in rows]

    tuned = tune(list(VARIANTS), GRID, run, higher_is_better=False)
    return {str(label): t for label, t in tuned.items()}, runs


def final_items(chosen: dict[str, float]) -> list[tuple[str, int, float]]:
    """(variant, seed, factor) of every run the claims read: each variant at its chosen
    factor on every seed."""
    return [(label, seed, chosen[label]) for seed in SEEDS for label in VARIANTS]


def reused(
    items: list[tuple[str, int, float]], runs: list[dict[str, Any]]
) -> tuple[dict[tuple[str, int, float], dict[str, Any]], list[tuple[str, int, float]]]:
    """The items a tuning run already computed (its seed and factor), and those to run."""
    known = {(r["variant"], r["seed"], r["factor"]): r for r in runs}
    return {i: known[i] for i in items if i in known}, [i for i in items if i not in known]


def _swap_row(r: dict[str, Any]) -> str:
    auc = r["next_day_auc"]
    return (
        f"{r['variant']:>32} seed {r.get('seed', 0)} x{r.get('factor', 1.0):g}: next-day AUC "
        f"day 1 {auc[0]:.4f} ... day {len(auc)} {auc[-1]:.4f}"
    )


@reproduction(
    "swap-days",
    paper="Async SGD at extreme scale (Liu & Zhao 2021)",
    claim="Fig. 7: next-day AUC over 11 days, Adagrad vs per-step decay vs SWAP",
    report_dir="reports/swap_days",
    minutes=105.0,
    seeds=SEEDS,
    cost={"cluster": CLUSTER_COST},
    show=_swap_row,
)
def reproduce(out_dir: Path, progress: Progress | None = None) -> dict[str, Any]:
    """Tune every variant on GRID, run each at its chosen factor on every seed (the tuning
    seed's run reused), write results.json, the figures and report.md."""
    out_dir.mkdir(parents=True, exist_ok=True)
    tuned, tuning_runs = tuning(progress)
    items = final_items({label: t.chosen for label, t in tuned.items()})
    known, todo = reused(items, tuning_runs)
    fresh = dict(zip(todo, run_in_processes(run_variant, todo, progress), strict=True))
    results = {
        "rows": [known[i] if i in known else fresh[i] for i in items],
        "tuning": {label: t.as_dict() for label, t in tuned.items()},
        "tuning_runs": [
            {k: r[k] for k in ("variant", "seed", "factor", "validation_logloss")}
            for r in tuning_runs
        ],
        "rule": RULE.describe(),
        "setting": {"days": DAYS, "per_day": PER_DAY, "segments": SEGMENTS, "grid": GRID.values},
    }
    (out_dir / "results.json").write_text(json.dumps(results, indent=1))
    write_figures(results, out_dir)
    (out_dir / "report.md").write_text(report(results))
    return results
