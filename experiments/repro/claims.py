"""A reproduction's headline claims, as its report judges them: each report module with a
`claims(results) -> list[Claim]` computes them from its stored results file with the same
functions its report text calls, and the docs' claims table (docgen/claims_table.py) is
rendered from them, so no figure of it is typed by hand.

A claim says what kind of evidence it is (`evidence`): "measured", an output of the model's
math and the simulated system, or "built-in", an effect that follows from what the
simulator or the injected fault puts in (an injected delay, a slowdown, a cost profile
chosen to land near the paper's), with the `mechanism` that builds it in. And it shows its
effect (`Effect`): our number with its unit, its spread over the seeds, and its direction
against the paper's claim, computed from the per-seed values themselves: a "holds" whose
point estimate lies against the paper is refused (`Claim.__post_init__`)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import KW_ONLY, dataclass
from typing import Literal

from experiments.repro.verdict import DOES_NOT_HOLD, HOLDS, Verdict, pairs, seed_sd

Evidence = Literal["measured", "built-in"]
MEASURED: Evidence = "measured"
BUILT_IN: Evidence = "built-in"

WITH, AGAINST, NONE = "with the paper", "against the paper", "none"
DIRECTIONS = (WITH, AGAINST, NONE)

# which way of `reference` the paper's claim puts our number; "within": at most
# `tolerance` from it
Expect = Literal["higher", "lower", "within"]

PerSeed = Sequence[float] | Mapping[int, float]


def direction_of(
    size: float, expect: Expect, reference: float = 0.0, tolerance: float = 0.0
) -> str:
    """Where the point estimate `size` lies against the paper's claim: WITH, AGAINST, or NONE
    (on the reference itself, or not a number)."""
    if math.isnan(size):
        return NONE
    if expect == "within":
        if tolerance <= 0:
            raise ValueError(f"'within' needs a positive tolerance, not {tolerance!r}")
        return WITH if abs(size - reference) <= tolerance else AGAINST
    if expect not in ("higher", "lower"):
        raise ValueError(f"expect must be 'higher', 'lower' or 'within', not {expect!r}")
    if size == reference:
        return NONE
    return WITH if (size > reference) == (expect == "higher") else AGAINST


def _values(values: PerSeed | float) -> tuple[float, ...]:
    if isinstance(values, int | float):
        return (float(values),)
    if isinstance(values, Mapping):
        return tuple(float(values[s]) for s in sorted(values))
    return tuple(float(v) for v in values)


@dataclass(frozen=True)
class Effect:
    """Our number for a claim: `values` per seed (one where there is one run, or one figure
    over runs whose spread is not kept), in `unit`; the paper's claim puts it `expect` of
    `reference` (within `tolerance` of it for "within"). `size` is their mean."""

    values: tuple[float, ...]
    unit: str
    expect: Expect
    reference: float = 0.0
    tolerance: float = 0.0
    digits: int = 4

    def __post_init__(self) -> None:
        if not self.values:
            raise ValueError("an effect needs one value at least")
        if not self.unit.strip():
            raise ValueError("an effect needs its unit")
        direction_of(self.size, self.expect, self.reference, self.tolerance)  # checks `expect`

    @classmethod
    def of(
        cls,
        values: PerSeed | float,
        unit: str,
        expect: Expect,
        reference: float = 0.0,
        tolerance: float = 0.0,
        digits: int = 4,
    ) -> Effect:
        """From per-seed values (a sequence, a mapping by seed, or one number)."""
        return cls(_values(values), unit, expect, reference, tolerance, digits)

    @classmethod
    def difference(
        cls, ours: PerSeed, baseline: PerSeed, unit: str, expect: Expect, digits: int = 4
    ) -> Effect:
        """Ours minus baseline, paired by seed as `verdict.judge` pairs them; the paper's
        claim puts the difference `expect` of 0."""
        a, b = pairs(ours, baseline)
        return cls(tuple(x - y for x, y in zip(a, b, strict=True)), unit, expect, digits=digits)

    @property
    def size(self) -> float:
        return statistics.fmean(self.values)

    @property
    def seeds(self) -> int:
        return len(self.values)

    @property
    def spread(self) -> float:
        """The standard deviation over the seeds (0 for one)."""
        return seed_sd(list(self.values))

    @property
    def direction(self) -> str:
        return direction_of(self.size, self.expect, self.reference, self.tolerance)

    @property
    def with_paper(self) -> int:
        """How many seeds' values lie with the paper's claim."""
        return sum(
            direction_of(v, self.expect, self.reference, self.tolerance) == WITH
            for v in self.values
        )

    def _bare(self, value: float) -> str:
        """The number alone: a ratio's (a unit "x ...") unsigned, any other signed."""
        return f"{value:{'' if self.unit.startswith('x') else '+'}.{self.digits}f}"

    def _number(self, value: float) -> str:
        """In the unit: `6.65x`, `+16.0% less time`, `+0.0458 eval logloss`."""
        joined = self.unit.startswith(("x", "%"))
        return self._bare(value) + (self.unit if joined else f" {self.unit}")

    def describe_size(self) -> str:
        """`+0.0458 eval logloss`, `6.65x`: the mean over the seeds, in its unit."""
        return self._number(self.size)

    def describe_spread(self) -> str:
        """`one seed`, or the standard deviation, the range and how many seeds lie with
        the paper."""
        if self.seeds == 1:
            return "one seed"
        low, high = min(self.values), max(self.values)
        return (
            f"sd {self.spread:.{self.digits}f}; {self._bare(low)} to {self._bare(high)}; "
            f"{self.with_paper} of {self.seeds} seeds with the paper"
        )

    def describe_expect(self) -> str:
        """What the paper's claim asks of the number: `> 0`, `< 1.1`, `within 0.2 of 0`."""
        if self.expect == "within":
            return f"within {self.tolerance:.4g} of {self.reference:.4g}"
        return f"{'>' if self.expect == 'higher' else '<'} {self.reference:.4g}"


