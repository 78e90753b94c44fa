"""How a reproduction whose claim ran against its paper settles it: at least `SEEDS` seeds,
every compared variant tuned on the same grid with its chosen value inside the grid (the
grid extended where the best value sits at an edge), and runs long enough that the held-out
loss has flattened (`Flattening`: the criterion, stated in the report beside the curve).

The runs themselves stay the reproduction's: `tune` is handed a function that runs a list
of (variant, value) points (through `common.run_in_processes`, so points are kept and
resumed) and returns each point's score."""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SEEDS = (0, 1, 2, 3, 4)  # a claim that ran against its paper reruns on at least these
MAX_EXTENSIONS = 3  # steps a grid may grow past an edge before the edge is reported


@dataclass(frozen=True)
class Grid:
    """Values tried for one setting (a learning rate or a factor of it), ascending; an
    extension past an edge multiplies (or divides) the edge by `step`."""

    values: tuple[float, ...]
    step: float = 2.0

    def __post_init__(self) -> None:
        if len(self.values) < 3 or list(self.values) != sorted(set(self.values)):
            raise ValueError(f"a grid needs 3 or more ascending values, got {self.values}")
        if self.step <= 1.0:
            raise ValueError(f"a grid's step multiplies: more than 1, got {self.step}")


@dataclass(frozen=True)
class Tuned:
    """One variant's tuning: every value tried with its score, the chosen value, and
    whether it is still at an edge of what was tried (after `MAX_EXTENSIONS`)."""

    variant: Hashable
    scores: dict[float, float]
    chosen: float
    extensions: int
    at_edge: bool

    def as_dict(self) -> dict[str, Any]:
        return {
            "variant": str(self.variant),
            "scores": {f"{v:g}": s for v, s in sorted(self.scores.items())},
            "chosen": self.chosen,
            "extensions": self.extensions,
            "at_edge": self.at_edge,
        }


def tried_text(tuned: Mapping[str, Any], digits: int = 5) -> str:
    """A stored tuning's (`Tuned.as_dict`) values tried, each with its score."""
    return ", ".join(f"{v}: {s:.{digits}f}" for v, s in tuned["scores"].items())


def edge_text(tuned: Mapping[str, Any]) -> str:
    """Whether a stored tuning's choice is still at an edge, and how often its grid grew."""
    extended = f" (grid extended {tuned['extensions']}x)" if tuned["extensions"] else ""
    return ("yes" if tuned["at_edge"] else "no") + extended


def best(scores: Mapping[float, float], higher_is_better: bool) -> float:
    """The value with the best score; a NaN (a diverged run) is the worst, ties go to the
    smaller value."""
    sign = 1.0 if higher_is_better else -1.0

    def rank(value: float) -> tuple[float, float]:
        s = scores[value]
        return (-math.inf if math.isnan(s) else sign * s, -value)

    return max(sorted(scores), key=rank)


def edge(scores: Mapping[float, float], chosen: float) -> str | None:
    """Which edge of what was tried `chosen` is: "low", "high" or None (inside)."""
    tried = sorted(scores)
    return "low" if chosen == tried[0] else "high" if chosen == tried[-1] else None


Runner = Callable[[list[tuple[Hashable, float]]], list[float]]


def tune(
    variants: Sequence[Hashable], grid: Grid, run: Runner, higher_is_better: bool
) -> dict[Hashable, Tuned]:
    """Each variant tuned on `grid`: `run` scores a list of (variant, value) points (all of
    a round at once, so they run in parallel); a variant whose best value is at an edge of
    what it tried gets the next value past that edge, up to `MAX_EXTENSIONS` times."""
    scores: dict[Hashable, dict[float, float]] = {v: {} for v in variants}
    todo = [(v, value) for v in variants for value in grid.values]
    for _ in range(MAX_EXTENSIONS + 1):
        if not todo:
            break
        for (v, value), s in zip(todo, run(todo), strict=True):
            scores[v][value] = float(s)
        todo = []
        for v in variants:
            if len(scores[v]) - len(grid.values) >= MAX_EXTENSIONS:
                continue
            side = edge(scores[v], best(scores[v], higher_is_better))
            if side == "low":
                todo.append((v, min(scores[v]) / grid.step))
            elif side == "high":
                todo.append((v, max(scores[v]) * grid.step))
    tuned = {}
    for v in variants:
        chosen = best(scores[v], higher_is_better)
        tuned[v] = Tuned(
            v,
            scores[v],
            chosen,
            len(scores[v]) - len(grid.values),
            edge(scores[v], chosen) is not None,
        )
    return tuned


@dataclass(frozen=True)
class Flattening:
    """A run's held-out loss has flattened when over its last `last_fraction` it improved
    by less than `tolerance` of its final value: (loss at the start of that part - final
    loss) / final loss < tolerance. Evaluations must reach into that part's start."""

    last_fraction: float = 0.25
    tolerance: float = 0.005

    def describe(self) -> str:
        return (
            f"the held-out loss improved by less than {self.tolerance:.1%} of its final value "
            f"over the last {self.last_fraction:.0%} of the run"
        )

    def change(self, curve: Sequence[tuple[float, float]]) -> float:
        """The relative improvement over the last part of `curve` ((position, loss) pairs,
        positions ascending, the last the run's end); NaN when no evaluation falls at or
        before the part's start."""
        assert curve and list(curve) == sorted(curve, key=lambda p: p[0]), curve
        end, final = curve[-1]
        start = end * (1.0 - self.last_fraction)
        before = [loss for position, loss in curve if position <= start]
        if not before or final == 0:
            return math.nan
        return (before[-1] - final) / abs(final)

    def flat(self, curve: Sequence[tuple[float, float]]) -> bool:
        change = self.change(curve)
        return not math.isnan(change) and change < self.tolerance


@dataclass
class Curves:
    """Held-out loss curves by label (position, loss), plotted to one PNG with the
    flattening criterion's window marked."""

    curves: dict[str, list[tuple[float, float]]] = field(default_factory=dict)

    def plot(self, path: Path, title: str, x_label: str, rule: Flattening) -> None:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(7, 4))
        for label, curve in self.curves.items():
            ax.plot([p for p, _ in curve], [loss for _, loss in curve], label=label)
        ends = [curve[-1][0] for curve in self.curves.values() if curve]
        if ends:
            ax.axvspan(max(ends) * (1 - rule.last_fraction), max(ends), alpha=0.1, color="grey")
        ax.set_xlabel(x_label)
        ax.set_ylabel("held-out logloss")
        ax.set_title(title, fontsize=9)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(path, dpi=110)
        plt.close(fig)
