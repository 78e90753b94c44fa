"""How reversed claims settle (experiments/repro/settle.py): every variant tuned on the same
grid until its choice is interior, and the flattening criterion of a held-out loss curve."""

from __future__ import annotations

import math

import pytest

from experiments.repro.settle import MAX_EXTENSIONS, Flattening, Grid, best, edge, tune


def scored(optimum: dict[str, float], calls: list[list]) -> object:
    """Scores peaking at each variant's `optimum` (log distance), recording each round."""

    def run(points):
        calls.append(list(points))
        return [-abs(math.log2(value / optimum[v])) for v, value in points]

    return run


def test_an_interior_choice_needs_no_extension_and_every_variant_runs_the_same_grid():
    calls: list[list] = []
    grid = Grid((0.25, 0.5, 1.0, 2.0))
    tuned = tune(["a", "b"], grid, scored({"a": 0.5, "b": 1.0}, calls), higher_is_better=True)
    assert len(calls) == 1 and sorted(calls[0]) == sorted(
        [(v, x) for v in "ab" for x in grid.values]
    )
    assert tuned["a"].chosen == 0.5 and tuned["b"].chosen == 1.0
    assert not tuned["a"].at_edge and tuned["a"].extensions == 0


def test_a_choice_at_an_edge_extends_the_grid_past_it_until_interior():
    calls: list[list] = []
    tuned = tune(["a", "b"], Grid((1.0, 2.0, 4.0)), scored({"a": 16.0, "b": 2.0}, calls), True)
    assert calls[1:] == [[("a", 8.0)], [("a", 16.0)], [("a", 32.0)]]
    assert tuned["a"].chosen == 16.0 and not tuned["a"].at_edge and tuned["a"].extensions == 3
    assert tuned["b"].extensions == 0


def test_an_edge_still_reached_after_the_last_extension_is_reported():
    tuned = tune(["a"], Grid((1.0, 2.0, 4.0)), scored({"a": 0.001}, []), True)
    assert tuned["a"].extensions == MAX_EXTENSIONS
    assert tuned["a"].chosen == 0.125 and tuned["a"].at_edge


def test_a_diverged_run_scores_worst_and_lower_is_better_for_a_loss():
    assert best({1.0: math.nan, 2.0: 0.6, 4.0: 0.5}, higher_is_better=False) == 4.0
    assert best({1.0: math.nan, 2.0: 0.6, 4.0: 0.5}, higher_is_better=True) == 2.0
    assert edge({1.0: 0, 2.0: 0, 4.0: 0}, 2.0) is None


def test_grids_refuse_too_few_or_unsorted_values():
    with pytest.raises(ValueError, match="ascending"):
        Grid((2.0, 1.0, 4.0))
    with pytest.raises(ValueError, match="3 or more"):
        Grid((1.0, 2.0))


def test_a_curve_is_flat_when_its_last_quarter_improved_less_than_the_tolerance():
    rule = Flattening(last_fraction=0.25, tolerance=0.005)
    falling = [(0, 0.70), (25, 0.60), (50, 0.55), (75, 0.53), (100, 0.52)]
    assert rule.change(falling) == pytest.approx((0.53 - 0.52) / 0.52)
    assert not rule.flat(falling)
    level = [(0, 0.70), (50, 0.521), (75, 0.5212), (100, 0.52)]
    assert rule.flat(level)
    assert math.isnan(rule.change([(90, 0.6), (100, 0.5)]))  # nothing at or before 75
    assert not rule.flat([(90, 0.6), (100, 0.5)])
    assert "0.5%" in rule.describe() and "25%" in rule.describe()
