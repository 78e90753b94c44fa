"""`recsync continual`: a model trained day after day, each day's model evaluated on the next
day's data (the protocol of the GBA and Liu & Zhao papers), on the simulator or the engine.

A continual run's directory `runs/<name>/` holds the base config (config.toml), one run
directory per stretch trained (day-00/, day-01/, ...; with segments, day-01/ then day-01.1/,
...: that stretch's config, metrics, summary, plots and end checkpoint), `metrics.jsonl`
with one record per day (its strategies, cluster, speed, measures, decisions and next-day
quality) and `days.png`. Day d resumes from day d-1's checkpoint and trains exactly day d's
examples. The strategy may change at a day boundary (`schedule`), or wherever the automatic
controller (strategy/controller.py) decides, at a day boundary or between a day's segments:
through the same checkpoint path as `--resume --strategy`, keeping every other
hyper-parameter. A `scenario` file changes the cluster day by day (app/runs/scenario.py).
A run stopped between days (or during one) continues with the options it was started with:
days with a record are kept, the next one restarts from the last kept day's checkpoint.

The data is a synthetic task of `data.synthetic.num_days` days whose teacher drifts by
`data.synthetic.drift` a day, or a list of day files (app/runs/continual_days.py).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from recsync.app.config.load import load_config
from recsync.app.config.schema import Config
from recsync.app.runs.checkpoints import load_run_checkpoint
from recsync.app.runs.continual_days import FileDays, SyntheticDays
from recsync.app.runs.continual_options import ContinualOptions, resolve_options
from recsync.app.runs.continual_plot import plot_days
from recsync.app.runs.continual_record import (
    day_record,
    measured_of,
    stretch_measures,
    stretch_record,
)
from recsync.app.runs.distributed import run_distributed
from recsync.app.runs.run_dir import CONFIG_TOML, METRICS, SUMMARY, RunDir, json_ready, toml_text
from recsync.app.runs.scenario import Scenario
from recsync.app.runs.simulate import run_simulation
from recsync.coordinator.checkpoint import JobState
from recsync.errors import ConfigError, JobFailed
from recsync.strategy.controller import Controller

DAYS_PLOT = "days.png"


def day_dir_name(day: int, segment: int = 0) -> str:
    return f"day-{day:02d}" if segment == 0 else f"day-{day:02d}.{segment}"


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


Runner = Callable[[Config, RunDir, bool, JobState | None, int | None], dict[str, Any]]


def run_continual(
    config: Config,
    root: Path,
    options: ContinualOptions | None = None,
    progress: bool = True,
    on_day: Callable[[dict[str, Any]], None] | None = None,
) -> list[dict[str, Any]]:
    """Train every remaining day under `root` (days already there, with a record, are kept)
    and return every day's record. `options` (engine, schedule, day files, scenario,
    controller, segments) are kept with the run: a field left None means "as the run was
    started" (or the default, for a new run)."""
    base = root / CONFIG_TOML
    if not base.exists():
        root.mkdir(parents=True, exist_ok=True)
        base.write_text(toml_text(config.dump()))
    opts = resolve_options(root, options or ContinualOptions())
    days = FileDays(config, opts.day_files) if opts.day_files else SyntheticDays(config)
    scenario = Scenario.read(opts.scenario) if opts.scenario else None
    names = set(opts.schedule.values()) | set(opts.controller.strategies if opts.controller else ())
    for name in sorted(names - {config.strategy.name}):
        try:  # a wrong name fails before day 0, not days later
            load_config(base, {}, {"strategy": {"name": name}})
        except ConfigError as error:
            raise ConfigError(f"strategy {name!r} (schedule or controller): {error}") from None
    for day in range(days.count - 1):  # a scenario or stretch that cannot run fails now
        days.stretches(day, opts.segments)
    records = _kept_days(root)
    controller = _replayed(Controller(opts.controller), records) if opts.controller else None
    run: Runner = run_simulation if opts.engine == "sim" else run_distributed
    for day in range(len(records), days.count - 1):
        state = None
        if day > 0:
            state, _ = load_run_checkpoint(root / records[-1]["run_dirs"][-1])
            state = days.carried(state)
        planned = strategy_of_day(day, opts.schedule, config.strategy.name)
        name = records[-1]["next_strategy"] if records and controller else planned
        stretches: list[dict[str, Any]] = []
        summaries: list[dict[str, Any]] = []
        for segment, stop_after in enumerate(days.stretches(day, opts.segments)):
            sections = {} if name == config.strategy.name else {"strategy": {"name": name}}
            run_name = day_dir_name(day, segment)
            elapsed = sum(s["train_seconds"] for s in summaries)
            condition = scenario.overrides(day, config, elapsed) if scenario else {}
            overrides = {"run.name": run_name, **days.overrides(day), **condition}
            day_config = load_config(base, overrides, sections)
            run_dir = RunDir.create(root, run_name, force=True)
            summary = run(day_config, run_dir, progress, state, stop_after)
            if summary.get("interrupted"):
                raise JobFailed(
                    f"continual: day {day} interrupted ({summary['interrupted']}); continue "
                    f"with recsync continual --resume {root}"
                )
            state, _ = load_run_checkpoint(run_dir.path)
            measured = stretch_measures(summary, name)
            last = segment == opts.segments - 1
            decision = controller.decide(measured, day_boundary=last) if controller else None
            stretches.append(stretch_record(run_name, measured, decision))
            summaries.append(summary)
            if decision is not None:
                name = decision.strategy
        assert state is not None
        days.check_end(day, state, summaries[-1])
        quality = days.next_day_quality(day, day_config, summaries[-1], state)
        cluster = scenario.describe(day, config) if scenario else None
        record = day_record(day, opts.engine, day_config, stretches, summaries, quality, cluster)
        record["next_strategy"] = name
        records.append(json_ready(record))
        with open(root / METRICS, "a") as out:
            out.write(json.dumps(records[-1]) + "\n")
        plot_days(records, root / DAYS_PLOT)
        if on_day:
            on_day(records[-1])
    return records


def _replayed(controller: Controller, records: list[dict[str, Any]]) -> Controller:
    """The controller as it was after the kept days: their stretches' measures replayed."""
    for record in records:
        stretches = record["stretches"]
        for i, stretch in enumerate(stretches):
            decision = controller.decide(measured_of(stretch), i == len(stretches) - 1)
            assert decision.strategy == stretch["decision"], "a kept day decided otherwise"
    return controller


def _kept_days(root: Path) -> list[dict[str, Any]]:
    """The records of the days already trained (a day counts once its record is written and
    its stretches' summaries are there), and the metrics file rewritten to hold exactly
    those."""
    metrics = root / METRICS
    lines = metrics.read_text().splitlines() if metrics.exists() else []
    records = [json.loads(line) for line in lines if line.strip()]
    kept: list[dict[str, Any]] = []
    for record in records:
        dirs = record.get("run_dirs", [])
        if record["day"] != len(kept) or not dirs:
            break
        if not all((root / d / SUMMARY).exists() for d in dirs):
            break
        kept.append(record)
    metrics.write_text("".join(json.dumps(r) + "\n" for r in kept))
    return kept