@dataclass(frozen=True)
class Claim:
    """One claim of a paper against our measurement of it.

    `claim`: the paper's claim in words; `paper`: the paper's figure or setting in words;
    `ours`: our setting in words with our number(s); `verdict`: `verdict.judge`'s on it;
    `bears_on`: the strategy or choice it informs ("gba", "async", "controller",
    "hash embeddings", ...), a short lowercase key the docs link to; `effect`: our number,
    its spread and its direction against the claim; `evidence`: "measured" or "built-in",
    and for "built-in" the `mechanism` that builds the effect in, in one line.
    """

    claim: str
    paper: str
    ours: str
    verdict: Verdict
    bears_on: str
    _: KW_ONLY
    effect: Effect
    evidence: Evidence
    mechanism: str = ""

    def __post_init__(self) -> None:
        if not self.bears_on or self.bears_on != self.bears_on.strip().lower():
            raise ValueError(f"bears_on must be a short lowercase key, not {self.bears_on!r}")
        for name in ("claim", "paper", "ours"):
            if not getattr(self, name).strip():
                raise ValueError(f"a claim's {name} must not be empty")
        if self.evidence not in (MEASURED, BUILT_IN):
            raise ValueError(
                f"evidence must be {MEASURED!r} or {BUILT_IN!r}, not {self.evidence!r}"
            )
        if self.evidence == BUILT_IN and not self.mechanism.strip():
            raise ValueError("a built-in effect needs the mechanism that builds it in")
        if self.evidence == MEASURED and self.mechanism:
            raise ValueError("a measured effect has no mechanism (built-in ones do)")
        if "\n" in self.mechanism:
            raise ValueError("a mechanism is one line")
        direction = self.effect.direction
        if self.verdict.label == HOLDS and direction == AGAINST:
            raise ValueError(
                f"{self.claim!r}: 'holds' where the point estimate "
                f"({self.effect.describe_size()}) is against the paper"
            )
        if self.verdict.label == DOES_NOT_HOLD and direction == WITH:
            raise ValueError(
                f"{self.claim!r}: 'does not hold' where the point estimate "
                f"({self.effect.describe_size()}) is with the paper"
            )

    @property
    def direction(self) -> str:
        return self.effect.direction

    def label(self) -> str:
        """The verdict's label, marked where the point estimate is against the paper:
        "within noise (against the paper)"."""
        if self.direction == AGAINST:
            return f"{self.verdict.label} ({AGAINST})"
        return self.verdict.label
