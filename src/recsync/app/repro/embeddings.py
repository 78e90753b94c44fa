"""Expandable hash embedding tables (GBA's and Liu & Zhao's production setting: ids keyed
by their raw value, rows created on first sight, admitted and evicted) against fixed tables
whose ids are hashed into buckets, in the simulator with the real math.

The task: the synthetic teacher task with Criteo Kaggle's 26 per-feature cardinalities
scaled down by `Setting.scale` (each at least `floor` ids), Zipf-skewed ids, embedding
dimension 16, and id churn: every day a share of each feature's ids is replaced by
never-seen ones. Four parts, each saved as it ends (parts/NAME.json, reused by a rerun with
the same setting): quality at equal memory (several seeds), memory and next-day AUC over
continual days with and without eviction (with full and delta checkpoints of every cut),
and examples/s of hash vs fixed tables on the Ray engine (`engine_examples` 0: only the
cost model's ratio). The report is `embeddings_report.py`'s.
"""

from __future__ import annotations

import dataclasses
import json
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from recsync.app.repro.common import Progress, run_in_processes
from recsync.app.repro.embeddings_report import write_report
from recsync.app.runs.checkpoints import CheckpointWriter
from recsync.coordinator.checkpoint import JobState
from recsync.coordinator.cuts import CheckpointEvery
from recsync.coordinator.outcome import evaluate_model
from recsync.coordinator.spec import ClusterSpec, JobSpec, plan_for
from recsync.data.synthetic import SyntheticSpec, SyntheticTask
from recsync.model.hash_spec import Admission, Eviction, HashTables
from recsync.model.spec import ModelSpec, TableSpec
from recsync.optim.train_spec import TrainSpec
from recsync.runtime.sim.cost import CostModel
from recsync.runtime.sim.job import SimJob
from recsync.sync.registry import strategy_config

# Criteo Kaggle (Display Advertising Challenge) distinct values of C1..C26: 33.76M in all
CRITEO_CARDINALITIES = (
    1460, 583, 10131227, 2202608, 305, 24, 12517, 633, 3, 93145, 5683, 8351593, 3194,
    27, 14992, 5461306, 10, 5652, 2173, 4, 7046547, 18, 15, 286181, 105, 142572,
)  # fmt: skip
QUALITY_VARIANTS = ("fixed", "hash LRS", "hash LRS + admission 2", "hash unbounded")
CONTINUAL_VARIANTS = ("no eviction", "ttl eviction")
SHARDS = 2  # embedding servers


@dataclasses.dataclass(frozen=True)
class Setting:
    """Sizes of the reproduction (the defaults are the reported run)."""

    scale: int = 1000
    floor: int = 3
    dim: int = 16
    fixed_cap: int = 1000  # rows of a fixed table (smaller id spaces keep theirs)
    churn: float = 0.05  # share of each feature's ids replaced a day
    quality_examples: int = 120_000
    quality_days: int = 4
    seeds: tuple[int, ...] = (0, 1, 2)
    test_examples: int = 20_000
    days: int = 10  # continual days trained (and scored on the day after each)
    per_day: int = 32_768
    ttl_days: int = 1  # eviction: rows unseen for this many days of updates
    cuts_per_day: int = 4
    deltas_per_full: int = 4
    batch_size: int = 256
    bottom_mlp: tuple[int, ...] = (64, 32)
    top_mlp: tuple[int, ...] = (64, 32)
    engine_examples: int = 60_000  # 0: no Ray runs, the cost model's ratio only
    engine_repeats: int = 2

    def table_rows(self) -> tuple[int, ...]:
        return tuple(max(c // self.scale, self.floor) for c in CRITEO_CARDINALITIES)

    def ttl_steps(self) -> int:
        """Shard updates in ttl_days days (each batch updates every shard once)."""
        return self.ttl_days * self.per_day // self.batch_size

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def synthetic(setting: Setting, seed: int, days: int, examples: int) -> SyntheticSpec:
    return SyntheticSpec(
        num_train=examples,
        num_test=setting.test_examples,
        table_rows=setting.table_rows(),
        num_days=days,
        id_churn=setting.churn,
        seed=seed,
    )


def fixed_rows(setting: Setting, task: SyntheticSpec) -> tuple[int, ...]:
    """Each fixed table's rows: its id space (over all days) up to fixed_cap."""
    return tuple(min(space, setting.fixed_cap) for space in task.id_space())


def job(setting: Setting, variant: str, task: SyntheticSpec, seed: int) -> JobSpec:
    """The job of a variant: S-EASGD, 2 trainers x 2 workers, 2 embedding servers."""
    rows = fixed_rows(setting, task)
    tables = tuple(TableSpec(f"C{f + 1}", r, setting.dim) for f, r in enumerate(rows))
    bound = sum(rows) // SHARDS
    hash_tables = {
        "fixed": None,
        "hash LRS": HashTables(max_rows=bound),
        "hash LRS + admission 2": HashTables(max_rows=bound, admission=Admission(min_count=2)),
        "hash unbounded": HashTables(),
        "no eviction": HashTables(),
        "ttl eviction": HashTables(eviction=Eviction(ttl_steps=setting.ttl_steps())),
    }[variant]
    if hash_tables is None:
        data = dataclasses.replace(task, bucket_rows=rows)
    else:
        data = dataclasses.replace(task, keyed=True)
    model = ModelSpec(
        tables=tables,
        bottom_mlp=setting.bottom_mlp,
        top_mlp=setting.top_mlp,
        hash_tables=hash_tables,
    )
    return JobSpec(
        model,
        TrainSpec(batch_size=setting.batch_size, seed=seed),
        ClusterSpec(2, 2, SHARDS, num_sync_servers=1),
        strategy_config("easgd"),
        data,
    )


def quality_run(item: tuple[Setting, str, int]) -> dict[str, Any]:
    """One variant and seed trained on the multi-day task, scored on the last day."""
    setting, variant, seed = item
    task = synthetic(setting, seed, setting.quality_days, setting.quality_examples)
    spec = job(setting, variant, task, seed)
    start = time.perf_counter()
    summary = SimJob(spec, plan_for(spec), CostModel()).run()
    rows = summary.get("embedding_rows") or {}
    memory = sum(fixed_rows(setting, task))
    bound = spec.model.hash_tables.max_rows if spec.model.hash_tables else None
    return {
        "variant": variant,
        "seed": seed,
        "test_auc": summary["test_auc"],
        "test_ne": summary["test_ne"],
        "teacher_auc": SyntheticTask(task).teacher_auc(),
        "rows_budget": memory if variant != "hash unbounded" else None,
        "max_rows_per_shard": bound,
        "rows_live": rows.get("live", memory),
        "inserted": rows.get("inserted"),
        "evicted": rows.get("evicted"),
        "refused_lookups": rows.get("refused_lookups"),
        "admitted_lookups": rows.get("admitted_lookups"),
        "sim_eps": summary["eps"],
        "wall_s": time.perf_counter() - start,
    }


def continual_run(item: tuple[Setting, str]) -> dict[str, Any]:
    """`days` jobs, each resumed from the day before's end state, scored on the next day;
    with eviction, every cut's state (and each day's end) is also written as full-only and
    as full + delta checkpoints."""
    setting, variant = item
    task = synthetic(setting, 0, setting.days + 1, (setting.days + 1) * setting.per_day)
    scorer = SyntheticTask(task)
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
                job(setting, variant, task, 0), resume=state, stop_after_examples=setting.per_day
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
            test = scorer.day_test_set(day + 1, setting.test_examples)[0]
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
                    "shard_clock": max(int(s["clock"]) for s in state.shards),
                }
            )
    return {
        "variant": variant,
        "ttl_steps": setting.ttl_steps() if writers else None,
        "days": days,
        "checkpoints": {kind: w.stats() for kind, w in writers.items()},
    }


