"""The Python API (recsync.Job) on the simulator: made from a dict or a file, mistakes
named where the job is made, a run's summary and directory, a resumed run."""

from __future__ import annotations

import json

import pytest

import recsync
from recsync.errors import ConfigError

SMALL = {"data": {"synthetic": {"num_train": 2_000, "num_test": 500}}}


def small_job(tmp_path, **table):
    return recsync.Job.from_dict({**SMALL, **table}, {"run.runs_dir": str(tmp_path / "runs")})


def test_a_simulated_run_returns_its_summary_and_writes_its_directory(tmp_path):
    summary = small_job(tmp_path, strategy={"name": "async"}).simulate(name="first")
    written = json.loads((tmp_path / "runs" / "first" / "summary.json").read_text())
    assert summary["run_dir"] == str(tmp_path / "runs" / "first")
    assert summary["examples_trained"] == written["examples_trained"] == 2_000
    assert summary["strategy"].startswith("async")
    assert summary["wall_seconds"] > 0


def test_the_same_job_from_a_file_and_from_a_dict_is_one_config(tmp_path):
    path = tmp_path / "job.toml"
    path.write_text('[strategy]\nname = "sync"\n[train]\nbatch_size = 64\n')
    from_file = recsync.Job.from_toml(path, {"train.epochs": 2})
    from_dict = recsync.Job.from_dict({"strategy": {"name": "sync"}, "train": {"batch_size": 64}})
    assert from_file.config() == from_dict.with_overrides({"train.epochs": 2}).config()


def test_a_mistake_is_named_where_the_job_is_made(tmp_path):
    with pytest.raises(ConfigError, match=r"train\.batch_size"):
        recsync.Job.from_dict({"train": {"batch_size": 0}})
    with pytest.raises(ConfigError, match=r"strategy.*unknown key"):
        recsync.Job.from_dict({"strategy": {"name": "async", "no_such_key": 1}})
    with pytest.raises(ConfigError, match="cannot read config"):
        recsync.Job.from_toml(tmp_path / "missing.toml")


def test_a_resumed_run_continues_under_another_strategy(tmp_path):
    first = small_job(tmp_path, strategy={"name": "async"}).simulate(name="first")
    resumed = recsync.Job.resume(first["run_dir"], "sync", {"train.epochs": 2}).simulate()
    assert resumed["run_dir"] == str(tmp_path / "runs" / "first-then-sync")
    assert resumed["strategy"].startswith("sync")
    assert resumed["examples_trained"] == 2_000  # the second pass only


def test_a_resumed_run_with_nothing_left_to_train_is_refused(tmp_path):
    first = small_job(tmp_path, strategy={"name": "async"}).simulate(name="first")
    with pytest.raises(ConfigError, match="nothing left to train"):
        recsync.Job.resume(first["run_dir"])
