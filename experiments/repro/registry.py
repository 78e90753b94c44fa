"""The reproductions' registry. A reproduction module registers its command by decorating
its runner with `@reproduction(...)` (name, paper, claim, report directory, minutes, and how
to show a finished point); `experiments.repro` imports every module of its package, so a
new reproduction is one new module and nothing else."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

Progress = Callable[[Any], None]  # told of each point or line a reproduction finishes
Runner = Callable[[Path, Progress | None], Any]  # writes the report under its path
R = TypeVar("R", bound=Runner)


@dataclass(frozen=True)
class Reproduction:
    """One reproduced figure or table: the command `recsync reproduce NAME`.

    `minutes` is about what the command takes on this project's 2-core machine when
    nothing else runs (measured; a busy machine takes up to 1.5x longer); `show` makes a
    line of each point or row the runner tells its progress of.
    """

    name: str
    paper: str
    claim: str
    run: Runner
    report_dir: str
    minutes: float
    show: Callable[[Any], str] = str


REPRODUCTIONS: dict[str, Reproduction] = {}  # by command name, in the modules' order


def reproduction(
    name: str,
    *,
    paper: str,
    claim: str,
    report_dir: str,
    minutes: float,
    show: Callable[[Any], str] = str,
) -> Callable[[R], R]:
    """Register the decorated runner as the reproduction `name` (unchanged)."""

    def register(run: R) -> R:
        if name in REPRODUCTIONS:
            raise ValueError(
                f"two reproductions are named {name!r}: {REPRODUCTIONS[name].run.__module__} "
                f"and {run.__module__}"
            )
        REPRODUCTIONS[name] = Reproduction(name, paper, claim, run, report_dir, minutes, show)
        return run

    return register
