"""What the command modules share: the config options and the one-line error exit."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from recsync.app.config.schema import Config
from recsync.app.runs.progress import deprecated

ConfigOption = Annotated[
    Path | None,
    typer.Option(
        "--config", "-c", metavar="FILE", help="A TOML config, layered on the embedded default."
    ),
]
NameOption = Annotated[
    str | None, typer.Option(metavar="NAME", help="Run directory name (default: a timestamp).")
]
ForceOption = Annotated[
    bool, typer.Option(show_default=False, help="Overwrite a non-empty run directory.")
]
SetOption = Annotated[
    list[str] | None,
    typer.Option(
        "--set",
        metavar="KEY=VALUE",
        help="Set a config key, e.g. --set train.batch_size=128 (repeatable).",
    ),
]


ACTION_WORDS = {"rollback": "rolled back", "partial": "shard restored", "restart": "restarted"}


def fail(error: Exception) -> NoReturn:
    message = " ".join(str(error).split())
    Console(emoji=False, stderr=True, soft_wrap=True).print(
        f"[bold red]error:[/] [red]{escape(message)}[/]", highlight=False
    )
    raise typer.Exit(1)


def fail_interrupted(signal_name: str) -> NoReturn:
    """A run aborted by a signal before it could end: nothing was written past the config."""
    Console(emoji=False, stderr=True, soft_wrap=True).print(
        f"[bold red]interrupted ({escape(signal_name)}):[/] the run stopped without a checkpoint",
        highlight=False,
    )
    raise typer.Exit(128 + signal.Signals[signal_name].value)


def end_of_run(summary: dict[str, Any]) -> None:
    """After the result table: a run that trained nothing fails; an interrupted one says
    where its checkpoint is and exits with the signal's status."""
    console = Console(emoji=False, stderr=True, soft_wrap=True)
    retried = summary.get("storage_retries", 0)
    if retried:
        console.print(
            f"[yellow]storage:[/] {retried:,} reads of remote data failed for a while and were "
            "retried, each from the byte it had reached (logged on recsync.storage)",
            highlight=False,
        )
    interrupted = summary.get("interrupted")
    if interrupted:
        console.print(
            f"[yellow]interrupted ({escape(interrupted)}):[/] stopped after "
            f"{summary['examples_trained']:,} examples; continue with: recsync train "
            f"--resume {escape(summary['run_dir'])}",
            highlight=False,
        )
        raise typer.Exit(128 + signal.Signals[interrupted].value)
    if summary["examples_trained"] == 0:
        skipped = int(summary.get("skipped", {}).get("total", 0))
        why = (
            f"all {skipped:,} lines of the data were skipped (see skipped lines)"
            if skipped
            else "no data was left to train on (a resumed run whose data is used up? train "
            "more passes with --epochs N)"
        )
        fail(ValueError(f"trained 0 examples: {why}; the run's files are in {summary['run_dir']}"))


def warn_deprecations(config: Config) -> None:
    """Tell the user about keys the config gives in a deprecated way (on stderr)."""
    for message in config.deprecations():
        deprecated(message)


def duration_text(seconds: float) -> str:
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest} s" if minutes else f"{seconds:.1f} s"


def ray_text(ray: dict[str, Any]) -> str:
    """Which Ray cluster a run used, and how many CPUs it had."""
    if ray["address"] is None:
        return f"local, {ray['num_cpus']} CPUs (cluster.num_cpus; unset: the machine's cores)"
    return f"{ray['address']}: {ray['num_machines']} machine(s), {ray['num_cpus']} CPUs"


def number(value: float | None, digits: int = 4) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def skips_text(skipped: dict[str, Any]) -> str:
    if not skipped["total"]:
        return "none"
    reasons = ", ".join(f"{r} {n:,}" for r, n in sorted(skipped["by_reason"].items()))
    return f"{skipped['total']:,} ({reasons})"


