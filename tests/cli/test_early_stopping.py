"""Early stopping: the rule (pure), and runs that stop once it says so, on the simulator
and the reference trainer (the Ray engine stops through the same reader stop as Ctrl-C)."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest
import torch
from test_cli import config_file, invoke, parquet_files, parquet_overrides  # noqa: F401

from recsync.coordinator.evaluation import EarlyStopping, EarlyStopWatch


def watch_stops(rule: EarlyStopping, values: list[float]) -> list[bool]:
    watch = EarlyStopWatch(rule)
    return [watch.observe({"examples": i, rule.metric: v}) for i, v in enumerate(values)]


def test_stop_after_patience_records_without_improvement_once():
    rule = EarlyStopping("test_logloss", patience=2)
    assert watch_stops(rule, [0.6, 0.55, 0.56, 0.57, 0.58]) == [False, False, False, True, False]
    auc = EarlyStopping("test_auc", patience=1, min_delta=0.01)
    assert watch_stops(auc, [0.70, 0.705, 0.72]) == [False, True, False]
    assert not any(watch_stops(EarlyStopping(patience=0), [0.5, 0.6, 0.7]))


def test_no_stop_before_min_examples():
    flat = [0.6, 0.6, 0.6, 0.6, 0.6, 0.6]  # examples 0, 1, ..., 5
    assert watch_stops(EarlyStopping(patience=2), flat).index(True) == 2
    assert watch_stops(EarlyStopping(patience=2, min_examples=4), flat).index(True) == 4
    with pytest.raises(ValueError, match="min_examples"):
        EarlyStopping(min_examples=-1)


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


@pytest.mark.parametrize("command", ["simulate", "train"])
def test_the_best_evaluated_model_is_kept_and_scores_as_its_record(
    parquet_files,  # noqa: F811
    command,
):
    # 6 passes at a learning rate that overfits 2,000 examples: the held-out logloss is
    # best part-way, and best.pt must be that record's model, not the final one
    workdir, config, train, test = parquet_files
    name = f"best-{command}"
    sets = parquet_overrides(
        train,
        **{
            "data.test_path": test.as_posix(),
            "train.sparse_optimizer.lr": "0.5",
            "train.dense_optimizer.lr": "0.05",
        },
    )
    strategy = ["--strategy", "async"] if command == "simulate" else ["--strategy", "reference"]
    args = ["-c", config, "--name", name, "--no-progress", "--epochs", "6", *strategy, *sets]
    result = invoke(command, *args)
    assert result.exit_code == 0, result.output
    run = workdir / "runs" / name
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    losses = [r["test_logloss"] for r in records]
    best = json.loads((run / "summary.json").read_text())["best"]
    assert best["metric"] == "test_logloss" and best["best"] == min(losses)
    assert best["best_examples"] == records[losses.index(min(losses))]["examples"]
    assert best["best_examples"] < records[-1]["examples"], "the setting must overfit"
    scores = workdir / f"{name}.parquet"
    result = invoke("predict", str(run), str(test), "--out", str(scores), "--best")
    assert result.exit_code == 0, result.output
    table = pq.read_table(scores)
    labels = torch.tensor(table.column("label").to_pylist(), dtype=torch.float64)
    probs = torch.tensor(table.column("score").to_pylist(), dtype=torch.float64)
    logloss = float(torch.nn.functional.binary_cross_entropy(probs, labels))
    assert logloss == pytest.approx(min(losses), abs=1e-5)
    assert invoke("export", str(run), str(workdir / f"{name}-model"), "--best").exit_code == 0
