"""`recsync reproduce NAME`: one command per reproduced figure or table, each writing a
report (markdown, PNG, JSON) under reports/ and stamping it (commit, command, seeds,
machine, wall time, cost model); `recsync reproduce --list` names them with how long each
takes and whether its report is current; `recsync reproduce --all` runs every one whose
report is not (`reproduce_all.py`). The commands are the experiments folder's reproductions
(found as `recsync.app.cli.experiments` says), loaded when the group is first asked for
them."""

from __future__ import annotations

import contextlib
import shlex
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table
from typer.core import TyperGroup

from recsync.app.cli.common import fail
from recsync.app.cli.experiments import Reproduction, experiments_folder, load_reproductions
from recsync.app.cli.reproduce_all import run_all
from recsync.app.runs.simulate import simulator_threads
from recsync.errors import RecsyncError
from recsync.runtime.pools import calls_on

AddressOption = Annotated[
    str | None,
    typer.Option(
        metavar="ADDRESS",
        help="Run the points as Ray tasks on this cluster (HEAD_IP:6379, auto) or on a local "
        "one of this machine's cores (local); default: two processes here.",
    ),
]


def _reproductions() -> dict[str, Reproduction]:
    try:
        return dict(load_reproductions())
    except RecsyncError as error:
        fail(error)


class ReproductionGroup(TyperGroup):
    """The `reproduce` group: a command per registered reproduction, made on first use (so
    the other commands neither need nor load the experiments folder; where it is missing,
    the group's own --help fails with where it was looked for)."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        self._add_reproductions()
        return super().parse_args(ctx, args)

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        self._add_reproductions()
        return super().get_command(ctx, cmd_name)

    def list_commands(self, ctx: Any) -> list[str]:
        self._add_reproductions()
        return super().list_commands(ctx)

    def _add_reproductions(self) -> None:
        if self.commands:
            return
        commands = typer.Typer(rich_markup_mode=None)
        for reproduction in _reproductions().values():
            _command(commands, reproduction)
        for name, command in typer.main.get_group(commands).commands.items():
            self.add_command(command, name)


reproduce_app = typer.Typer(
    cls=ReproductionGroup, help="Reproduce the papers' figures (reports/).", rich_markup_mode=None
)


@reproduce_app.callback(invoke_without_command=True)
def reproductions(
    ctx: typer.Context,
    list_: Annotated[
        bool,
        typer.Option(
            "--list",
            show_default=False,
            help="Name every reproduction, its duration and whether its report is current.",
        ),
    ] = False,
    all_: Annotated[
        bool,
        typer.Option(
            "--all",
            show_default=False,
            help="Run every reproduction whose report is not current (see --check), in "
            "parallel processes.",
        ),
    ] = False,
    jobs: Annotated[
        int,
        typer.Option("--jobs", min=1, metavar="N", help="With --all: reproductions run at once."),
    ] = 2,
    force: Annotated[
        bool,
        typer.Option("--force", show_default=False, help="With --all: rerun current ones too."),
    ] = False,
    address: AddressOption = None,
    check: Annotated[
        bool,
        typer.Option(
            "--check",
            show_default=False,
            help="Say whether each report is current (its stamp's code is the code as it "
            "is: the whole product package and the reproduction's own modules) and, if "
            "not, why; exit 1 if any is not.",
        ),
    ] = False,
) -> None:
    """Reproduce the papers' figures and tables in the simulator (reports/)."""
    if ctx.invoked_subcommand is not None:
        return
    console = Console(emoji=False)
    if check:
        _check(_reproductions(), _say(console))
        return
    if all_:
        command = f"recsync reproduce --all --jobs {jobs}" + (" --force" if force else "")
        command += "" if address is None else f" --address {shlex.quote(address)}"
        try:
            failed = run_all(_reproductions(), jobs, force, _say(console), command, address=address)
        except ValueError as error:
            fail(error)
        if failed:
            fail(RecsyncError(f"reproductions failed: {', '.join(failed)}"))
        return
    if not list_:
        console.print(ctx.get_help())
        raise typer.Exit(0)
    table = Table(title="recsync reproduce NAME (each writes a report under reports/)")
    table.add_column("name", no_wrap=True)
    table.add_column("paper")
    table.add_column("what")
    table.add_column("min", justify="right", no_wrap=True)
    table.add_column("report")
    for r in _reproductions().values():
        reason = r.stale_reason(Path(r.report_dir))
        table.add_row(r.name, r.paper, r.claim, f"{r.minutes:g}", reason or "current")
    console.print(table)


def _check(reproductions: dict[str, Reproduction], say: Callable[[str], None]) -> None:
    """Each report's status, one line each; exit 1 where any is not current."""
    stale = 0
    for r in reproductions.values():
        reason = r.stale_reason(Path(r.report_dir))
        stale += reason is not None
        say(f"{r.name} ({r.report_dir}): {'current' if reason is None else 'stale: ' + reason}")
    say(f"{len(reproductions) - stale} of {len(reproductions)} reports current")
    if stale:
        say("run `recsync reproduce NAME` for each stale one, or `make reproduce` for all")
        raise typer.Exit(1)


def _say(console: Console) -> Callable[[str], None]:
    def say(line: str) -> None:
        console.print(line, markup=False, highlight=False, soft_wrap=True)

    return say


def _run(reproduction: Reproduction, out: Path, command: str, address: str | None) -> Any:
    console = Console(emoji=False)
    with simulator_threads(), _points_on(address), console.status("simulating") as status:

        def progress(item: Any) -> None:
            text = item if isinstance(item, str) else reproduction.show(item)
            status.update(text)
            console.print(text, highlight=False)

        result = reproduction.reproduce(out, progress, command)
    console.print(f"report written to {out / 'report.md'}")
    return result


@contextlib.contextmanager
def _points_on(address: str | None) -> Iterator[None]:
    """The reproduction's points as Ray tasks on the cluster at `address` ("local": one
    started here with this machine's cores); None: in this machine's processes."""
    if address is None:
        yield
        return
    from recsync.runtime.ray.tasks import TaskPool  # Ray: only where asked for

    pool = TaskPool(address, python_path=[str(experiments_folder().parent)])
    try:
        with calls_on(pool):
            yield
    finally:
        pool.close()


def _command(commands: typer.Typer, reproduction: Reproduction) -> None:
    def command(
        out: Annotated[Path, typer.Option(metavar="DIR", help="Report directory.")] = Path(
            reproduction.report_dir
        ),
        address: AddressOption = None,
    ) -> None:
        where = "" if out == Path(reproduction.report_dir) else f" --out {shlex.quote(str(out))}"
        try:
            _run(reproduction, out, f"recsync reproduce {reproduction.name}{where}", address)
        except (RecsyncError, ConnectionError) as error:
            fail(error)

    command.__doc__ = (
        f"{reproduction.paper}: {reproduction.claim} (about {reproduction.minutes:g} minutes; "
        f"writes {reproduction.report_dir})."
    )
    short = f"{reproduction.paper} ({reproduction.minutes:g} min)"  # --list says what
    commands.command(reproduction.name, short_help=short)(command)
