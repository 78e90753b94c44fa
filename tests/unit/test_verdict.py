"""The reproductions' one verdict rule (experiments/repro/verdict.py): its boundaries, both
directions, too few seeds, paired against unpaired."""

from __future__ import annotations

import statistics

import pytest

from experiments.repro.verdict import NOISE, Verdict, judge, label_of


def test_exactly_twice_the_spread_is_within_noise_and_just_above_holds() -> None:
    assert label_of(effect=0.2, spread=0.1, seeds=3) == "within noise"
    assert label_of(effect=0.2000001, spread=0.1, seeds=3) == "holds"
    assert label_of(effect=-0.2, spread=0.1, seeds=3) == "within noise"
    assert label_of(effect=-0.2000001, spread=0.1, seeds=3) == "does not hold"


def test_no_spread_and_no_effect_is_within_noise() -> None:
    assert label_of(0.0, 0.0, 5) == "within noise"
    assert label_of(1e-12, 0.0, 5) == "holds"


def test_fewer_than_three_seeds_never_hold() -> None:
    assert judge([0.9], [0.1], "higher").label == "too few seeds"
    assert judge([0.9, 0.91], [0.1, 0.11], "higher").label == "too few seeds"
    assert judge([0.9, 0.91, 0.92], [0.1, 0.11, 0.12], "higher").label == "holds"


def test_direction_signs_the_effect() -> None:
    ours, base = [1.0, 1.1, 1.2], [0.5, 0.6, 0.7]
    up = judge(ours, base, "higher")
    down = judge(ours, base, "lower")
    assert up.effect == pytest.approx(0.5) and up.label == "holds"
    assert down.effect == pytest.approx(-0.5) and down.label == "does not hold"
    assert up.spread == down.spread == pytest.approx(statistics.stdev(ours))


def test_paired_spread_takes_the_largest_of_both_sides_and_the_differences() -> None:
    ours, base = [1.0, 2.0, 3.0], [0.0, 1.5, 3.5]
    v = judge(ours, base, "higher")
    diffs = [1.0, 0.5, -0.5]
    assert v.effect == pytest.approx(statistics.fmean(diffs))
    assert v.spread == pytest.approx(max(statistics.stdev(ours), statistics.stdev(base)))
    assert v.seeds == 3


def test_paired_by_seed_uses_only_the_shared_seeds() -> None:
    v = judge({0: 1.0, 1: 1.1, 2: 1.2, 7: 9.0}, {0: 0.0, 1: 0.1, 2: 0.2}, "higher")
    assert v.seeds == 3 and v.effect == pytest.approx(1.0) and v.label == "holds"


def test_pairing_removes_a_shared_seed_effect_that_unpaired_sees_as_noise() -> None:
    # each seed moves both sides alike: paired differences are constant, the sides spread
    base = [0.70, 0.75, 0.80]
    ours = [b + 0.01 for b in base]
    paired, unpaired = judge(ours, base, "higher"), judge(ours, base, "higher", paired=False)
    assert paired.effect == pytest.approx(unpaired.effect) == pytest.approx(0.01)
    # the spread still counts each side's: both are within noise here
    assert paired.label == unpaired.label == "within noise"
    assert paired.spread == pytest.approx(0.05)


def test_seeds_that_disagree_need_five() -> None:
    ours, base = [1.0, 1.0, 1.0, 1.0], [0.0, 0.0, 0.0, 1.01]
    assert judge(ours, base, "higher").label == "too few seeds"
    assert judge([*ours, 1.0], [*base, 0.0], "higher").label == "within noise"


def test_a_fixed_reference_has_no_spread_of_its_own() -> None:
    v = judge([1.9, 2.0, 2.1], 1.5, "higher")
    assert v.effect == pytest.approx(0.5) and v.spread == pytest.approx(0.1)
    assert v.label == "holds"
    assert judge([1.9, 2.0, 2.1], 2.3, "lower").label == "holds"
    assert judge([1.9], 1.5, "higher").label == "too few seeds"


def test_unpaired_sides_may_differ_in_length() -> None:
    v = judge([1.0, 1.0, 1.0, 1.0], [0.0, 0.0, 0.0], "higher", paired=False)
    assert v.seeds == 3 and v.label == "holds"


def test_mistakes_are_value_errors() -> None:
    with pytest.raises(ValueError, match="direction"):
        judge([1.0], [0.0], "up")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="length"):
        judge([1.0, 2.0], [0.0], "higher")


def test_describe_names_effect_spread_seeds_and_label() -> None:
    text = Verdict(0.01234, 0.002, 3, "holds").describe()
    assert text == f"effect +0.0123 against {NOISE:g} x spread 0.0020 over 3 seeds: holds"


def test_a_point_estimate_against_the_paper_is_marked_whatever_the_label():
    noise = judge([-0.001, -0.002, -0.0005], 0.0, "higher")
    assert noise.against and noise.describe().endswith(": within noise (against the paper)")
    few = judge([1.0], 0.0, "lower")
    assert few.describe().endswith(": too few seeds (against the paper)")
    holds = judge([1.0, 1.1, 1.2], 0.0, "higher")
    assert not holds.against and holds.describe().endswith(": holds")
