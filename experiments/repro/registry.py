"""The reproductions' registry. A reproduction module registers its command by decorating
its runner with `@reproduction(...)` (name, paper, claim, report directory, minutes, how to
show a finished point, its seeds and its cost models); `experiments.repro` imports every
module of its package, so a new reproduction is one new module and nothing else.

`Reproduction.reproduce` is what `recsync reproduce NAME` calls: the runner, then its stamp
(`stamp.py`), so every report is stamped once, by the same code."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from experiments.repro import points, stamp

Progress = Callable[[Any], None]  # told of each point or line a reproduction finishes
Runner = Callable[[Path, Progress | None], Any]  # writes the report under its path
R = TypeVar("R", bound=Runner)
STATED = "stated in the reproduction's code (a cluster like the paper's), not calibrated"


@dataclass(frozen=True)
class Reproduction:
    """One reproduced figure or table: the command `recsync reproduce NAME`.

    `minutes` is about what the command takes on this project's 2-core machine when
    nothing else runs (measured; a busy machine takes up to 1.5x longer); `show` makes a
    line of each point or row the runner tells its progress of; `seeds` are the training
    seeds its claims rest on and `cost` its simulator cost models by name (both stamped).
    """

    name: str
    paper: str
    claim: str
    run: Runner
    report_dir: str
    minutes: float
    show: Callable[[Any], str] = str
    seeds: Any = (0,)
    cost: Mapping[str, Any] = field(default_factory=dict)
    cost_source: str = STATED

    def reproduce(
        self, out: Path, progress: Progress | None = None, command: str | None = None
    ) -> Any:
        """Run the reproduction into `out`, then stamp its report; `command`: the command
        line the stamp names (this process's own where None). Points computed by an earlier
        run of the same code are taken from `out` (`points.py`), and the stamp counts them."""
        started, clock = time.time(), time.perf_counter()
        with points.points_kept(out) as kept:
            result = self.run(out, progress)
        wall = time.perf_counter() - clock
        made = stamp.make_stamp(
            self.name, self.run.__module__, list_of(self.seeds), self.cost, started, wall
        )
        made["cost_source"] = self.cost_source
        made["points_resumed"] = kept.reused  # computed by an earlier run of the same code
        made["points_computed"] = kept.computed
        if command is not None:
            made["command"] = command
        stamp.write_stamp(out, made)
        return result

    def stale_reason(self, out: Path) -> str | None:
        """Why the report in `out` is not current (None: it is)."""
        return stamp.stale_reason(self.run.__module__, out)


def list_of(seeds: Any) -> Any:
    return list(seeds) if isinstance(seeds, tuple | range) else seeds


REPRODUCTIONS: dict[str, Reproduction] = {}  # by command name, in the modules' order


def reproduction(
    name: str,
    *,
    paper: str,
    claim: str,
    report_dir: str,
    minutes: float,
    show: Callable[[Any], str] = str,
    seeds: Any = (0,),
    cost: Mapping[str, Any] | None = None,
    cost_source: str = STATED,
) -> Callable[[R], R]:
    """Register the decorated runner as the reproduction `name` (unchanged)."""

    def register(run: R) -> R:
        if name in REPRODUCTIONS:
            raise ValueError(
                f"two reproductions are named {name!r}: {REPRODUCTIONS[name].run.__module__} "
                f"and {run.__module__}"
            )
        REPRODUCTIONS[name] = Reproduction(
            name, paper, claim, run, report_dir, minutes, show, seeds, dict(cost or {}), cost_source
        )
        return run

    return register
