"""The progress bar of a long run: examples done out of the total."""

from __future__ import annotations

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn


def examples_bar(label: str, enabled: bool, rate: bool = True) -> Progress:
    """A bar of examples done out of the total (on stderr); with `rate`, the examples per
    second, from the task's `eps` field."""
    count = "examples  {task.fields[eps]:>9,.0f} ex/s" if rate else "examples"
    return Progress(
        TextColumn(f"[bold]{label}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn(count),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        disable=not enabled,
    )
