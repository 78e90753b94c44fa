"""Expandable hash embedding tables (GBA's and Liu & Zhao's production setting: ids keyed
by their raw value, rows created on first sight, admitted and evicted) against fixed tables
whose ids are hashed into buckets, in the simulator with the real math.

The task: the synthetic teacher task with Criteo Kaggle's 26 per-feature cardinalities
scaled down by `Setting.scale` (each at least `floor` ids), Zipf-skewed ids, embedding
dimension 16, and id churn: every day a share of each feature's ids is replaced by
never-seen ones. Four parts: quality at equal memory (several seeds), memory and next-day
AUC over continual days with and without eviction (with full and delta checkpoints of every
cut), the capacity run, and examples/s of hash vs fixed tables: the cost model's ratio, and
on the Ray engine when `engine_examples` > 0 (off by default: it needs a machine where no
other Ray cluster runs; a `ray stop` by anyone else on it kills this one's). The Ray part is saved
(parts/engine.json, with the commit it was measured at) and a rerun without it reports it
again, said so; every other part is computed by each run (a stopped run resumes from its
finished points, `points.py`), so the report's numbers are its stamp's code's.
The report is `embeddings_report.py`'s.

Settling (`embeddings_settle.py`, `settle.py`): every variant of the quality and of the
continual runs is tuned on one grid of a factor of both default Adagrad rates (on
`Setting.tuning_seed`, scored on held-out examples the claims do not read), and the runs the
claims read are repeated on every seed at the chosen factor (quality: `Setting.seeds`;
continual: `Setting.continual_seeds`, 5); their held-out loss curves are checked by
`settle.Flattening`. Measured at this size: a quality run ~8 s of one core with its 8
evaluations, a continual run ~36 s; about 53 quality and 16 continual runs with the tuning:
~9 minutes on 2 cores.
"""

from __future__ import annotations

import dataclasses
import json
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from experiments.repro import stamp
from experiments.repro.embeddings_capacity import insert_all
from experiments.repro.embeddings_report import write_report
from experiments.repro.embeddings_setting import (
    ENGINE_FIELDS,
    UNBOUNDED,
    Setting,
    fixed_rows,
    job,
    quality_label,
    synthetic,
)
from experiments.repro.embeddings_settle import continual_items, quality_items, tuned_runs
from experiments.repro.registry import Progress, reproduction
from experiments.repro.settle import SEEDS
from recsync.app.runs.checkpoints import CheckpointWriter
from recsync.coordinator.checkpoint import JobState
from recsync.coordinator.cuts import CheckpointEvery
from recsync.coordinator.outcome import evaluate_model
from recsync.coordinator.spec import plan_for
from recsync.data.batch import Batch
from recsync.data.synthetic import SyntheticTask
from recsync.runtime.sim.cost import CostModel
from recsync.runtime.sim.job import SimJob


