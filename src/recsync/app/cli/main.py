"""The `recsync` command line: train a model, write and inspect data files.

User errors (ConfigError, DataError, unreadable files) end the command with one red line
and exit status 1, without a traceback.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from recsync.app.api import Job
from recsync.app.cli.advise import advise
from recsync.app.cli.calibrate import calibrate
from recsync.app.cli.common import (
    ConfigOption,
    ForceOption,
    NameOption,
    ProgressOption,
    SetOption,
    duration_text,
    end_of_run,
    fail,
    fail_interrupted,
    number,
    ray_text,
    skips_text,
    strategy_rows,
    warn_deprecations,
)
from recsync.app.cli.continual import continual
from recsync.app.cli.data import data_app
from recsync.app.cli.reproduce import reproduce_app
from recsync.app.config.load import load_config, parse_overrides
from recsync.app.runs.compare import compare_rows, plot_runs
from recsync.app.runs.cost_profile import simulation_cost
from recsync.app.runs.distributed import job_spec
from recsync.app.runs.export import export_run, predict_file
from recsync.app.runs.plan_view import plan_table
from recsync.app.runs.readers_plan import readers_text
from recsync.coordinator.spec import plan_for
from recsync.errors import JobFailed, RecsyncError
from recsync.strategy.family import family_of
from recsync.tools.box.cli import box_app

app = typer.Typer(
    name="recsync",
    help="Train recommendation models with switchable synchronization strategies.",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,  # click's help: wrapped to the terminal, at most 80 columns
    pretty_exceptions_show_locals=False,
)
app.add_typer(data_app, name="data")
app.add_typer(reproduce_app, name="reproduce")
app.add_typer(box_app, name="box")
app.command()(calibrate)
app.command()(advise)
app.command()(continual)


def _job(
    config: Path | None,
    set_: list[str] | None,
    extra: dict[str, Any],
    resume: Path | None = None,
    strategy: str | None = None,
) -> Job:
    """The job the options say: the defaults, the file, `extra`, then --set; with
    `resume` (a run dir), that run continued, its [strategy] replaced by `strategy` if
    given (the other hyper-parameters stay)."""
    overrides = {**extra, **parse_overrides(set_ or [])}
    if resume is not None:
        return Job.resume(resume, strategy, overrides, config)
    if strategy is not None:
        overrides["strategy.name"] = strategy
    return Job(path=config, overrides=overrides)


RunArgument = Annotated[
    Path, typer.Argument(metavar="RUN", help="A run directory with a checkpoint.")
]
ResumeOption = Annotated[
    Path | None,
    typer.Option(
        metavar="RUN",
        help="Continue from this run directory's checkpoint; its config is the base.",
    ),
]
StrategyOption = Annotated[
    str | None,
    typer.Option(metavar="NAME", help="Strategy name (with --resume: switch to it)."),
]
EpochsOption = Annotated[
    int | None,
    typer.Option(
        metavar="N", help="Passes over the training data (train.epochs); later ones shuffled."
    ),
]
StopAfterOption = Annotated[
    int | None,
    typer.Option(
        metavar="N", help="Hand out at most N examples, then stop and write the checkpoint."
    ),
]


@app.command()
def train(
    config: ConfigOption = None,
    name: NameOption = None,
    force: ForceOption = False,
    set_: SetOption = None,
    progress: ProgressOption = True,
    address: Annotated[
        str | None,
        typer.Option(
            metavar="ADDRESS",
            help="Join this Ray cluster (auto, or HEAD_IP:6379); default: start a local one.",
        ),
    ] = None,
    resume: ResumeOption = None,
    strategy: StrategyOption = None,
    stop_after: StopAfterOption = None,
    epochs: EpochsOption = None,
) -> None:
    """Train a job on the Ray engine.

    Train on the data (train.epochs passes, default one) and write the config, metrics,
    summary, plots and a checkpoint to a run directory. A distributed strategy runs on Ray
    (a local one, or the cluster at --address); the reference strategy trains in this
    process (no --resume or --stop-after). --resume RUN --strategy OTHER continues RUN
    under OTHER."""
    try:
        extra: dict[str, Any] = {} if epochs is None else {"train.epochs": epochs}
        job = _job(config, set_, extra, resume, strategy)
        summary = job.train(address, name, force, progress, stop_after)
    except (RecsyncError, JobFailed, OSError) as error:
        fail(error)
    except KeyboardInterrupt as error:
        fail_interrupted(str(error) or "SIGINT")
    table = Table(title="recsync train", show_header=False)
    table.add_row("run dir", summary["run_dir"])
    table.add_row("strategy", summary.get("strategy", "reference (single process)"))
    if "workers_per_trainer" in summary:
        kind = "processes" if summary.get("worker_processes") else "threads"
        table.add_row(
            "trainers x workers",
            f"{summary['num_trainers']} x {summary['workers_per_trainer']} ({kind})",
        )
    table.add_row("examples trained", f"{summary['examples_trained']:,}")
    eps_rows(table, summary)
    if "elp" in summary:
        table.add_row("ELP (examples in flight)", f"{summary['elp']:,}")
        strategy_rows(table, summary)
    table.add_row("teacher AUC (best)", number(summary["teacher_auc"]))
    table.add_row("test AUC", number(summary["test_auc"]))
    table.add_row("test NE", number(summary["test_ne"]))
    table.add_row("test logloss", number(summary["test_logloss"]))
    table.add_row("calibration", number(summary["test_calibration"], 3))
    if job.validated.data.source != "synthetic":
        table.add_row("skipped lines", skips_text(summary["skipped"]))
    if "ray" in summary:
        table.add_row("Ray cluster", ray_text(summary["ray"]))
    table.add_row("wall time", duration_text(summary["wall_seconds"]))
    Console(emoji=False).print(table)
    end_of_run(summary)


@app.command()
def simulate(
    config: ConfigOption = None,
    name: NameOption = None,
    force: ForceOption = False,
    set_: SetOption = None,
    progress: ProgressOption = True,
    profile: Annotated[
        Path | None,
        typer.Option(
            metavar="FILE",
            help="A cost profile written by recsync calibrate ([simulate] profile).",
        ),
    ] = None,
    resume: ResumeOption = None,
    strategy: StrategyOption = None,
    stop_after: StopAfterOption = None,
    epochs: EpochsOption = None,
    math: Annotated[
        str | None,
        typer.Option(
            metavar="real|priced",
            help="real: the model's math done; priced: shapes only, no model quality "
            "([simulate] math).",
        ),
    ] = None,
) -> None:
    """Run a job in the cluster simulator.

    The job `train` would run, with the real math in virtual time (or only its shapes,
    --math priced), on a cost profile (--profile, or [simulate] profile; without one, the
    cost model's defaults). A distributed strategy only: the reference strategy is
    refused."""
    try:
        extra: dict[str, Any] = {} if epochs is None else {"train.epochs": epochs}
        job = _job(config, set_, extra, resume, strategy)
        summary = job.simulate(profile, math, name, force, progress, stop_after)
    except (RecsyncError, JobFailed, OSError) as error:
        fail(error)
    except KeyboardInterrupt as error:
        fail_interrupted(str(error) or "SIGINT")
    table = Table(title="recsync simulate (virtual time)", show_header=False)
    table.add_row("run dir", summary["run_dir"])
    table.add_row("strategy", summary["strategy"])
    table.add_row("examples trained", f"{summary['examples_trained']:,}")
    table.add_row("virtual seconds", f"{summary['train_seconds']:,.2f}")
    eps_rows(table, summary, " (virtual)")
    strategy_rows(table, summary)
    table.add_row("teacher AUC (best)", number(summary["teacher_auc"]))
    table.add_row("test AUC", number(summary["test_auc"]))
    table.add_row("test NE", number(summary["test_ne"]))
    if summary.get("math") == "priced":
        table.add_row("math", "priced: shapes only, no model quality")
    table.add_row("wall time", duration_text(summary["wall_seconds"]))
    Console(emoji=False).print(table)
    end_of_run(summary)


BestOption = Annotated[
    bool,
    typer.Option(
        show_default=False, help="The run's best evaluated model (best.pt), not its final one."
    ),
]


@app.command()
def export(
    run: RunArgument,
    out: Annotated[Path, typer.Argument(metavar="DIR", help="Directory to write the model to.")],
    best: BestOption = False,
    delta_from: Annotated[
        Path | None,
        typer.Option(
            metavar="DIR",
            help="An earlier export: also write each table's rows changed since it.",
        ),
    ] = None,
) -> None:
    """Write a run's model for serving.

    Fixed tables: one PyTorch state dict (model.pt); hash tables: id/vector Parquet files
    and a torch.export program (dense.pt2); and model.json, the architecture and data."""
    try:
        written = export_run(run, out, best, delta_from)
    except (RecsyncError, OSError) as error:
        fail(error)
    shown = ", ".join(written if len(written) <= 4 else [*written[:3], "..."])
    Console(emoji=False).print(f"exported {run} to {out}: {shown}")


@app.command()
def predict(
    run: RunArgument,
    data: Annotated[Path, typer.Argument(metavar="FILE", help="A file of the run's data format.")],
    out: Annotated[
        Path, typer.Option(metavar="FILE", help="Parquet file of label and score columns.")
    ] = Path("scores.parquet"),
    best: BestOption = False,
) -> None:
    """Score a data file with a run's model.

    Every good line of a file of the run's format; skipped lines are counted."""
    try:
        rows, skips = predict_file(run, data, out, best)
    except (RecsyncError, OSError) as error:
        fail(error)
    Console(emoji=False).print(
        f"scored {rows:,} rows of {data} into {out}; skipped lines: {skips_text(skips.as_dict())}"
    )


@app.command()
def compare(
    runs: Annotated[list[Path], typer.Argument(metavar="RUN", help="Run directories.")],
    out: Annotated[Path, typer.Option(metavar="FILE", help="Figure of their curves (PNG).")] = Path(
        "compare.png"
    ),
) -> None:
    """Compare runs: final metrics and test curves.

    Several runs' final metrics in one table, and their test curves on one figure."""
    try:
        rows = compare_rows(runs)
        figure = plot_runs(runs, out)
    except (RecsyncError, OSError, ValueError) as error:
        fail(error)
    table = Table(title="recsync compare")
    columns = (
        "run",
        "engine",
        "strategy",
        "examples",
        "EPS, steady",
        "EPS, whole run",
        "test AUC",
        "test NE",
        "logloss",
    )
    for column in columns:
        table.add_column(column)
    for row in rows:
        table.add_row(
            escape(row["run"]),
            str(row["engine"]),
            escape(str(row["strategy"])),
            f"{row['examples_trained']:,}",
            "-" if row["eps_steady"] is None else f"{row['eps_steady']:,.0f}",
            f"{row['eps']:,.0f}",
            number(row["test_auc"]),
            number(row["test_ne"]),
            number(row["test_logloss"]),
        )
    Console(emoji=False).print(table)
    Console(emoji=False).print(f"curves: {figure}")


def eps_rows(table: Table, summary: dict[str, Any], where: str = "") -> None:
    """A run's examples/s: the steady rate (docs/simulator.md, "Examples per second"), where
    the run has one (a distributed or simulated run), and over the whole run."""
    if summary.get("eps_steady") is not None:
        table.add_row(f"EPS, steady{where}", f"{summary['eps_steady']:,.0f}")
    table.add_row(f"EPS, whole run{where}", f"{summary['eps']:,.0f}")


@app.command()
def plan(config: ConfigOption = None, set_: SetOption = None) -> None:
    """Print the placement plan of a job.

    Tables on embedding servers, the dense part's slices on sync or dense servers
    (hierarchical training: each operator on the trainers or a group PS, with the
    estimated utilisation before and after refinement)."""
    try:
        cfg = load_config(config, parse_overrides(set_ or []))
        warn_deprecations(cfg)
        spec = job_spec(cfg)
        job_plan = plan_for(spec)
    except (RecsyncError, OSError) as error:
        fail(error)
    dense_role = family_of(spec.strategy).dense_role
    label = "sync" if dense_role is None else dense_role.value.removesuffix("-server")
    console = Console(emoji=False)
    console.print(plan_table(job_plan, spec.model.tables, label))
    for view in family_of(spec.strategy).plan_view(spec):
        console.print(view)
    console.print(readers_text(spec, simulation_cost(cfg)))


if __name__ == "__main__":
    app()
