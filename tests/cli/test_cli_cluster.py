"""`recsync simulate` and `recsync plan` on a tiny synthetic job."""

from __future__ import annotations

import json
import tomllib

import pytest
from test_cli import config_file, invoke


def test_simulate_writes_the_run_directory_with_virtual_times(tmp_path):
    path = config_file(tmp_path)
    profile = tmp_path / "profile.toml"  # as `recsync calibrate` writes one
    profile.write_text("[cost.stragglers]\nfraction = 0.5\nslowdown = 2.0\n")
    result = invoke(
        "simulate",
        "-c",
        path,
        "--name",
        "sim",
        "--no-progress",
        "--set",
        "strategy.name=ma",
        "--profile",
        str(profile),
        "--set",
        "cost.stragglers.slowdown=3.0",  # deprecated: the profile's key, inline
    )
    assert result.exit_code == 0, result.output
    assert "deprecated: [cost] in the job config" in " ".join(result.output.split())
    run_dir = tmp_path / "runs" / "sim"
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["engine"] == "sim" and summary["strategy"].startswith("S-MA")
    assert summary["examples_trained"] == 2000 and summary["syncs"] > 0
    assert (run_dir / "curves.png").stat().st_size > 0
    assert "virtual seconds" in result.output
    kept = tomllib.loads((run_dir / "cost_profile.toml").read_text())  # what --resume reads
    assert (kept["cost"]["stragglers"]["fraction"], kept["cost"]["stragglers"]["slowdown"]) == (
        0.5,
        3.0,
    )
    config = tomllib.loads((run_dir / "config.toml").read_text())
    assert config["simulate"]["profile"] == str((run_dir / "cost_profile.toml").absolute())
    assert "cost" not in config


def test_simulate_names_a_profile_it_cannot_read(tmp_path):
    missing = tmp_path / "missing.toml"
    result = invoke("simulate", "-c", config_file(tmp_path), "--profile", str(missing))
    assert result.exit_code == 1
    assert f"cost profile {missing}: cannot read it" in " ".join(result.output.split())
    assert not (tmp_path / "runs").exists()  # refused before a run dir was made


def test_simulate_refuses_the_reference_strategy(tmp_path):
    result = invoke("simulate", "-c", config_file(tmp_path), "--no-progress")
    assert result.exit_code == 1 and "strategy.name" in result.output


def test_plan_prints_each_server_and_its_load(tmp_path):
    result = invoke(
        "plan",
        "-c",
        config_file(tmp_path),
        "--set",
        "strategy.name=easgd",
        "--set",
        "cluster.num_embedding_servers=3",
    )
    assert result.exit_code == 0, result.output
    for server in ("emb-0", "emb-1", "emb-2", "sync-0"):
        assert server in result.output


def test_simulate_stop_checkpoint_and_resume_under_another_strategy(tmp_path):
    path = config_file(tmp_path)
    first = invoke(
        "simulate",
        "-c",
        path,
        "--name",
        "head",
        "--no-progress",
        "--strategy",
        "sync",
        "--set",
        "cluster.num_dense_servers=2",
        "--stop-after",
        "1000",
    )
    assert first.exit_code == 0, first.output
    head = json.loads((tmp_path / "runs" / "head" / "summary.json").read_text())
    assert head["examples_trained"] == 1000 and head["checkpoint"]["data_position"] == 1000
    assert (tmp_path / "runs" / "head" / "checkpoint.pt").stat().st_size > 0
    second = invoke(
        "simulate",
        "--resume",
        str(tmp_path / "runs" / "head"),
        "--strategy",
        "gba",
        "--no-progress",
    )
    assert second.exit_code == 0, second.output
    tail = json.loads((tmp_path / "runs" / "head-then-gba" / "summary.json").read_text())
    assert tail["strategy"].startswith("GBA") and tail["examples_trained"] == 1000
    assert tail["checkpoint"]["data_position"] == 2000
    assert tail["checkpoint"]["global_step"] > head["checkpoint"]["global_step"]