def quality_run(
    item: tuple[Setting, str, int, int | None] | tuple[Setting, str, int, int | None, float],
) -> dict[str, Any]:
    """One variant, seed and memory budget (and rate factor, 1 when not given) trained on
    the multi-day task, scored on the last day; its held-out loss curve (`eval_marks`
    evaluations on the test split) and the tuning's score, the logloss on held-out examples
    of the last day that are not the test split."""
    setting, variant, seed, cap, factor = (*item, 1.0) if len(item) == 4 else item
    task = synthetic(setting, setting.task_seed, setting.quality_days, setting.quality_examples)
    spec = job(setting, variant, task, seed, cap, factor)
    start = time.perf_counter()
    every = max(setting.quality_examples // setting.eval_marks, 1)
    sim = SimJob(spec, plan_for(spec), CostModel(), eval_every=every)
    summary = sim.run()
    rows = summary.get("embedding_rows") or {}
    memory = sum(fixed_rows(task, cap))
    bound = spec.model.hash_tables.max_rows if spec.model.hash_tables else None
    state = sim.final_state
    assert state is not None
    assert spec.synthetic is not None
    validation = SyntheticTask(spec.synthetic).day_test_set(
        setting.quality_days - 1, setting.validation_examples
    )[0]
    quality = evaluate_model(
        spec, sim.plan.embeddings.layout, state.dense, state.shards, validation
    )
    return {
        "variant": quality_label(variant, cap),
        "fixed_cap": cap,
        "seed": seed,
        "factor": factor,
        "test_auc": summary["test_auc"],
        "test_ne": summary["test_ne"],
        "teacher_auc": SyntheticTask(task).teacher_auc(),
        "rows_budget": None if cap is None else memory,
        "max_rows_per_shard": bound,
        "rows_live": rows.get("live", memory),
        "inserted": rows.get("inserted"),
        "evicted": rows.get("evicted"),
        "refused_lookups": rows.get("refused_lookups"),
        "admitted_lookups": rows.get("admitted_lookups"),
        "sim_eps_steady": summary["eps_steady"],
        "held_out_curve": [[r["examples"], r["test_logloss"]] for r in sim.curve],
        "validation_logloss": quality.logloss,
        "wall_s": time.perf_counter() - start,
    }


def next_day_test(scorer: SyntheticTask, day: int, size: int) -> Batch:
    """Held-out examples of the day after `day`, their ids keyed as the hash tables were
    trained (ValueError for a task that is not keyed)."""
    if not scorer.spec.keyed:
        raise ValueError("continual runs train hash tables: score them on keyed ids")
    return scorer.day_test_set(day + 1, size)[0]


def continual_run(
    item: tuple[Setting, str] | tuple[Setting, str, int, float],
) -> dict[str, Any]:
    """`days` jobs on one training seed and rate factor (0 and 1 when not given), each
    resumed from the day before's end state, scored on the next day; with eviction, every
    cut's state (and each day's end) is also written as full-only and as full + delta
    checkpoints. The tuning's score: the logloss after the last day on the task's test split
    (the day after the last trained, a stream of its own)."""
    setting, variant, seed, factor = (*item, 0, 1.0) if len(item) == 2 else item
    task = synthetic(
        setting, setting.task_seed, setting.days + 1, (setting.days + 1) * setting.per_day
    )
    scorer = SyntheticTask(dataclasses.replace(task, keyed=True))
    writers = {}
    folder = tempfile.TemporaryDirectory(prefix="recsync-embeddings-")
    if variant == "ttl eviction":
        root = Path(folder.name)
        (root / "full").mkdir()
        (root / "delta").mkdir()
        writers = {
            "full": CheckpointWriter(root / "full"),
            "delta": CheckpointWriter(root / "delta", setting.deltas_per_full),
        }
    every = CheckpointEvery(examples=max(setting.per_day // setting.cuts_per_day, 1))
    state: JobState | None = None
    days: list[dict[str, Any]] = []
    with folder:
        for day in range(setting.days):
            spec = dataclasses.replace(
                job(setting, variant, task, seed, factor=factor),
                resume=state,
                stop_after_examples=setting.per_day,
            )
            cuts: list[JobState] = []
            sim = SimJob(
                spec,
                plan_for(spec),
                CostModel(),
                checkpoint_every=every if writers else None,
                on_checkpoint=cuts.append,
            )
            summary = sim.run()
            state = sim.final_state
            assert state is not None
            for cut in (*cuts, state):
                for writer in writers.values():
                    writer.write(cut)
                    writer.wait()
            test = next_day_test(scorer, day, setting.test_examples)
            layout = sim.plan.embeddings.layout
            quality = evaluate_model(spec, layout, state.dense, state.shards, test)
            rows = summary["embedding_rows"]
            days.append(
                {
                    "day": day,
                    "rows_live": rows["live"],
                    "inserted": rows["inserted"],
                    "evicted": rows["evicted"],
                    "next_day_auc": quality.auc,
                    "next_day_ne": quality.ne,
                    "next_day_logloss": quality.logloss,
                    "shard_clock": max(int(s["clock"]) for s in state.shards),
                }
            )
        assert state is not None
        validation = evaluate_model(spec, layout, state.dense, state.shards, scorer.test_set()[0])
    return {
        "variant": variant,
        "seed": seed,
        "factor": factor,
        "validation_logloss": validation.logloss,
        "ttl_steps": setting.ttl_steps() if writers else None,
        "days": days,
        "checkpoints": {kind: w.stats() for kind, w in writers.items()},
    }


def engine_eps(setting: Setting, progress: Progress | None) -> dict[str, Any]:
    """Steady examples/s of fixed tables (every id its own row) vs unbounded hash tables on
    the Ray engine (a local Ray on this machine's CPUs), paired run by run."""
    import ray

    from recsync.runtime.ray.job import connect, run_job

    task = dataclasses.replace(
        synthetic(setting, setting.task_seed, 1, setting.engine_examples),
        id_churn=0.0,
        num_test=2_000,
    )
    specs = {"fixed": job(setting, "fixed", task, 0), "hash": job(setting, UNBOUNDED, task, 0)}
    eps: dict[str, list[float]] = {name: [] for name in specs}
    connect(None, 2)
    try:
        for _ in range(setting.engine_repeats):
            for name, spec in specs.items():
                eps[name].append(run_job(spec)["eps_steady"])
                if progress:
                    progress(f"engine {name}: {eps[name][-1]:,.0f} ex/s")
    finally:
        ray.shutdown()
    ratios = [h / f for h, f in zip(eps["hash"], eps["fixed"], strict=True)]
    return {
        "examples": setting.engine_examples,
        "repeats": setting.engine_repeats,
        "eps_steady": eps,
        "ratios": ratios,
    }


def _key(setting: dict[str, Any], engine: bool) -> dict[str, Any]:
    """What a saved part must have been run with to be reused: the whole setting for the
    Ray part, the setting but the Ray runs' sizes for the others (and never the capacity
    run's share of ids, which only that part reads)."""
    key: dict[str, Any] = json.loads(json.dumps(setting))
    key.pop("capacity_fraction", None)
    return key if engine else {k: v for k, v in key.items() if k not in ENGINE_FIELDS}


def _part(
    out_dir: Path,
    name: str,
    setting: Setting,
    compute: Callable[[], Any] | None,
    progress: Progress | None,
) -> dict[str, Any] | None:
    """A part's result and the seconds it took, computed (`compute()`); the Ray part is
    saved in parts/engine.json with the commit it was measured at, and reused when not
    asked for (`compute` None) if it was run on the same task and model and stored the
    steady examples/s."""
    path = out_dir / "parts" / f"{name}.json"
    if path.exists() and name == "engine":
        saved: dict[str, Any] = json.loads(path.read_text())
        strict = name == "engine" and compute is not None
        same_share = name != "capacity" or (
            saved["setting"].get("capacity_fraction") == setting.capacity_fraction
        )
        steady = "eps_steady" in saved["result"]  # else each run's whole-run rate only
        if (
            steady
            and same_share
            and _key(saved["setting"], strict) == _key(setting.as_dict(), strict)
        ):
            if progress:
                progress(f"{name}: reused {path}")
            return saved
    if compute is None:
        return None
    if progress:
        progress(f"{name}: running")
    start = time.perf_counter()
    result = compute()
    saved = {"setting": setting.as_dict(), "result": result}
    saved["seconds"] = time.perf_counter() - start
    if name == "engine":
        saved["commit"] = stamp.head_commit()
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(saved, indent=1))
    return saved


def _embeddings_row(r: dict[str, Any]) -> str:
    if "days" in r:
        last = r["days"][-1]
        return (
            f"{r['variant']:>24}: {len(r['days'])} days, last day {last['rows_live']:,} rows "
            f"live, next-day AUC {last['next_day_auc']:.4f}"
        )
    return (
        f"{r['variant']:>24}, seed {r['seed']}: AUC {r['test_auc']:.4f}, NE {r['test_ne']:.4f}, "
        f"{r['rows_live']:,} rows live"
    )


@reproduction(
    "embeddings",
    paper="GBA (seed 001) / Liu & Zhao (seed 003): expandable hash tables",
    claim="hash vs fixed tables at equal memory (AUC, NE over seeds), rows and next-day AUC "
    "over 10 days of id churn with and without eviction, examples/s, full vs delta "
    "checkpoints",
    report_dir="reports/embeddings",
    minutes=9.0,
    seeds={"quality": list(Setting().seeds), "continual": list(SEEDS)},
    cost={"default": CostModel()},
    show=_embeddings_row,
)
def reproduce(
    out_dir: Path, progress: Progress | None = None, setting: Setting | None = None
) -> dict[str, Any]:
    """Run (or reuse) every part, write results.json, report.md and the figures."""
    setting = setting or Setting()
    out_dir.mkdir(parents=True, exist_ok=True)
    tuning: dict[str, Any] = {}

    def settled(part: str, items: dict[str, Any], run: Any, seeds: tuple[int, ...]) -> Any:
        """The part's runs: every variant tuned on the setting's grid, then every seed at
        its chosen factor (the tuning kept in `tuning`)."""

        def compute() -> list[dict[str, Any]]:
            tuned, runs = tuned_runs(setting, items, run, seeds, progress)
            tuning[part] = {label: t.as_dict() for label, t in tuned.items()}
            return runs

        return compute

    computes: dict[str, Callable[[], Any] | None] = {
        "quality": settled("quality", quality_items(setting), quality_run, setting.seeds),
        "continual": settled(
            "continual", continual_items(setting), continual_run, setting.continual_seeds
        ),
        "engine": (lambda: engine_eps(setting, progress)) if setting.engine_examples else None,
        "capacity": lambda: insert_all(fraction=setting.capacity_fraction),
    }
    found = {name: _part(out_dir, name, setting, run, progress) for name, run in computes.items()}
    parts = {name: part for name, part in found.items() if part is not None}
    results = {
        "setting": setting.as_dict(),
        "table_rows": setting.table_rows(),
        "engine": None,
        "tuning": tuning,
        **{name: part["result"] for name, part in parts.items()},
        # the Ray part may be an earlier run's (reused): the commit it was measured at
        "engine_commit": parts["engine"].get("commit") if "engine" in parts else None,
        "seconds": {name: part["seconds"] for name, part in parts.items()},
    }
    write_report(results, out_dir)
    (out_dir / "results.json").write_text(json.dumps(results, indent=1))
    return results
