"""`recsync continual`: a model trained day after day, each day's model evaluated on the next
day's data (the protocol of the GBA and Liu & Zhao papers), on the simulator or the engine.

A continual run's directory `runs/<name>/` holds the base config (config.toml), one run
directory per trained day (day-00/, day-01/, ...: that day's config, metrics, summary, plots
and end checkpoint), `metrics.jsonl` with one record per day (its strategy, cluster, speed and
next-day quality) and `days.png`. Day d resumes from day d-1's checkpoint and trains exactly
day d's examples; the strategy may change at a day boundary (`schedule`), through the same
checkpoint path as `--resume --strategy`, keeping every other hyper-parameter. A run stopped
between days (or during one) continues with `resume=True`: days with a summary are kept, the
next one restarts from the last kept day's checkpoint.

The data is a synthetic task of `data.synthetic.num_days` days whose teacher drifts by
`data.synthetic.drift` a day, or a list of day files (one file, or one file list, a day, in
the run's `data.source` format): days 0 .. N-2 are trained (each day file whole), days 1 ..
N-1 evaluated (a day file: its first `data.test_max_examples` examples).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from recsync.app.config.load import load_config
from recsync.app.config.schema import Config
from recsync.app.runs.checkpoints import load_run_checkpoint
from recsync.app.runs.continual_plot import plot_days
from recsync.app.runs.distributed import job_spec, run_distributed
from recsync.app.runs.run_dir import (
    CONFIG_TOML,
    METRICS,
    SUMMARY,
    RunDir,
    json_ready,
    toml_text,
)
from recsync.app.runs.simulate import run_simulation
from recsync.coordinator.checkpoint import JobState
from recsync.coordinator.outcome import evaluate_model
from recsync.coordinator.spec import plan_for
from recsync.data.synthetic import SyntheticSpec, SyntheticTask
from recsync.errors import ConfigError, JobFailed

ENGINES = ("sim", "ray")
DAYS_PLOT = "days.png"
OPTIONS = "continual.json"  # the run's engine, schedule and day files, for --resume
NEXT_DAY_TEST = 20_000  # held-out examples of the next day each day's model is scored on


def day_dir_name(day: int) -> str:
    return f"day-{day:02d}"


def parse_schedule(text: str | None) -> dict[int, str]:
    """'0=sync,3=gba,6=sync' -> {0: 'sync', 3: 'gba', 6: 'sync'}: from day k on, strategy."""
    if not text:
        return {}
    schedule = {}
    for part in text.split(","):
        day, sep, name = part.strip().partition("=")
        if not sep or not day.strip().isdigit() or not name.strip():
            raise ConfigError(f"--schedule: {part.strip()!r} is not DAY=STRATEGY (e.g. 3=gba)")
        schedule[int(day)] = name.strip()
    return schedule


def strategy_of_day(day: int, schedule: dict[int, str], default: str) -> str:
    started = [d for d in schedule if d <= day]
    return schedule[max(started)] if started else default


def day_sizes(config: Config) -> tuple[SyntheticSpec, list[int]]:
    """The synthetic task and the examples of each of its days (as the reader cuts them)."""
    specs = config.to_specs()
    if specs.files is not None or specs.synthetic is None:
        raise ConfigError(
            "continual: file data needs its day files in order (--day-file, repeated); "
            "without them, the synthetic task's days (data.source = 'synthetic')"
        )
    days = specs.synthetic.num_days
    if days < 2:
        raise ConfigError(
            f"continual: data.synthetic.num_days = {days}; it needs >= 2 days (each day's "
            "model is evaluated on the next day)"
        )
    total = specs.synthetic.num_train
    if specs.train.epochs != 1:
        raise ConfigError("continual: trains each day's examples once (train.epochs = 1)")
    sizes, batch = specs.synthetic.day_sizes(), specs.train.batch_size
    if any(size % batch for size in sizes):
        raise ConfigError(
            f"continual: each day's examples must be a whole number of batches: "
            f"data.synthetic.num_train = {total:,} over {days} days is {sizes[0]:,} a day, "
            f"not a multiple of train.batch_size = {batch} (try num_train = "
            f"{days * batch * max(1, sizes[0] // batch):,})"
        )
    return specs.synthetic, sizes


Runner = Callable[[Config, RunDir, bool, JobState | None, int | None], dict[str, Any]]


def run_continual(
    config: Config,
    root: Path,
    engine: str | None = None,
    schedule: dict[int, str] | None = None,
    progress: bool = True,
    on_day: Callable[[dict[str, Any]], None] | None = None,
    day_files: list[str] | None = None,
) -> list[dict[str, Any]]:
    """Train every remaining day under `root` (days already there, with a summary, are kept)
    and return every day's record. `engine` (default sim), `schedule` and `day_files` (the
    days' data files, in order; else the synthetic task's days) are kept with the run: None
    means "as the run was started"."""
    if engine is not None and engine not in ENGINES:
        raise ConfigError(f"continual: engine must be one of {list(ENGINES)}, got {engine!r}")
    base = root / CONFIG_TOML
    if not base.exists():
        root.mkdir(parents=True, exist_ok=True)
        base.write_text(toml_text(config.dump()))
    engine, schedule, day_files = _options(root, engine, schedule, day_files)
    days = _FileDays(config, day_files) if day_files else _SyntheticDays(config)
    for name in sorted(set(schedule.values()) - {config.strategy.name}):
        try:  # a wrong name fails before day 0, not days later
            load_config(base, {}, {"strategy": {"name": name}})
        except ConfigError as error:
            raise ConfigError(f"--schedule: strategy {name!r}: {error}") from None
    records = _kept_days(root)
    run: Runner = run_simulation if engine == "sim" else run_distributed
    for day in range(len(records), days.count - 1):
        state = None
        if day > 0:
            state, _ = load_run_checkpoint(root / day_dir_name(day - 1))
            state = days.carried(state)
        name = strategy_of_day(day, schedule, config.strategy.name)
        sections = {} if name == config.strategy.name else {"strategy": {"name": name}}
        overrides = {"run.name": day_dir_name(day), **days.overrides(day)}
        day_config = load_config(base, overrides, sections)
        run_dir = RunDir.create(root, day_dir_name(day), force=True)
        summary = run(day_config, run_dir, progress, state, days.stop_after(day))
        if summary.get("interrupted"):
            raise JobFailed(
                f"continual: day {day} interrupted ({summary['interrupted']}); continue with "
                f"recsync continual --resume {root}"
            )
        end, _ = load_run_checkpoint(run_dir.path)
        days.check_end(day, end, summary)
        quality = days.next_day_quality(day, day_config, summary, end)
        record = json_ready(_day_record(day, name, engine, day_config, summary, quality))
        records.append(record)
        with open(root / METRICS, "a") as out:
            out.write(json.dumps(record) + "\n")
        plot_days(records, root / DAYS_PLOT)
        if on_day:
            on_day(record)
    return records


def _kept_days(root: Path) -> list[dict[str, Any]]:
    """The records of the days already trained (a day counts once its summary is written),
    and the metrics file rewritten to hold exactly those."""
    metrics = root / METRICS
    lines = metrics.read_text().splitlines() if metrics.exists() else []
    records = [json.loads(line) for line in lines if line.strip()]
    kept: list[dict[str, Any]] = []
    for record in records:
        if record["day"] != len(kept) or not (root / day_dir_name(len(kept)) / SUMMARY).exists():
            break
        kept.append(record)
    metrics.write_text("".join(json.dumps(r) + "\n" for r in kept))
    return kept


class _SyntheticDays:
    """The synthetic task's days: day d is the stream's next `sizes[d]` examples; the next
    day is scored on its own held-out examples."""

    def __init__(self, config: Config):
        synthetic, self.sizes = day_sizes(config)
        self.task = SyntheticTask(synthetic)
        self.count = len(self.sizes)

    def overrides(self, day: int) -> dict[str, Any]:
        return {}

    def carried(self, state: JobState) -> JobState:
        return state

    def stop_after(self, day: int) -> int | None:
        return self.sizes[day]

    def check_end(self, day: int, end: JobState, summary: dict[str, Any]) -> None:
        expected = sum(self.sizes[: day + 1])
        if end.data_position != expected:
            raise ConfigError(
                f"continual: day {day} ended at example {end.data_position:,}, not at the "
                f"day's end {expected:,} (did the job stop early?)"
            )

    def next_day_quality(
        self, day: int, config: Config, summary: dict[str, Any], end: JobState
    ) -> dict[str, float]:
        spec = job_spec(config)
        test, _ = self.task.day_test_set(day + 1, NEXT_DAY_TEST)
        weights = [shard["weight"] for shard in end.shards]
        layout = plan_for(spec).embeddings.layout
        quality = evaluate_model(spec, layout, end.dense, weights, test)
        return {"auc": quality.auc, "logloss": quality.logloss, "ne": quality.ne}


class _FileDays:
    """Day files: day d trains file d whole, from its first example, and its run's held-out
    set is file d+1."""

    def __init__(self, config: Config, files: list[str]):
        if config.data.source == "synthetic":
            raise ConfigError(
                "continual: day files need data.source set to their format (e.g. csv, "
                "parquet, criteo, libsvm or auto)"
            )
        if len(files) < 2:
            raise ConfigError(
                f"continual: {len(files)} day file(s); it needs >= 2 (each day's model is "
                "evaluated on the next day)"
            )
        self.files, self.count = files, len(files)

    def overrides(self, day: int) -> dict[str, Any]:
        return {
            "data.path": self.files[day],
            "data.test_path": self.files[day + 1],
            "data.test_fraction": 0.0,
        }

    def carried(self, state: JobState) -> JobState:
        return dataclasses.replace(state, data_position=0)

    def stop_after(self, day: int) -> int | None:
        return None

    def check_end(self, day: int, end: JobState, summary: dict[str, Any]) -> None:
        if summary["examples_trained"] == 0:
            raise ConfigError(f"continual: day {day} ({self.files[day]}) trained nothing")

    def next_day_quality(
        self, day: int, config: Config, summary: dict[str, Any], end: JobState
    ) -> dict[str, float]:
        return {k: summary[f"test_{k}"] for k in ("auc", "logloss", "ne")}


def _options(
    root: Path, engine: str | None, schedule: dict[int, str] | None, files: list[str] | None
) -> tuple[str, dict[int, str], list[str] | None]:
    """The run's engine, schedule and day files: as given when it starts, kept in
    continual.json; a resumed run reads them back (one given differently is refused)."""
    path = root / OPTIONS
    if not path.exists():
        stored = {"engine": engine or "sim", "schedule": schedule or {}, "day_files": files}
        path.write_text(json.dumps(stored))
    stored = json.loads(path.read_text())
    kept = {
        "engine": stored["engine"],
        "schedule": {int(day): name for day, name in stored["schedule"].items()},
        "day_files": stored["day_files"],
    }
    given = {"engine": engine, "schedule": schedule, "day_files": files}
    for key, value in given.items():
        if value is not None and value != kept[key]:
            raise ConfigError(
                f"continual: {root} was started with {key} {kept[key]!r}, not {value!r}"
            )
    return kept["engine"], kept["schedule"], kept["day_files"]


def _day_record(
    day: int,
    strategy: str,
    engine: str,
    config: Config,
    summary: dict[str, Any],
    quality: dict[str, float],
) -> dict[str, Any]:
    tree = config.dump()
    return {
        "day": day,
        "strategy": summary.get("strategy", strategy),
        "engine": engine,
        "num_trainers": config.cluster.num_trainers,
        "workers_per_trainer": config.cluster.workers_per_trainer,
        "stragglers": tree["cost"]["stragglers"] if engine == "sim" else None,
        "trainer_slowdown": tree["cluster"]["trainer_slowdown"],
        "examples": summary["examples_trained"],
        "eps": summary["eps"],
        "train_seconds": summary["train_seconds"],
        "data": tree["data"]["path"] if tree["data"]["source"] != "synthetic" else "synthetic",
        "next_day_auc": quality["auc"],
        "next_day_logloss": quality["logloss"],
        "next_day_ne": quality["ne"],
    }
