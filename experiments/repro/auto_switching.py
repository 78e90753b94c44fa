"""The automatic strategy controller's value, and GBA's switching claim (Fig. 6), in
continual training on a cluster that changes day by day (simulator, `recsync continual`).

GBA (001) switches between synchronous training and GBA by hand as resources change and
names choosing automatically as future work. Here every variant is one `recsync continual`
run over the same DAYS-day synthetic task (teacher drift DRIFT a day; each day resumed from
the previous day's checkpoint, scored on the next day's held-out examples) and the same
scenario file (SCENARIO: stragglers appear, leave, come back mid-day and milder, trainers
are removed, a server slows down), with the same hyper-parameters, tuned once on sync:

- sync, gba and async throughout;
- the best fixed-in-hindsight schedule: knowing the scenario, sync on calm days and GBA on
  days with stragglers (GBA's own recommendation);
- the controller (`--controller default --segments 4`): it decides after every quarter of a
  day from what the stretch measured; and without its probe (`probe=false`: sync whenever
  the cluster is balanced, GBA with stragglers -- the hindsight rule, learned online);
- GBA's Fig. 6 in this setting: sync, then from SWITCH_DAY (stragglers) GBA, async or
  Hop-BS (bounded_staleness), then sync again from BACK_DAY, with unchanged
  hyper-parameters.

Seeds 0, 1, 2: the run's seed (`run.seed`: initial weights, data order, the workers' speeds and
which trainers straggle); the task and the scenario are one draw for every seed; the learning
rate is tuned on seed 0 alone and frozen for every seed.

Targets (recsync's own): the controller's total training time within 10% of the fastest fixed
strategy's and its mean next-day AUC within 0.001 of the best fixed strategy's.
"""

from __future__ import annotations

import dataclasses
import json
import tempfile
from pathlib import Path
from typing import Any

from experiments.repro.auto_switching_report import plot, report
from experiments.repro.auto_switching_shape import (
    AUC_TARGET,
    BACK,
    DIP,
    GBA_WITHIN,
    SWITCH_PREFIX,
    SYNC,
    TIME_TARGET,
    by_variant,
    controller_check,
    fastest_and_best,
    fig6_shape,
    seeds_of,
    switched_runs,
)
from experiments.repro.claims import MEASURED, Claim, Effect
from experiments.repro.common import CLUSTER_COST, run_in_processes
from experiments.repro.registry import Progress, reproduction
from recsync.app.config.load import load_config
from recsync.app.runs.checkpoints import load_run_checkpoint
from recsync.app.runs.continual import run_continual
from recsync.app.runs.continual_options import ContinualOptions
from recsync.strategy.controller import ControllerConfig

DAYS = 12  # days 0-10 trained, 1-11 scored
PER_DAY = 32_768
DRIFT = 0.1
BATCH_SIZE = 64
TRAINERS = 8
SEGMENTS = 4
TEST_PER_DAY = 20_000
LR_FACTORS = (0.5, 1.0, 2.0, 4.0, 8.0)  # tuned once: sync over the first TUNE_DAYS (calm) days
TUNE_DAYS = 3
SWITCH_DAY, BACK_DAY = 3, 5
SCENARIO = """\
# days 0-2 calm; 3-4: a quarter of the trainers 4x slower; 5-6: calm, two trainers fewer;
# 7: stragglers appear halfway through the day; 8: half the trainers 2.5x slower;
# 9: calm; 10: calm, one embedding server 3x slower
[[change]]
day = 3
stragglers = { fraction = 0.25, slowdown = 4.0 }

[[change]]
day = 5
num_trainers = 6

[[change]]
day = 7
stragglers = { fraction = 0.25, slowdown = 4.0, start_s = START_S }

[[change]]
day = 8
stragglers = { fraction = 0.5, slowdown = 2.5 }

[[change]]
day = 9

[[change]]
day = 10
server_slowdown = { "embedding-server-0" = 3.0 }
"""
STRAGGLER_DAYS = (3, 4, 7, 8)
HINDSIGHT = {0: "sync", 3: "gba", 5: "sync", 7: "gba", 9: "sync"}
FIXED = ("sync", "gba", "async")
SWITCHED = ("gba", "async", "bounded_staleness")
SEEDS = (0, 1, 2)
TUNE_SEED = 0


