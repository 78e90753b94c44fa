"""Which way a claim settled, in the same words in every reproduction report, from its
verdict alone (`verdict.judge`'s): with the paper where it holds, against it where it does
not hold, and not settled where it is within the seeds' noise or has too few seeds (then
with the side its point estimate lies on)."""

from __future__ import annotations

from experiments.repro.verdict import DOES_NOT_HOLD, HOLDS, TOO_FEW_SEEDS, WITHIN_NOISE, Verdict

WITH_PAPER = "settled with the paper"
AGAINST_PAPER = "settled against the paper: the paper's claim does not reproduce here"


def settled(verdict: Verdict) -> str:
    """Which way a claim settled, in words:

    - holds: "settled with the paper";
    - does not hold: "settled against the paper: the paper's claim does not reproduce here";
    - within noise: "not settled either way: within the seeds' noise (the point estimate
      with the paper)", or "... against the paper)" where the point estimate is against;
    - too few seeds: "not settled: too few seeds (the point estimate with the paper)", or
      "... against the paper)".
    """
    if verdict.label == HOLDS:
        return WITH_PAPER
    if verdict.label == DOES_NOT_HOLD:
        return AGAINST_PAPER
    side = f"the point estimate {'against' if verdict.against else 'with'} the paper"
    if verdict.label == WITHIN_NOISE:
        return f"not settled either way: within the seeds' noise ({side})"
    if verdict.label == TOO_FEW_SEEDS:
        return f"not settled: too few seeds ({side})"
    raise ValueError(f"not a verdict label: {verdict.label!r}")
