"""Failure detection's settings and the measure of its margin (how long pings took)."""

from __future__ import annotations

import pytest

from recsync.app.config.load import load_config
from recsync.coordinator.measures import answer_times
from recsync.coordinator.recovery import RecoveryPolicy


def test_answer_times_give_the_median_the_nearest_rank_99th_percentile_and_the_longest():
    assert answer_times([]) == {"count": 0}
    seconds = [0.01 * i for i in range(1, 201)]  # 0.01 .. 2.00
    assert answer_times(seconds) == {
        "count": 200,
        "median_s": 1.01,
        "p99_s": 1.98,
        "max_s": 2.0,
    }


def test_the_ping_settings_default_to_the_measured_choice_and_refuse_what_cannot_detect():
    policy = RecoveryPolicy()
    assert (policy.ping_every_s, policy.ping_timeout_s) == (2.0, 10.0)
    assert (policy.call_timeout_s, policy.replace_wait_s) == (1_000.0, 300.0)
    with pytest.raises(ValueError, match="ping_timeout_s must be > 0"):
        RecoveryPolicy(ping_timeout_s=0.0)
    with pytest.raises(ValueError, match="replace_wait_s must be > 0"):
        RecoveryPolicy(replace_wait_s=-1.0)


def test_the_ping_settings_come_from_the_recovery_section(tmp_path):
    config = tmp_path / "job.toml"
    config.write_text(
        "[recovery]\nping_every_s = 1.0\nping_timeout_s = 4.0\n"
        "call_timeout_s = 120.0\nreplace_wait_s = 900.0\n"
    )
    policy = load_config(config).recovery.to_spec()
    assert (policy.ping_every_s, policy.ping_timeout_s) == (1.0, 4.0)
    assert (policy.call_timeout_s, policy.replace_wait_s) == (120.0, 900.0)
    config.write_text("[recovery]\nping_timeout_s = -1\n")
    with pytest.raises(Exception, match="recovery.ping_timeout_s"):
        load_config(config)