def engine_eps(setting: Setting, progress: Progress | None) -> dict[str, Any]:
    """Examples/s of fixed tables (every id its own row) vs unbounded hash tables on the
    Ray engine (a local Ray on this machine's CPUs), paired run by run."""
    import ray

    from recsync.runtime.ray.job import connect, run_job

    task = dataclasses.replace(
        synthetic(setting, 0, 1, setting.engine_examples), id_churn=0.0, num_test=2_000
    )
    full = dataclasses.replace(setting, fixed_cap=max(task.table_rows))
    specs = {
        "fixed": job(full, "fixed", task, 0),
        "hash": job(full, "hash unbounded", task, 0),
    }
    eps: dict[str, list[float]] = {name: [] for name in specs}
    connect(None, 2)
    try:
        for _ in range(setting.engine_repeats):
            for name, spec in specs.items():
                eps[name].append(run_job(spec)["eps"])
                if progress:
                    progress(f"engine {name}: {eps[name][-1]:,.0f} ex/s")
    finally:
        ray.shutdown()
    ratios = [h / f for h, f in zip(eps["hash"], eps["fixed"], strict=True)]
    return {"examples": setting.engine_examples, "eps": eps, "ratios": ratios}


def _part(
    out_dir: Path,
    name: str,
    setting: Setting,
    compute: Callable[[], Any],
    progress: Progress | None,
) -> dict[str, Any]:
    """A part's result and the seconds it took: reused from parts/NAME.json if it was saved
    for this setting, else computed (`compute()`) and saved."""
    path = out_dir / "parts" / f"{name}.json"
    if path.exists():
        saved: dict[str, Any] = json.loads(path.read_text())
        if saved["setting"] == json.loads(json.dumps(setting.as_dict())):
            if progress:
                progress(f"{name}: reused {path}")
            return saved
    if progress:
        progress(f"{name}: running")
    start = time.perf_counter()
    result = compute()
    saved = {"setting": setting.as_dict(), "result": result}
    saved["seconds"] = time.perf_counter() - start
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(saved, indent=1))
    return saved


def reproduce(
    out_dir: Path, progress: Progress | None = None, setting: Setting | None = None
) -> dict[str, Any]:
    """Run (or reuse) every part, write results.json, report.md and the figures."""
    setting = setting or Setting()
    out_dir.mkdir(parents=True, exist_ok=True)
    items = [(setting, v, s) for s in setting.seeds for v in QUALITY_VARIANTS]
    continual = [(setting, v) for v in CONTINUAL_VARIANTS]
    computes: dict[str, Callable[[], Any]] = {
        "quality": lambda: run_in_processes(quality_run, items, progress),
        "continual": lambda: run_in_processes(continual_run, continual, progress),
    }
    if setting.engine_examples:
        computes["engine"] = lambda: engine_eps(setting, progress)
    parts = {
        name: _part(out_dir, name, setting, compute, progress) for name, compute in computes.items()
    }
    results = {
        "setting": setting.as_dict(),
        "table_rows": setting.table_rows(),
        "engine": None,
        **{name: part["result"] for name, part in parts.items()},
        "seconds": {name: part["seconds"] for name, part in parts.items()},
    }
    write_report(results, out_dir)
    (out_dir / "results.json").write_text(json.dumps(results, indent=1))
    return results
