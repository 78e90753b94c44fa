"""Which way a claim settled, in the one set of words every report uses."""

from __future__ import annotations

import pytest

from experiments.repro.settled_words import settled
from experiments.repro.verdict import DOES_NOT_HOLD, HOLDS, TOO_FEW_SEEDS, WITHIN_NOISE, Verdict


def verdict(label: str, against: bool) -> Verdict:
    return Verdict(-0.01 if against else 0.01, 0.001, 5, label)


@pytest.mark.parametrize("against", [False, True])
def test_holds_and_does_not_hold_settle_whatever_the_point_estimate(against: bool) -> None:
    assert settled(verdict(HOLDS, against)) == "settled with the paper"
    assert settled(verdict(DOES_NOT_HOLD, against)) == (
        "settled against the paper: the paper's claim does not reproduce here"
    )


@pytest.mark.parametrize("against, side", [(False, "with"), (True, "against")])
def test_within_noise_and_too_few_seeds_settle_neither_way_and_say_the_side(
    against: bool, side: str
) -> None:
    assert settled(verdict(WITHIN_NOISE, against)) == (
        f"not settled either way: within the seeds' noise (the point estimate {side} the paper)"
    )
    assert settled(verdict(TOO_FEW_SEEDS, against)) == (
        f"not settled: too few seeds (the point estimate {side} the paper)"
    )


def test_an_unknown_label_is_refused() -> None:
    with pytest.raises(ValueError, match="not a verdict label"):
        settled(verdict("maybe", False))
