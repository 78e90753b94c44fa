"""`recsync reproduce NAME`: one command per reproduced figure or table (the registry in
`recsync.app.repro`), each writing a report (markdown, PNG, JSON) under reports/;
`recsync reproduce --list` names them with how long each takes."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from recsync.app.repro import REPRODUCTIONS, Reproduction

reproduce_app = typer.Typer(help="Reproduce the papers' figures (reports/).")


@reproduce_app.callback(invoke_without_command=True)
def reproductions(
    ctx: typer.Context,
    list_: Annotated[
        bool, typer.Option("--list", help="Name every reproduction and its duration.")
    ] = False,
) -> None:
    """Reproduce the papers' figures and tables in the simulator (reports/)."""
    if ctx.invoked_subcommand is not None:
        return
    if not list_:
        Console(emoji=False).print(ctx.get_help())
        raise typer.Exit(0)
    table = Table(title="recsync reproduce NAME (each writes a report under reports/)")
    table.add_column("name", no_wrap=True)
    table.add_column("paper")
    table.add_column("what")
    table.add_column("min", justify="right", no_wrap=True)
    for r in REPRODUCTIONS.values():
        table.add_row(r.name, r.paper, r.claim, f"{r.minutes:g}")
    Console(emoji=False).print(table)


def _run(reproduction: Reproduction, out: Path) -> Any:
    console = Console(emoji=False)
    with console.status("simulating") as status:

        def progress(item: Any) -> None:
            text = item if isinstance(item, str) else reproduction.show(item)
            status.update(text)
            console.print(text, highlight=False)

        result = reproduction.run(out, progress)
    console.print(f"report written to {out / 'report.md'}")
    return result


def _command(reproduction: Reproduction) -> None:
    def command(
        out: Annotated[Path, typer.Option(help="Report directory.")] = Path(
            reproduction.report_dir
        ),
    ) -> None:
        _run(reproduction, out)

    command.__doc__ = (
        f"{reproduction.paper}: {reproduction.claim} (about {reproduction.minutes:g} minutes; "
        f"writes {reproduction.report_dir})."
    )
    reproduce_app.command(reproduction.name)(command)


for _reproduction in REPRODUCTIONS.values():
    _command(_reproduction)
