"""The automatic strategy controller (strategy/controller.py), driven stretch by stretch with
measures recorded from simulated stretches (8 trainers x 1 worker, batch 64, 16,384
examples a stretch; `recsync continual --scenario` with 4x stragglers on a quarter of the
trainers)."""

from __future__ import annotations

import dataclasses

import pytest

from recsync.app.runs.continual_options import parse_controller
from recsync.errors import ConfigError
from recsync.strategy.controller import Controller, ControllerConfig, StretchMeasures

# recorded: sync, balanced; sync with stragglers; GBA with stragglers; GBA balanced (6 workers)
SYNC_CALM = StretchMeasures("sync", 1.0726, 0.358, 0.286, 0.0, 0.0, 16384, 0.9291, 8)
SYNC_SLOW = StretchMeasures("sync", 4.1324, 0.4646, 0.1738, 0.0, 0.0, 16384, 1.5291, 8)
GBA_SLOW = StretchMeasures("gba", 4.0613, 0.0, 0.3813, 0.0, 0.957, 16384, 0.8156, 8)
GBA_CALM = StretchMeasures("gba", 1.0284, 0.0, 0.3728, 0.0, 0.9648, 16384, 0.7949, 6)


def test_stragglers_move_sync_to_gba_and_gba_stays_while_they_last():
    controller = Controller(ControllerConfig(probe=False))
    first = controller.decide(SYNC_CALM, day_boundary=False)
    assert first.strategy == "sync" and first.reason.startswith("balanced (slowest worker 1.07x")
    slow = controller.decide(SYNC_SLOW, day_boundary=False)
    assert slow.strategy == "gba"
    assert slow.reason == (
        "stragglers (slowest worker 4.13x a typical one, 46% of worker time at the barrier)"
    )
    assert controller.decide(GBA_SLOW, day_boundary=True).strategy == "gba"


def test_a_balanced_cluster_probes_gba_once_and_keeps_the_faster():
    controller = Controller(ControllerConfig())
    probe = controller.decide(SYNC_CALM, day_boundary=False)
    assert probe.strategy == "gba"
    assert probe.reason.endswith(
        "gba not measured on a balanced cluster yet: one stretch to measure it"
    )
    # per worker: GBA 16384 / 0.7949 / 6 = 3,435/s; sync 16384 / 0.9291 / 8 = 2,204/s
    again = controller.decide(GBA_CALM, day_boundary=False)
    assert again.strategy == "gba" and "gba ran 1.56x sync's speed there: stay" in again.reason
    assert controller.balanced_speed == pytest.approx({"gba": 3435.1, "sync": 2204.3}, rel=1e-4)
    # a margin above the measured gain: back to sync after the probe
    strict = Controller(ControllerConfig(speed_margin=0.6))
    assert [strict.decide(m, False).strategy for m in (SYNC_CALM, GBA_CALM)] == ["gba", "sync"]


def test_gba_measured_first_goes_back_to_sync_to_measure_it():
    controller = Controller(ControllerConfig())
    back = controller.decide(GBA_CALM, day_boundary=True)  # sync never measured balanced
    assert back.strategy == "sync"
    assert back.reason == "balanced (slowest worker 1.03x a typical one)"


def test_between_the_thresholds_the_strategy_stays():
    controller = Controller(ControllerConfig(spread_on=1.5, spread_off=1.25, probe=False))
    middle = dataclasses.replace(SYNC_SLOW, step_time_spread=1.4)
    assert controller.decide(middle, day_boundary=True).strategy == "sync"
    assert controller.decide(
        dataclasses.replace(GBA_SLOW, step_time_spread=1.4), True
    ).strategy == ("gba")
    assert controller.balanced_speed == {}  # neither stretch was balanced


def test_a_replica_strategy_for_a_dense_bound_cluster_switches_only_at_day_boundaries():
    controller = Controller(ControllerConfig(dense_bound="ma", dense_on=0.3, probe=False))
    within = controller.decide(SYNC_CALM, day_boundary=False)  # dense share 0.286 < 0.3
    assert within.strategy == "sync"
    dense = dataclasses.replace(SYNC_CALM, dense_share=0.45)
    wait = controller.decide(dense, day_boundary=False)
    assert wait.strategy == "sync" and wait.reason.endswith("ma waits for the day's end")
    assert controller.decide(dense, day_boundary=True).strategy == "ma"
    stay = controller.decide(dataclasses.replace(SYNC_CALM, strategy="ma"), day_boundary=True)
    assert stay.strategy == "ma" and "synced in the background" in stay.reason
    slow_ma = dataclasses.replace(SYNC_SLOW, strategy="ma")
    assert controller.decide(slow_ma, day_boundary=False).strategy == "ma"  # waits for the day
    assert controller.decide(slow_ma, day_boundary=True).strategy == "gba"


def test_nothing_measured_stays_and_replay_is_deterministic():
    controller = Controller(ControllerConfig())
    empty = dataclasses.replace(SYNC_SLOW, examples=0)
    assert controller.decide(empty, True).reason == "nothing measured: stay"
    stretches = [SYNC_CALM, SYNC_SLOW, GBA_SLOW, GBA_CALM, GBA_CALM]
    runs = []
    for _ in range(2):
        c = Controller(ControllerConfig())
        runs.append([c.decide(m, i % 2 == 1) for i, m in enumerate(stretches)])
    assert runs[0] == runs[1]


def test_controller_config_is_validated_and_parsed():
    with pytest.raises(ValueError, match="balanced must be one of"):
        ControllerConfig(balanced="gba")
    with pytest.raises(ValueError, match="do not wait for each other"):
        ControllerConfig(stragglers="sync")
    with pytest.raises(ValueError, match="1 < spread_off <= spread_on"):
        ControllerConfig(spread_on=1.2, spread_off=1.3)
    assert parse_controller("default") == ControllerConfig()
    assert parse_controller("spread_on=1.3, stragglers=async,probe=false") == ControllerConfig(
        spread_on=1.3, stragglers="async", probe=False
    )
    with pytest.raises(ConfigError, match="probe = 'no' is not true or false"):
        parse_controller("probe=no")
    with pytest.raises(ConfigError, match="'spread=2' is not KEY=VALUE"):
        parse_controller("spread=2")
    with pytest.raises(ConfigError, match="spread_on = 'x' is not a number"):
        parse_controller("spread_on=x")
    with pytest.raises(ConfigError, match="--controller: controller.dense_bound"):
        parse_controller("dense_bound=sync")