def overrides(lr_factor: float, days: int = DAYS, seed: int = 0) -> dict[str, Any]:
    """The job every variant runs (its strategy aside)."""
    cost = {
        f"cost.{k}": getattr(CLUSTER_COST, k)
        for k in (
            "worker_flops",
            "speed_spread",
            "batch_noise",
            "latency_s",
            "bandwidth_bytes_s",
            "request_s",
            "row_s",
            "element_s",
            "reader_batch_s",
        )
    }
    return {
        "strategy.name": "sync",
        "data.synthetic.num_days": days,
        "data.synthetic.num_train": days * PER_DAY,
        "data.synthetic.num_test": 2_000,
        "data.synthetic.drift": DRIFT,
        "model.embedding_dim": 8,
        "model.bottom_mlp": [64, 32],
        "model.top_mlp": [64, 32],
        "train.batch_size": BATCH_SIZE,
        "train.dense_optimizer.lr": 0.01 * lr_factor,
        "train.sparse_optimizer.lr": 0.01 * lr_factor,
        "cluster.num_trainers": TRAINERS,
        "cluster.workers_per_trainer": 1,
        "cluster.num_embedding_servers": 4,
        "cluster.num_dense_servers": 2,
        "run.seed": seed,
        "run.eval_every": 0,
        "run.keep_best": False,
        "run.checkpoint.every_seconds": 0.0,
        **cost,
    }


def variants() -> dict[str, ContinualOptions]:
    """Every variant's continual options (the scenario path is filled in per run)."""
    table: dict[str, ContinualOptions] = {
        f"{name} throughout": ContinualOptions("sim", {0: name}) for name in FIXED
    }
    table["hindsight schedule"] = ContinualOptions("sim", HINDSIGHT)
    table["controller"] = ContinualOptions("sim", controller=ControllerConfig(), segments=SEGMENTS)
    table["controller, no probe"] = ContinualOptions(
        "sim", controller=ControllerConfig(probe=False), segments=SEGMENTS
    )
    for name in SWITCHED:
        table[f"sync > {name} > sync"] = ContinualOptions(
            "sim", {0: "sync", SWITCH_DAY: name, BACK_DAY: "sync"}
        )
    return table


def scenario_text(mid_day_s: float) -> str:
    """The scenario file, day 7's stragglers appearing `mid_day_s` virtual seconds in."""
    return SCENARIO.replace("START_S", str(mid_day_s))


def run_variant(item: tuple[str, int, float, int, float | None]) -> dict[str, Any]:
    """One variant on one seed: (label, seed, learning-rate factor, days, day 7's straggler
    start in virtual seconds or None for no scenario: the tuning runs, sync on calm days)."""
    label, seed, lr_factor, days, mid_day_s = item
    options = variants()[label] if days == DAYS else ContinualOptions("sim", {0: "sync"})
    config = load_config(None, overrides(lr_factor, days, seed))
    with tempfile.TemporaryDirectory(prefix="recsync-auto-switching-") as runs:
        scenario = None
        if mid_day_s is not None:
            scenario = Path(runs) / "scenario.toml"
            scenario.write_text(scenario_text(mid_day_s))
        options = dataclasses.replace(options, scenario=None if scenario is None else str(scenario))
        root = Path(runs) / "run"
        records = run_continual(config, root, options, progress=False)
        accumulators = [adagrad_sums(root / r["run_dirs"][-1]) for r in records]
    return {
        "variant": label,
        "seed": seed,
        "lr_factor": lr_factor,
        "days": [
            {
                "day": r["day"],
                "strategy": r["strategy"],
                "next_day_auc": r["next_day_auc"],
                "train_seconds": r["train_seconds"],
                "num_trainers": r["num_trainers"],
                "adagrad_sums": sums,
                "decisions": [
                    {
                        "after": s["run_dir"],
                        "from": s["strategy"],
                        "to": s["decision"],
                        "reason": s["reason"],
                    }
                    for s in r["stretches"]
                    if "decision" in s
                ],
            }
            for r, sums in zip(records, accumulators, strict=True)
        ],
        "total_seconds": sum(r["train_seconds"] for r in records),
        "mean_next_day_auc": sum(r["next_day_auc"] for r in records) / len(records),
    }


def adagrad_sums(run_dir: Path) -> dict[str, float]:
    """The sums of the dense and the rows' Adagrad accumulators in a run's end checkpoint
    (how much squared gradient they hold: Adagrad's steps shrink as 1 / sqrt of it)."""
    state, _ = load_run_checkpoint(run_dir)
    rows = sum(float(s["optimizer"]["accumulator"].sum()) for s in state.shards)
    return {"dense": float(state.dense_optimizer["sum"].sum()), "rows": rows}


def _switching_row(r: dict[str, Any]) -> str:
    return (
        f"{r['variant']:>30} seed {r.get('seed', 0)} (lr x{r['lr_factor']:g}): "
        f"{r['total_seconds']:7.2f} virtual s, "
        f"mean next-day AUC {r['mean_next_day_auc']:.4f}"
    )


