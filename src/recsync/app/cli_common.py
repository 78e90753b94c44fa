"""What the command modules share: the config options and the one-line error exit."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console
from rich.markup import escape

ConfigOption = Annotated[
    Path | None,
    typer.Option("--config", "-c", help="TOML config, layered on the embedded default."),
]
SetOption = Annotated[
    list[str] | None,
    typer.Option("--set", help="Override a config key, e.g. --set train.batch_size=128."),
]


def fail(error: Exception) -> NoReturn:
    message = " ".join(str(error).split())
    Console(stderr=True, soft_wrap=True).print(
        f"[bold red]error:[/] [red]{escape(message)}[/]", highlight=False
    )
    raise typer.Exit(1)


def number(value: float | None, digits: int = 4) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def skips_text(skipped: dict[str, Any]) -> str:
    if not skipped["total"]:
        return "none"
    reasons = ", ".join(f"{r} {n:,}" for r, n in sorted(skipped["by_reason"].items()))
    return f"{skipped['total']:,} ({reasons})"
