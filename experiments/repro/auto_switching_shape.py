"""The auto-switching reproduction's numbers and verdicts, read off its rows (one a variant
and seed): the controller against recsync's targets and GBA's Fig. 6 shape, each judged
by `verdict.judge` on the per-seed values (paired by seed where both sides ran it). Rows
of the older, one-seed setting carry no "seed": they are seed 0."""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from experiments.repro.verdict import Verdict, judge

TIME_TARGET = 0.10  # the controller's total time within 10% of the fastest fixed strategy's
AUC_TARGET = 0.001  # its mean next-day AUC within 0.001 of the best fixed strategy's
GBA_WITHIN = 0.002  # Fig. 6: GBA stays within this of sync on every day from the switch on
DIP = 0.002  # async and Hop-BS fall more than this below sync while switched
BACK = 0.001  # and are back within this of sync by the last day
FIXED_SUFFIX = " throughout"
SYNC = "sync" + FIXED_SUFFIX
SWITCH_PREFIX = "sync > "

Runs = dict[str, dict[int, dict[str, Any]]]  # variant -> seed -> its row


def by_variant(rows: Iterable[dict[str, Any]]) -> Runs:
    """The rows by variant (in the rows' order), then by seed."""
    out: Runs = {}
    for row in rows:
        out.setdefault(row["variant"], {})[row.get("seed", 0)] = row
    return out


def seeds_of(runs: Runs) -> list[int]:
    """Every seed any variant ran."""
    return sorted({seed for per_seed in runs.values() for seed in per_seed})


def mean_of(per_seed: dict[int, dict[str, Any]], key: str) -> float:
    """A row field's mean over the seeds."""
    return statistics.fmean(row[key] for row in per_seed.values())


def fastest_and_best(runs: Runs) -> tuple[str, str]:
    """The fastest fixed strategy (least mean total time over the seeds) and the best
    (highest mean next-day AUC), by variant name."""
    fixed = [name for name in runs if name.endswith(FIXED_SUFFIX)]
    fastest = min(fixed, key=lambda name: mean_of(runs[name], "total_seconds"))
    best = max(fixed, key=lambda name: mean_of(runs[name], "mean_next_day_auc"))
    return fastest, best


@dataclass(frozen=True)
class ControllerCheck:
    """The controller against recsync's targets, per seed against the same seed's fixed
    strategies: `time_ratio` (its total time over the fastest's) and `auc_gap` (the best's
    mean next-day AUC minus its own) are means of the per-seed values."""

    seeds: int
    time_ratio: float
    auc_gap: float
    time_ok: Verdict
    auc_ok: Verdict
    ratios: dict[int, float]  # per seed: its total time over the fastest's
    auc_gaps: dict[int, float]  # per seed: the best's mean next-day AUC minus its own


def controller_check(
    runs: Runs, fastest: str, best: str, name: str = "controller"
) -> ControllerCheck:
    ours, quick, good = runs[name], runs[fastest], runs[best]
    seeds = sorted(ours.keys() & quick.keys() & good.keys())
    ratios = {s: ours[s]["total_seconds"] / quick[s]["total_seconds"] for s in seeds}
    auc = {s: ours[s]["mean_next_day_auc"] for s in seeds}
    best_auc = {s: good[s]["mean_next_day_auc"] for s in seeds}
    time_ok = judge(ratios, 1 + TIME_TARGET, "lower")
    auc_ok = judge(auc, {s: best_auc[s] - AUC_TARGET for s in seeds}, "higher")
    gaps = {s: best_auc[s] - auc[s] for s in seeds}
    return ControllerCheck(
        len(seeds),
        statistics.fmean(ratios.values()),
        statistics.fmean(gaps.values()),
        time_ok,
        auc_ok,
        ratios,
        gaps,
    )


@dataclass(frozen=True)
class Switched:
    """A variant switched away from sync and back: per seed, its next-day AUC minus the
    same seed's sync run's, by day; the first and last day it ran another strategy."""

    variant: str
    diffs: dict[int, list[float]]
    first: int
    last: int

    @property
    def mean_diffs(self) -> list[float]:
        """The per-day gaps to sync, means over the seeds."""
        return [statistics.fmean(day) for day in zip(*self.diffs.values(), strict=True)]


def switched_runs(runs: Runs) -> list[Switched]:
    sync = runs[SYNC]
    out = []
    for name, per_seed in runs.items():
        if not name.startswith(SWITCH_PREFIX):
            continue
        diffs: dict[int, list[float]] = {}
        changed: set[int] = set()
        for seed in sorted(per_seed.keys() & sync.keys()):
            days, base = per_seed[seed]["days"], sync[seed]["days"]
            diffs[seed] = [
                d["next_day_auc"] - s["next_day_auc"] for d, s in zip(days, base, strict=True)
            ]
            changed |= {i for i, d in enumerate(days) if d["strategy"] != "sync"}
        if changed:
            out.append(Switched(name, diffs, min(changed), max(changed)))
    return out


def accumulator_ratio(runs: Runs, variant: str, day: int, part: str) -> float:
    """The variant's Adagrad accumulator sum after `day` over sync's, mean over the seeds."""
    ours, sync = runs[variant], runs[SYNC]
    ratios = [
        ours[s]["days"][day]["adagrad_sums"][part]
        / max(sync[s]["days"][day]["adagrad_sums"][part], 1e-12)
        for s in sorted(ours.keys() & sync.keys())
    ]
    return float(statistics.fmean(ratios))


@dataclass(frozen=True)
class Fig6Shape:
    """The paper's Fig. 6 shape for one switched variant: for GBA, `holds` is "within
    GBA_WITHIN of sync on every day from the switch on"; for the others, `dips` "below sync
    by > DIP while switched" and `holds` "back within BACK of sync by the last day". The
    lists are the means over the seeds of the gaps to sync; the verdicts judge each seed's
    own worst (or last) gap."""

    is_gba: bool
    switched: list[float]  # AUC minus sync's on the switched days
    later: list[float]  # on the days back on sync
    worst: float  # GBA: the largest mean gap from the switch on
    back: int | None  # the first day the mean gap is back within BACK of sync
    holds: Verdict
    dips: Verdict | None
    held: dict[int, float]  # per seed, what `holds` judges: GBA's lowest gap, or the last day's
    dipped: dict[int, float] | None  # per seed, what `dips` judges: the lowest while switched


def fig6_shape(w: Switched) -> Fig6Shape:
    first, last = w.first, w.last
    mean = w.mean_diffs
    switched, later = mean[first : last + 1], mean[last + 1 :]
    worst = max(mean[first:], key=abs)
    back = next((last + 1 + i for i, d in enumerate(later) if d > -BACK), None)
    if w.variant == SWITCH_PREFIX + "gba > sync":
        lowest = {s: min(d[first:]) for s, d in w.diffs.items()}
        within = judge(lowest, -GBA_WITHIN, "higher")
        return Fig6Shape(True, switched, later, worst, back, within, None, lowest, None)
    dipped = {s: min(d[first : last + 1]) for s, d in w.diffs.items()}
    final = {s: d[-1] for s, d in w.diffs.items()}
    dips = judge(dipped, -DIP, "lower")
    recovers = judge(final, -BACK, "higher")
    return Fig6Shape(False, switched, later, worst, back, recovers, dips, final, dipped)
