"""The ranking of an advice (pure: measured points in, ordered rows out).

The rule:

1. A candidate's speed is its steady examples/s in the clean condition; its time to train
   the data once is the data's examples over that speed. A candidate whose clean speed
   was not measured (the budget ran out) is not ranked.
2. Its quality is the mean test AUC over the seeds its real-math sample ran with, its
   spread their standard deviation. The best quality is the highest mean. A candidate is
   within noise of it unless it falls short by more than twice the larger of the two
   spreads (the reproductions' rule: an effect beyond twice the seed spread), and never by
   less than AUC_FLOOR (one seed has no spread).
3. Rank: first the candidates within noise of the best quality, then those whose quality
   was not measured, then those measurably worse; in each group the fastest first. A
   lower bound (a strategy whose replicas never sync, `StrategyConfig.lower_bound`) comes
   after all of them and sets no best quality: it is there to compare with. The first is
   the advice.
4. Candidates within noise of the best cannot be told apart by quality: the advice says
   which (`indistinguishable`), and is the fastest of them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from recsync.app.advise.candidates import Candidate
from recsync.app.advise.cluster import CLEAN
from recsync.strategy.registry import strategy_class

AUC_FLOOR = 0.002  # the smallest AUC gap called a difference, whatever the seeds' spread
WITHIN_NOISE, UNKNOWN, WORSE, UNMEASURED, LOWER_BOUND = 0, 1, 2, 3, 4
TIER_NAMES = {
    WITHIN_NOISE: "quality within noise of the best",
    UNKNOWN: "quality not measured",
    WORSE: "quality measurably worse than the best",
    UNMEASURED: "speed not measured",
    LOWER_BOUND: "a lower bound to compare with, never the advice",
}


@dataclass(frozen=True)
class Measured:
    """What was measured of one candidate: its priced points by condition name (None:
    not measured) and its real-math points, one per seed."""

    candidate: Candidate
    speed: dict[str, dict[str, Any] | None]
    quality: list[dict[str, Any]] = field(default_factory=list)
    quality_from: str | None = None  # the candidate the quality was measured on, if another


@dataclass(frozen=True)
class Ranked:
    """A candidate's place: its group (`tier`), speed, time per pass and quality."""

    rank: int
    tier: int
    measured: Measured
    eps: float | None
    time_per_pass_s: float | None
    auc: tuple[float, float] | None  # mean, spread over seeds
    ne: tuple[float, float] | None

    @property
    def candidate(self) -> Candidate:
        return self.measured.candidate


def mean_spread(values: list[float]) -> tuple[float, float]:
    """Mean and sample standard deviation (0 for one value)."""
    mean = sum(values) / len(values)
    if len(values) < 2:
        return mean, 0.0
    return mean, math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))


def _quality(points: list[dict[str, Any]], key: str) -> tuple[float, float] | None:
    values = [float(p[key]) for p in points if p.get(key) is not None]
    return mean_spread(values) if values else None


def within_noise(best: tuple[float, float], other: tuple[float, float]) -> bool:
    """Whether AUC `other` (mean, spread) is within noise of the best AUC `best`."""
    return best[0] - other[0] <= max(2 * max(best[1], other[1]), AUC_FLOOR)


def rank(measured: list[Measured], examples_per_pass: int) -> list[Ranked]:
    """`measured` in the order of the rule above, numbered from 1."""
    aucs = {id(m): _quality(m.quality, "test_auc") for m in measured}
    bounds = {id(m) for m in measured if strategy_class(m.candidate.strategy).lower_bound}
    known = [a for key, a in aucs.items() if a is not None and key not in bounds]
    best = max(known, key=lambda a: a[0]) if known else None
    rows = []
    for m in measured:
        clean = m.speed.get(CLEAN)
        eps = None if clean is None else float(clean["eps_steady"])
        auc = aucs[id(m)]
        if id(m) in bounds:
            tier = LOWER_BOUND
        elif eps is None:
            tier = UNMEASURED
        elif auc is None or best is None:
            tier = UNKNOWN
        else:
            tier = WITHIN_NOISE if within_noise(best, auc) else WORSE
        seconds = None if not eps else examples_per_pass / eps
        rows.append((tier, seconds, m, eps, auc, _quality(m.quality, "test_ne")))
    rows.sort(key=lambda r: (r[0], math.inf if r[1] is None else r[1], r[2].candidate.label))
    return [
        Ranked(i + 1, tier, m, eps, seconds, auc, ne)
        for i, (tier, seconds, m, eps, auc, ne) in enumerate(rows)
    ]


def indistinguishable(ranked: list[Ranked]) -> list[Ranked]:
    """The candidates whose quality cannot be told apart from the best's (two or more, the
    advice first; none when the advice stands alone or its quality was not measured)."""
    within = [r for r in ranked if r.tier == WITHIN_NOISE and r.eps is not None]
    return within if len(within) > 1 else []
