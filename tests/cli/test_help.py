"""`--help` of `recsync` and of every command, at 80 columns: no line is wider, and every
option's description reads whole (its words as written, wrapped only between words)."""

from __future__ import annotations

import re
from typing import Any

import pytest
import typer.main
from typer.testing import CliRunner

from recsync.app.cli.main import app

WIDTH = 80
runner = CliRunner()


def _commands(
    command: Any, ctx: Any, path: tuple[str, ...] = ()
) -> list[tuple[tuple[str, ...], Any]]:
    """The command and every command under it (typer's own click: duck-typed)."""
    found = [(path, command)]
    if hasattr(command, "list_commands"):
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            assert sub is not None
            sub_ctx = sub.context_class(sub, parent=ctx, info_name=name)
            found += _commands(sub, sub_ctx, (*path, name))
    return found


def every_command() -> list[tuple[tuple[str, ...], Any]]:
    root = typer.main.get_command(app)
    return _commands(root, root.context_class(root, info_name="recsync"))


def _flat(text: str) -> str:
    """Whitespace collapsed; a line broken after a hyphen joined back."""
    return " ".join(re.sub(r"-\n\s*", "-", text).split())


def test_every_command_is_listed():
    paths = {" ".join(path) for path, _ in every_command()}
    assert {"train", "simulate", "continual", "data inspect", "reproduce psp"} <= paths


@pytest.mark.parametrize(
    "path, command", every_command(), ids=lambda v: " ".join(v) if isinstance(v, tuple) else ""
)
def test_help_fits_80_columns_and_reads_whole(path, command):
    result = runner.invoke(
        app, [*path, "--help"], env={"COLUMNS": str(WIDTH)}, terminal_width=WIDTH
    )
    assert result.exit_code == 0, result.output
    wide = [line for line in result.output.splitlines() if len(line) > WIDTH]
    assert not wide, wide
    shown = _flat(result.output)
    for param in command.params:
        text = getattr(param, "help", None)
        if text:
            assert _flat(text) in shown, (param.name, text)
    assert _flat((command.help or "").split("\n\n")[0]) in shown