def test_resume_from_a_directory_without_checkpoint_is_a_clear_error(tmp_path):
    result = invoke(
        "simulate", "-c", config_file(tmp_path), "--resume", str(tmp_path), "--no-progress"
    )
    assert result.exit_code == 1 and "no checkpoint" in result.output


@pytest.mark.parametrize(("every", "marks"), [(600, [600, 1200, 1800]), (1000, [1000])])
def test_simulate_writes_one_metrics_record_per_evaluation_mark_and_one_at_the_end(
    tmp_path, every, marks
):
    # 2,000 examples: with eval_every 1,000 the last mark is the stream's end, whose record
    # is the run's last (written once)
    path = config_file(tmp_path)
    args = ("--name", "ev", "--no-progress", "--strategy", "async")
    result = invoke("simulate", "-c", path, *args, "--set", f"run.eval_every={every}")
    assert result.exit_code == 0, result.output
    run_dir = tmp_path / "runs" / "ev"
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    summary = json.loads((run_dir / "summary.json").read_text())
    examples = [r["examples"] for r in records]
    assert len(records) == len(marks) + 1 and examples[-1] == 2000
    assert examples == sorted(set(examples))  # none twice, the end's included
    assert all(e <= m for e, m in zip(examples, marks, strict=False))  # evaluated at the mark
    assert all(0.0 < r["test_auc"] < 1.0 and r["train_loss"] > 0 for r in records)
    assert records[-1]["test_auc"] == summary["test_auc"]
    seconds = [r["train_seconds"] for r in records]
    assert seconds == sorted(seconds) and seconds[-1] == summary["train_seconds"]


def test_compare_tabulates_runs_and_draws_their_curves(tmp_path):
    path = config_file(tmp_path)
    for strategy in ("async", "easgd"):
        args = ("-c", path, "--name", strategy, "--no-progress", "--strategy", strategy)
        assert invoke("simulate", *args).exit_code == 0
    reference = invoke("train", "-c", path, "--name", "ref", "--no-progress")
    assert reference.exit_code == 0, reference.output
    runs = [str(tmp_path / "runs" / n) for n in ("async", "easgd", "ref")]
    out = tmp_path / "both.png"
    result = invoke("compare", *runs, "--out", str(out))
    assert result.exit_code == 0, result.output
    assert "S-EASGD" in result.output and "reference" in result.output
    assert "2,000" in result.output and out.stat().st_size > 0
    missing = invoke("compare", str(tmp_path), "--out", str(out))
    assert missing.exit_code == 1 and "no summary.json" in missing.output


def test_simulate_math_priced_runs_the_same_times_without_quality(tmp_path):
    path = config_file(tmp_path)
    summaries = {}
    for math in ("real", "priced"):
        result = invoke(
            "simulate", "-c", path, "--name", math, "--no-progress", "--math", math,
            "--set", "strategy.name=easgd",
        )  # fmt: skip
        assert result.exit_code == 0, result.output
        summaries[math] = json.loads((tmp_path / "runs" / math / "summary.json").read_text())
    real, priced = summaries["real"], summaries["priced"]
    assert priced["math"] == "priced" and "math" not in real
    assert priced["train_seconds"] == real["train_seconds"] and priced["eps"] == real["eps"]
    assert priced["test_auc"] is None and priced["train_loss"] is None
    assert real["test_auc"] is not None
    assert any("eval_every" in skipped for skipped in priced["priced_math_skipped"])
    assert not (tmp_path / "runs" / "priced" / "checkpoint.pt").exists()


def test_simulate_math_priced_refuses_early_stopping(tmp_path):
    result = invoke(
        "simulate", "-c", config_file(tmp_path), "--no-progress", "--math", "priced",
        "--set", "strategy.name=easgd", "--set", "run.early_stopping.patience=2",
    )  # fmt: skip
    assert result.exit_code != 0
    assert "run.early_stopping.patience" in " ".join(result.output.split())