def strategy_rows(table: Table, summary: dict[str, Any]) -> None:
    """The strategy's own measures (sync gap, or global steps, staleness and drops) and
    where the checkpoint went, as rows of a result table."""
    if "average_sync_gap" in summary:
        table.add_row("average sync gap", number(summary["average_sync_gap"], 2))
        per_thread = summary.get("average_sync_gap_per_thread")
        table.add_row("sync gap per worker thread", number(per_thread, 2))
    if "global_steps" in summary:
        dense = summary["dense_staleness"]
        table.add_row("global steps", f"{summary['global_steps']:,}")
        staleness = (
            f"{number(dense['mean'], 2)} / {dense['max']}"
            if dense["max"] is not None
            else "n/a (no dense servers)"
        )
        table.add_row("dense staleness mean / max", staleness)
        dropped = summary["gradients_dropped"]
        table.add_row(
            "gradients dropped", ", ".join(f"{k} {v:,}" for k, v in dropped.items()) or "0"
        )
    losses = summary.get("recovery", {}).get("losses", [])
    if losses:
        recovery = summary["recovery"]
        nodes = ", ".join(f"{loss['node']} ({ACTION_WORDS[loss['action']]})" for loss in losses)
        cost = f"{recovery['examples_replayed']:,} examples replayed"
        if recovery.get("examples_lost"):
            cost += f", the updates of {recovery['examples_lost']:,} lost"
        table.add_row("nodes lost", f"{nodes}: {cost}")
    rows = summary.get("embedding_rows")
    if rows is not None:
        table.add_row(
            "hash table rows",
            f"{rows['live']:,} live ({rows['inserted']:,} inserted, {rows['evicted']:,} "
            f"evicted); lookups refused by admission {rows['refused_lookups']:,}",
        )
    checkpoint = summary.get("checkpoint")
    if checkpoint and "path" in checkpoint:
        written = checkpoint.get("written", {})
        deltas = written.get("delta", {}).get("count", 0)
        more = f"; {deltas} delta checkpoints while training" if deltas else ""
        table.add_row(
            "checkpoint",
            f"{checkpoint['path']} (position "
            f"{_position_text(checkpoint['data_position'], checkpoint.get('data_unit'))}, "
            f"{checkpoint['in_flight_examples']:,} examples were in flight at the stop{more})",
        )


def _position_text(position: int, unit: str | None) -> str:
    """A checkpoint's position and what it counts, where not examples (readers sharing
    files by blocks: slots of them)."""
    if unit is None:
        return f"{position:,}"
    kind, _, size = unit.partition("/")
    if kind == "gzfiles":  # a block is a whole file: say how far into the files
        files, slots = divmod(position, int(size))
        return f"{files:,} gzip files read" + (
            f" and {slots:,} examples of the next" if slots else ""
        )
    blocks, what = {
        "rowgroups": ("row groups of up to", "rows"),
        "bytes": ("byte blocks of", "bytes"),
    }.get(kind, ("line blocks of", "lines"))
    return f"{position:,} slots: {blocks} {int(size):,} {what}"


def cpu_table(rows: list[dict[str, Any]]) -> Table:
    """Per job, each role's CPU per example: what the engine spent / what the simulator
    charged ("-" where the job has no node of the role)."""
    roles = sorted({role for row in rows for role in row["cpu_us_per_example"]})
    table = Table(title="CPU per example, microseconds: engine / simulated")
    table.add_column("config")
    for role in roles:
        table.add_column(role)
    for row in rows:
        engine, charged = row["cpu_us_per_example"], row["predicted_cpu_us_per_example"]
        table.add_row(
            row["config"],
            *(f"{engine[r]:g} / {charged.get(r, 0.0):g}" if r in engine else "-" for r in roles),
        )
    return table


ProgressOption = Annotated[
    bool, typer.Option(show_default=False, help="Show the progress (default) or not.")
]
