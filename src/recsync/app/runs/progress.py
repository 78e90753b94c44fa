"""Progress bars of long work: examples done out of the total, or steps of a procedure."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn


def warn(message: str) -> None:
    """A warning on stderr (the run goes on)."""
    Console(emoji=False, stderr=True, soft_wrap=True).print(
        f"[yellow]warning:[/] {escape(message)}", highlight=False
    )


def deprecated(message: str) -> None:
    """A deprecated way of saying something, and what to say instead (on stderr)."""
    Console(emoji=False, stderr=True, soft_wrap=True).print(
        f"[yellow]deprecated:[/] {escape(message)}", highlight=False
    )


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
        console=Console(emoji=False, stderr=True),
        disable=not enabled,
    )


class Steps:
    """Announces the steps of a procedure on a bar: each announcement ends the previous
    step and names the next."""

    def __init__(self, bar: Progress, total: int):
        self.bar, self.total = bar, total
        self.task = bar.add_task("", total=total)
        self.completed = 0
        self._started = False

    def __call__(self, what: str) -> None:
        if self._started:
            self.completed += 1
        self._started = True
        self.bar.update(self.task, completed=self.completed, description=what)

    def finish(self) -> None:
        self.completed = self.total
        self.bar.update(self.task, completed=self.total, description="done")


@contextmanager
def steps_bar(label: str, total: int, enabled: bool) -> Iterator[Steps]:
    """A bar of `total` steps (on stderr), announced by calling what it yields."""
    bar = Progress(
        TextColumn(f"[bold]{label}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.description}"),
        TimeElapsedColumn(),
        console=Console(emoji=False, stderr=True),
        disable=not enabled,
    )
    with bar:
        steps = Steps(bar, total)
        yield steps
        steps.finish()