@reproduction(
    "auto-switching",
    paper="GBA (Alibaba, NeurIPS 2022), future work",
    claim="the automatic controller vs sync, GBA, async and a hindsight schedule over 11 "
    "days of a changing cluster; Fig. 6's switch and back in continual training",
    report_dir="reports/auto_switching",
    minutes=8.5,
    seeds=SEEDS,
    cost={"cluster (stragglers and calm days as the scenario says)": CLUSTER_COST},
    show=_switching_row,
)
def reproduce(out_dir: Path, progress: Progress | None = None) -> dict[str, Any]:
    out_dir.mkdir(parents=True, exist_ok=True)
    tune = [("sync throughout", TUNE_SEED, f, TUNE_DAYS, None) for f in LR_FACTORS]
    tuned = run_in_processes(run_variant, tune, progress)
    chosen = max(tuned, key=lambda row: row["mean_next_day_auc"])
    best = chosen["lr_factor"]
    # day 7's stragglers appear halfway through a day: half a calm sync day's seconds
    mid_day_s = round(chosen["days"][0]["train_seconds"] / 2, 3)
    scenario = out_dir / "scenario.toml"
    scenario.write_text(scenario_text(mid_day_s))
    items = [(label, seed, best, DAYS, mid_day_s) for seed in SEEDS for label in variants()]
    rows = run_in_processes(run_variant, items, progress)
    results = {"lr_tuning": tuned, "lr_factor": best, "seeds": list(SEEDS), "variants": rows}
    (out_dir / "results.json").write_text(json.dumps(results, indent=1))
    plot(rows, out_dir / "days.png")
    (out_dir / "report.md").write_text(report(results, scenario.read_text()))
    return results


def claims(results: dict[str, Any]) -> list[Claim]:
    """The report's headline claims (the controller's targets, Fig. 6's shape), from its
    results file, each verdict on the per-seed values (older results of one seed: 'too few
    seeds')."""
    runs = by_variant(results["variants"])
    fastest, best = fastest_and_best(runs)
    days = len(next(iter(runs[SYNC].values()))["days"])
    count = len(seeds_of(runs))
    seeds = "one seed" if count == 1 else f"{count} seeds"
    out = []
    if "controller" in runs:
        check = controller_check(runs, fastest, best)
        setting = f"{days} days of a changing simulated cluster (means, {seeds})"
        out += [
            Claim(
                f"an automatic controller trains within {TIME_TARGET:.0%} of the fastest "
                "fixed strategy's time",
                "GBA section 6: future work; the target is recsync's own",
                f"{setting}: {check.time_ratio:.3f}x {fastest}'s time",
                check.time_ok,
                "controller",
                effect=Effect.of(
                    check.ratios, f"x {fastest}'s time", "lower", 1 + TIME_TARGET, digits=3
                ),
                evidence=MEASURED,
            ),
            Claim(
                f"an automatic controller's mean next-day AUC is within {AUC_TARGET} of the "
                "best fixed strategy's",
                "GBA section 6: future work; the target is recsync's own",
                f"{setting}: {best} minus the controller {check.auc_gap:+.4f}",
                check.auc_ok,
                "controller",
                effect=Effect.of(
                    check.auc_gaps, f"AUC, {best} minus the controller", "lower", AUC_TARGET
                ),
                evidence=MEASURED,
            ),
        ]
    for w in switched_runs(runs):
        strategy = w.variant.removeprefix(SWITCH_PREFIX).split(" > ")[0]
        shape = fig6_shape(w)
        paper = "Fig. 6: switching as resources change, same hyper-parameters"
        where = f"switched on days {w.first}-{w.last} of {days} (means, {seeds})"
        if shape.is_gba:
            out.append(
                Claim(
                    "switching sync > GBA > sync keeps sync's AUC (within 0.002 every day)",
                    paper,
                    f"{where}: largest gap to sync {shape.worst:+.4f}",
                    shape.holds,
                    "gba",
                    effect=Effect.of(
                        shape.held,
                        "AUC, lowest gap to sync from the switch on",
                        "higher",
                        -GBA_WITHIN,
                    ),
                    evidence=MEASURED,
                )
            )
            continue
        assert shape.dips is not None
        out += [
            Claim(
                f"switched to {strategy}, AUC dips (> 0.002 below sync)",
                paper,
                f"{where}: lowest {min(shape.switched):+.4f} vs sync",
                shape.dips,
                strategy,
                effect=Effect.of(
                    shape.dipped or {}, "AUC, lowest gap to sync while switched", "lower", -DIP
                ),
                evidence=MEASURED,
            ),
            Claim(
                f"switched to {strategy} and back, AUC re-converges to sync's (within 0.001)",
                paper,
                f"{where}: last day {w.mean_diffs[-1]:+.4f} vs sync",
                shape.holds,
                strategy,
                effect=Effect.of(shape.held, "AUC, last day's gap to sync", "higher", -BACK),
                evidence=MEASURED,
            ),
        ]
    return out
