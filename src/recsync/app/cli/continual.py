"""`recsync continual`: train day after day, each day's model scored on the next day."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from recsync.app.cli.common import (
    ConfigOption,
    ForceOption,
    NameOption,
    SetOption,
    fail,
    fail_interrupted,
    warn_deprecations,
)
from recsync.app.config.load import load_config, parse_overrides
from recsync.app.runs.continual import parse_schedule, run_continual
from recsync.app.runs.continual_options import (
    ENGINES,
    OPTIONS,
    ContinualOptions,
    parse_controller,
)
from recsync.app.runs.run_dir import CONFIG_TOML, RunDir
from recsync.errors import ConfigError, JobFailed, RecsyncError
from recsync.io.storage import day_partitions
from recsync.io.urls import shown, with_endpoint


def continual(
    config: ConfigOption = None,
    name: NameOption = None,
    force: ForceOption = False,
    set_: SetOption = None,
    engine: Annotated[
        str | None,
        typer.Option(
            metavar="ENGINE",
            help=f"Where each day trains: one of {', '.join(ENGINES)} (default sim).",
        ),
    ] = None,
    schedule: Annotated[
        str | None,
        typer.Option(
            metavar="DAY=NAME,...",
            help="Strategy changes at day boundaries, e.g. '2=gba,5=sync'.",
        ),
    ] = None,
    resume: Annotated[
        Path | None,
        typer.Option(
            metavar="RUN", help="Continue this continual run directory from its next day."
        ),
    ] = None,
    day_file: Annotated[
        list[str] | None,
        typer.Option(
            metavar="FILE",
            help="A day's data file, in order (repeat: --day-file d0.csv --day-file d1.csv "
            "...); data.source gives their format. Default: the synthetic task's days.",
        ),
    ] = None,
    days: Annotated[
        str | None,
        typer.Option(
            metavar="ROOT",
            help="A folder or URL of day partitions (day=YYYY-MM-DD folders, or a glob of "
            "them: 's3://bucket/clicks/day=2026-12-0*'): each is a day, in date order.",
        ),
    ] = None,
    scenario: Annotated[
        Path | None,
        typer.Option(
            metavar="FILE",
            help="A TOML file of the cluster's changes day by day: stragglers, trainers, "
            "slow servers (docs/continual.md).",
        ),
    ] = None,
    controller: Annotated[
        str | None,
        typer.Option(
            metavar="RULES",
            help="Switch strategies automatically from what each stretch measured: "
            "'default', or thresholds and strategies as KEY=VALUE,... (e.g. "
            "'spread_on=1.3,stragglers=async'; docs/strategies.md).",
        ),
    ] = None,
    segments: Annotated[
        int | None,
        typer.Option(
            metavar="N",
            help="Stretches a day trains in, the controller deciding after each (default 1).",
        ),
    ] = None,
    progress: Annotated[
        bool, typer.Option(show_default=False, help="Show each day's progress (default).")
    ] = True,
) -> None:
    """Train day after day, each day's model scored on the next day.

    The days are the synthetic task's data.synthetic.num_days days, or --day-file files;
    each day resumes from the previous day's checkpoint. Per-day records go to
    metrics.jsonl and days.png."""
    console = Console(emoji=False)
    try:
        if days is not None:
            if day_file:
                raise ConfigError("continual: give the days by --days or by --day-file, not both")
            day_file = _partition_days(days, config, set_, console)
        cfg, root = _setup(config, name, force, set_, resume, day_file)
        warn_deprecations(cfg)
        options = ContinualOptions(
            engine=engine,
            schedule=parse_schedule(schedule) if schedule is not None else None,
            day_files=day_file,
            scenario=str(scenario) if scenario is not None else None,
            controller=parse_controller(controller) if controller is not None else None,
            segments=segments,
        )
        records = run_continual(
            cfg,
            root,
            options,
            progress,
            on_day=lambda r: console.print(_day_line(r), highlight=False),
        )
    except (RecsyncError, JobFailed, OSError) as error:
        fail(error)
    except KeyboardInterrupt as error:
        fail_interrupted(str(error) or "SIGINT")
    table = Table(title=f"recsync continual ({records[0]['engine'] if records else engine})")
    columns = ("day", "strategy", "examples", "EPS, whole day", "next-day AUC", "next-day logloss")
    for column in columns:
        table.add_column(column)
    for r in records:
        table.add_row(
            str(r["day"]),
            r["strategy"],
            f"{r['examples']:,}",
            f"{r['eps']:,.0f}",
            f"{r['next_day_auc']:.4f}",
            f"{r['next_day_logloss']:.4f}",
        )
    console.print(table)
    console.print(f"run dir: {root}", highlight=False)


def _setup(
    config: Path | None,
    name: str | None,
    force: bool,
    set_: list[str] | None,
    resume: Path | None,
    day_files: list[str] | None,
) -> tuple[Any, Path]:
    overrides = parse_overrides(set_ or [])
    if day_files and len(day_files) >= 2:  # the base config reads as day 0's
        overrides = {"data.path": day_files[0], "data.test_path": day_files[1], **overrides}
    if resume is not None:
        base = Path(resume) / CONFIG_TOML
        if not base.exists():
            raise ConfigError(f"--resume {resume}: no {CONFIG_TOML} there (not a continual run)")
        if config is not None or overrides:
            raise ConfigError("--resume continues a run as it was configured: drop --config/--set")
        return load_config(base), Path(resume)
    if name is not None:
        overrides["run.name"] = name
    cfg = load_config(config, overrides)
    existing = Path(cfg.run.runs_dir) / (cfg.run.name or "")
    if cfg.run.name and not force and (existing / CONFIG_TOML).exists():
        raise ConfigError(
            f"{existing} holds a continual run; continue it with --resume {existing}, pass "
            "--force to start it over, or choose another --name"
        )
    root = RunDir.create(cfg.run.runs_dir, cfg.run.name, force=force).path
    (root / OPTIONS).unlink(missing_ok=True)  # a new run (or one started over): its own options
    return cfg, root


def _partition_days(
    days: str, config: Path | None, set_: list[str] | None, console: Console
) -> list[str]:
    """The day partitions under `days`, in date order, said on the terminal; listed at the
    store [data.storage] names (in the config or --set), if it names one."""
    endpoint = parse_overrides(set_ or []).get("data.storage.endpoint")
    if endpoint is None and config is not None and config.exists():
        tree = tomllib.loads(config.read_text())
        endpoint = tree.get("data", {}).get("storage", {}).get("endpoint")
    partitions = day_partitions(with_endpoint(days, endpoint))
    for day, (date, folder) in enumerate(partitions):
        console.print(f"day {day}: {date} ({shown(folder)})", highlight=False)
    # the endpoint travels in the config, not in each day's data.path
    return [shown(folder) if endpoint else folder for _, folder in partitions]


def _day_line(record: dict[str, Any]) -> str:
    line = (
        f"day {record['day']:>2} ({record['strategy']}): {record['examples']:,} examples at "
        f"{record['eps']:,.0f}/s; next-day AUC {record['next_day_auc']:.4f}"
    )
    if record["data"] != "synthetic":
        line += f"\n    read {shown(str(record['data']))}"
    for stretch in record["stretches"]:
        if "reason" in stretch:
            line += f"\n    {stretch['run_dir']}: -> {stretch['decision']} ({stretch['reason']})"
    return line
