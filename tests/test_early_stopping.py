"""Early stopping: the rule (pure), and runs that stop once it says so, on the simulator
and the reference trainer (the Ray engine stops through the same reader stop as Ctrl-C)."""

from __future__ import annotations

import json

import pytest

from recsync.coordinator.evaluation import EarlyStopping, EarlyStopWatch
from test_cli import config_file, invoke


def watch_stops(rule: EarlyStopping, values: list[float]) -> list[bool]:
    watch = EarlyStopWatch(rule)
    return [watch.observe({"examples": i, rule.metric: v}) for i, v in enumerate(values)]


def test_stop_after_patience_records_without_improvement_once():
    rule = EarlyStopping("test_logloss", patience=2)
    assert watch_stops(rule, [0.6, 0.55, 0.56, 0.57, 0.58]) == [False, False, False, True, False]
    auc = EarlyStopping("test_auc", patience=1, min_delta=0.01)
    assert watch_stops(auc, [0.70, 0.705, 0.72]) == [False, True, False]
    assert not any(watch_stops(EarlyStopping(patience=0), [0.5, 0.6, 0.7]))


def test_the_best_record_is_reported():
    watch = EarlyStopWatch(EarlyStopping("test_auc", patience=3))
    for examples, auc in ((10, 0.61), (20, 0.66), (30, 0.64)):
        watch.observe({"examples": examples, "test_auc": auc})
    assert watch.summary() == {
        "metric": "test_auc",
        "best": 0.66,
        "best_examples": 20,
        "stopped_at_examples": None,
    }


@pytest.mark.parametrize("command", ["simulate", "train"])
def test_a_run_stops_when_the_rule_says(tmp_path, command):
    # 5 epochs of 2,000 examples, evaluated every 600: min_delta 1 can never be met, so
    # the third record (the second without improvement) stops the run
    keys = ("run.early_stopping.patience=2", "run.early_stopping.min_delta=1.0")
    args = ["-c", config_file(tmp_path), "--name", "stop", "--no-progress", "--epochs", "5"]
    args += [a for key in keys for a in ("--set", key)]
    if command == "simulate":
        args += ["--strategy", "async"]
    result = invoke(command, *args)
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "runs" / "stop" / "summary.json").read_text())
    stopped = summary["early_stopping"]["stopped_at_examples"]
    assert 1_200 <= stopped < 2_400 and stopped <= summary["examples_trained"] < 3_000
