"""The one verdict rule of every reproduction: a claimed effect "holds" only when
it exceeds twice the seed spread in the paper's direction, "does not hold" when it exceeds it
in the other direction, and is "within noise" otherwise; fewer than three seeds (or fewer
than five where the seeds disagree on the sign of a paired difference) are "too few seeds",
whatever the numbers. Every verdict in a report comes from `judge`; no other module decides
one.

The effect is the mean difference ours minus baseline (paired by seed when `paired`), signed
so that the paper's direction is positive; the spread is the largest standard deviation over
seeds of either side and, when paired, of the per-seed differences. A baseline given as one
number is a fixed reference (the paper's figure, a threshold): its side has no spread.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

NOISE = 2.0  # an effect must exceed NOISE x the seed spread to count
MIN_SEEDS = 3  # fewer seeds never hold
MIN_SEEDS_DISAGREEING = 5  # where the seeds' paired differences differ in sign

HOLDS, WITHIN_NOISE, DOES_NOT_HOLD, TOO_FEW_SEEDS = (
    "holds",
    "within noise",
    "does not hold",
    "too few seeds",
)
LABELS = (HOLDS, WITHIN_NOISE, DOES_NOT_HOLD, TOO_FEW_SEEDS)
AGAINST_MARK = " (against the paper)"  # after a label whose point estimate is against

Direction = Literal["higher", "lower"]  # which way the paper says ours moves from baseline
Values = Sequence[float] | Mapping[int, float]  # per seed: in seed order, or by seed


@dataclass(frozen=True)
class Verdict:
    """A judged claim: `effect` (positive in the paper's direction), `spread` (the seeds'
    largest standard deviation), `seeds` (how many were compared) and `label`."""

    effect: float
    spread: float
    seeds: int
    label: str

    @property
    def against(self) -> bool:
        """Whether the point estimate lies against the paper's direction (effect below 0)."""
        return self.effect < 0

    def describe(self, digits: int = 4) -> str:
        """`effect +x against 2 x spread y over n seeds: label`, the label marked
        "(against the paper)" where the effect is below 0, whatever the label."""
        return (
            f"effect {self.effect:+.{digits}f} against {NOISE:g} x spread "
            f"{self.spread:.{digits}f} over {self.seeds} seed{'s' if self.seeds != 1 else ''}: "
            f"{self.label}{AGAINST_MARK if self.against else ''}"
        )

    def as_dict(self) -> dict[str, float | int | str]:
        return {
            "effect": self.effect,
            "spread": self.spread,
            "seeds": self.seeds,
            "verdict": self.label,
        }


def seed_sd(values: Sequence[float]) -> float:
    """The sample standard deviation over seeds (0 for fewer than two)."""
    return statistics.stdev(values) if len(values) > 1 else 0.0


def _sign(direction: Direction) -> float:
    if direction not in ("higher", "lower"):
        raise ValueError(f"direction must be 'higher' or 'lower', not {direction!r}")
    return 1.0 if direction == "higher" else -1.0


def pairs(ours: Values, baseline: Values) -> tuple[list[float], list[float]]:
    """The two sides' values on the seeds both have (by seed, or by position)."""
    if isinstance(ours, Mapping) != isinstance(baseline, Mapping):
        raise ValueError("paired values must both be sequences or both be mappings by seed")
    if isinstance(ours, Mapping) and isinstance(baseline, Mapping):
        seeds = sorted(ours.keys() & baseline.keys())
        return [ours[s] for s in seeds], [baseline[s] for s in seeds]
    assert isinstance(ours, Sequence) and isinstance(baseline, Sequence)
    if len(ours) != len(baseline):
        raise ValueError(f"paired values differ in length: {len(ours)} and {len(baseline)}")
    return list(ours), list(baseline)


def _values(side: Values) -> list[float]:
    return list(side.values()) if isinstance(side, Mapping) else list(side)


def label_of(effect: float, spread: float, seeds: int, disagree: bool = False) -> str:
    """The rule itself, on an effect already signed in the paper's direction."""
    if seeds < MIN_SEEDS or (disagree and seeds < MIN_SEEDS_DISAGREEING):
        return TOO_FEW_SEEDS
    if effect > NOISE * spread:
        return HOLDS
    if effect < -NOISE * spread:
        return DOES_NOT_HOLD
    return WITHIN_NOISE


def judge(
    ours: Values,
    baseline: Values | float,
    direction: Direction,
    paired: bool = True,
) -> Verdict:
    """Judge "ours moves from baseline in `direction`" over seeds.

    `paired`: the two sides share seeds (by position for sequences, by key for mappings) and
    the effect is the mean of the per-seed differences. A float baseline is a fixed
    reference, compared with each of our seeds.
    """
    sign = _sign(direction)
    if isinstance(baseline, int | float):
        ours_values = _values(ours)
        diffs = [sign * (v - float(baseline)) for v in ours_values]
        spread = seed_sd(ours_values)
    elif paired:
        ours_values, base_values = pairs(ours, baseline)
        diffs = [sign * (a - b) for a, b in zip(ours_values, base_values, strict=True)]
        spread = max(seed_sd(ours_values), seed_sd(base_values), seed_sd(diffs))
    else:
        ours_values, base_values = _values(ours), _values(baseline)
        if not ours_values or not base_values:
            return Verdict(0.0, 0.0, 0, TOO_FEW_SEEDS)
        effect = sign * (statistics.fmean(ours_values) - statistics.fmean(base_values))
        spread = max(seed_sd(ours_values), seed_sd(base_values))
        seeds = min(len(ours_values), len(base_values))
        return Verdict(effect, spread, seeds, label_of(effect, spread, seeds))
    if not diffs:
        return Verdict(0.0, 0.0, 0, TOO_FEW_SEEDS)
    effect = statistics.fmean(diffs)
    disagree = any(d > 0 for d in diffs) and any(d < 0 for d in diffs)
    return Verdict(effect, spread, len(diffs), label_of(effect, spread, len(diffs), disagree))
