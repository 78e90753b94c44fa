"""`recsync advise`'s ranking (app/advise/rank.py): fastest among those within noise of
the best quality, then the unmeasured, then the worse; unmeasured speed, then lower
bounds, last."""

from __future__ import annotations

import pytest

from recsync.app.advise.candidates import Candidate
from recsync.app.advise.rank import (
    AUC_FLOOR,
    LOWER_BOUND,
    UNKNOWN,
    UNMEASURED,
    WITHIN_NOISE,
    WORSE,
    Measured,
    indistinguishable,
    mean_spread,
    rank,
    within_noise,
)


def measured(name: str, eps: float | None, aucs: list[float] | None = None) -> Measured:
    candidate = Candidate(name, 2, 2, 2, None, {}, {"name": name}, 7)
    speed = {"clean": None if eps is None else {"eps_steady": eps}}
    quality = [{"test_auc": a, "test_ne": 0.9} for a in aucs or []]
    return Measured(candidate, speed, quality)


def test_fastest_within_noise_of_the_best_first():
    rows = rank(
        [
            measured("sync", 1000, [0.760, 0.762]),
            measured("async", 4000, [0.700, 0.702]),
            measured("gba", 3000, [0.758, 0.760]),
            measured("bsp", 2000),
            measured("easgd", None),
        ],
        examples_per_pass=1_000_000,
    )
    assert [r.candidate.strategy for r in rows] == [
        "gba",
        "sync",
        "bsp",
        "async",
        "easgd",
    ]
    assert [r.tier for r in rows] == [WITHIN_NOISE, WITHIN_NOISE, UNKNOWN, WORSE, UNMEASURED]
    assert [r.rank for r in rows] == [1, 2, 3, 4, 5]
    assert rows[0].time_per_pass_s == pytest.approx(1_000_000 / 3000)
    assert rows[0].auc == pytest.approx((0.759, 0.0014142), abs=1e-6)
    assert rows[4].time_per_pass_s is None and rows[4].eps is None


def test_noise_is_twice_the_larger_spread_never_below_the_floor():
    assert within_noise((0.76, 0.01), (0.741, 0.0))  # 0.019 <= 2 x 0.01
    assert not within_noise((0.76, 0.01), (0.739, 0.0))
    assert within_noise((0.76, 0.0), (0.76 - AUC_FLOOR / 2, 0.0))  # one seed: the floor
    assert not within_noise((0.76, 0.0), (0.76 - 2 * AUC_FLOOR, 0.0))


def test_no_quality_at_all_ranks_by_speed():
    rows = rank([measured("sync", 10), measured("async", 30), measured("gba", 20)], 100)
    assert [r.candidate.strategy for r in rows] == ["async", "gba", "sync"]
    assert {r.tier for r in rows} == {UNKNOWN}


def test_mean_spread():
    assert mean_spread([1.0]) == (1.0, 0.0)
    assert mean_spread([1.0, 3.0]) == pytest.approx((2.0, 2**0.5))


def test_a_lower_bound_is_ranked_last_and_sets_no_best_quality():
    rows = rank(
        [
            measured("independent", 9000, [0.770, 0.771]),  # fastest, and best by noise
            measured("sync", 1000, [0.760, 0.761]),
            measured("async", 3000, [0.759, 0.760]),
        ],
        examples_per_pass=1_000,
    )
    assert [r.candidate.strategy for r in rows] == ["async", "sync", "independent"]
    assert [r.tier for r in rows] == [WITHIN_NOISE, WITHIN_NOISE, LOWER_BOUND]
    assert [r.candidate.strategy for r in indistinguishable(rows)] == ["async", "sync"]


def test_an_advice_alone_within_noise_has_nothing_alike():
    rows = rank(
        [measured("sync", 1000, [0.760, 0.761]), measured("async", 3000, [0.70, 0.701])], 1_000
    )
    assert [r.tier for r in rows] == [WITHIN_NOISE, WORSE] and indistinguishable(rows) == []
