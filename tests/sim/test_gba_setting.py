"""The gba-stragglers reproduction's setting does what its report claims of it: in the main
setting GBA's token decay excludes gradients (so GBA and BSP differ), at a mild slowdown it
does not. Priced math (no tensors): the exclusions depend on timing alone."""

from __future__ import annotations

from experiments.repro import gba


def excluded(variant: str, slowdown: float) -> dict[str, int]:
    point = gba.Point(variant, 0, slowdown=slowdown, steps=30, math="priced")
    row = gba.run_point(point)
    assert row["global_steps"] == 30 and row["test_auc"] is None
    return row["dropped"]


def test_gba_decay_fires_in_the_main_setting_and_not_at_a_mild_slowdown():
    assert excluded("GBA", gba.MAIN_SLOWDOWN).get("stale", 0) > 0  # BSP never excludes
    assert not excluded("GBA", 2.0)


def test_study_points_reuse_the_tuning_runs_and_are_plain_values():
    lr = {"sync": 1.0, "async": 0.25}
    points = gba.study_points(lr)
    assert len(points) == len(set(points)) == 18 + 9 + 54
    assert gba.Point("sync", 0, lr_factor=1.0) in points  # a tuning run's point
    assert repr(points[0]) == (
        "Point(variant='sync', seed=0, slowdown=8.0, fraction=0.125, lr_factor=1.0, steps=500, "
        "math='real')"
    )
