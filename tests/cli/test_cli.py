"""The `recsync` command line (recsync.app.cli.main) on tiny synthetic data."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from recsync.app.cli.main import app

TINY = """
[run]
eval_every = 600
[data.synthetic]
num_train = 2000
num_test = 500
table_rows = [40, 40, 40, 40]
[model]
embedding_dim = 4
bottom_mlp = [8]
top_mlp = [8]
[strategy]
name = "reference"
[train]
batch_size = 100
"""
SUMMARY_KEYS = {
    "run_dir",
    "examples_trained",
    "eps",
    "train_seconds",
    "train_loss",
    "test_examples",
    "test_auc",
    "test_ne",
    "test_logloss",
    "test_calibration",
    "teacher_auc",
    "skipped",
}
METRIC_KEYS = {"examples", "train_loss", "test_auc", "test_ne", "test_logloss"}
METRIC_KEYS |= {"test_calibration", "eps", "elapsed_seconds"}

runner = CliRunner()


def invoke(*args: str):
    return runner.invoke(app, list(args), env={"COLUMNS": "250"})


def config_file(tmp_path) -> str:
    path = tmp_path / "tiny.toml"
    runs = (tmp_path / "runs").as_posix()
    path.write_text(TINY.replace("[run]\n", f'[run]\nruns_dir = "{runs}"\n'))
    return str(path)


def test_train_writes_the_run_directory(tmp_path):
    result = invoke("train", "--config", config_file(tmp_path), "--name", "tiny", "--no-progress")
    assert result.exit_code == 0, result.output
    run_dir = tmp_path / "runs" / "tiny"
    assert {p.name for p in run_dir.iterdir()} >= {
        "config.json",
        "config.toml",
        "metrics.jsonl",
        "summary.json",
        "curves.png",
    }
    summary = json.loads((run_dir / "summary.json").read_text())
    assert set(summary) >= SUMMARY_KEYS
    assert summary["examples_trained"] == 2000
    assert summary["run_dir"] == str(run_dir)
    assert 0.5 < summary["test_auc"] <= 1.0 and summary["teacher_auc"] > 0.5
    assert summary["eps"] > 0 and summary["skipped"]["total"] == 0
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["examples"] for r in records] == [600, 1200, 1800, 2000]
    assert all(set(r) >= METRIC_KEYS for r in records)
    config = json.loads((run_dir / "config.json").read_text())
    assert config["run"]["name"] == "tiny" and config["data"]["synthetic"]["num_train"] == 2000
    for label in ("teacher AUC", "test AUC", "test NE", "EPS", str(run_dir)):
        assert label in result.output


def test_train_refuses_a_non_empty_run_dir_unless_forced(tmp_path):
    config = config_file(tmp_path)
    args = ("train", "--config", config, "--name", "again", "--no-progress")
    args += ("--set", "data.synthetic.num_train=300", "--set", "run.eval_every=0")
    assert invoke(*args).exit_code == 0
    refused = invoke(*args)
    assert refused.exit_code == 1
    assert "holds a run that ended" in refused.output and "Traceback" not in refused.output
    assert invoke(*args, "--force").exit_code == 0
    lines = (tmp_path / "runs" / "again" / "metrics.jsonl").read_text().splitlines()
    assert len(lines) == 1  # the forced run replaced the old metrics


def test_a_run_that_failed_before_its_end_does_not_block_a_retry(tmp_path):
    config = config_file(tmp_path)
    failed = tmp_path / "runs" / "retry"
    failed.mkdir(parents=True)
    (failed / "config.toml").write_text("# a run that failed: no summary, no checkpoint\n")
    (failed / "notes.txt").write_text("the user's own file\n")
    result = invoke("train", "-c", config, "--name", "retry", "--no-progress")
    assert result.exit_code == 0, result.output
    assert (failed / "summary.json").exists() and (failed / "notes.txt").exists()


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        ("model.bogus=1", "model.bogus: unknown key"),
        ("train.sparse_optimizer.lr=fast", "train.sparse_optimizer.lr: Input should be a valid"),
        ("train.sparse_optimizer.name=nope", "train.sparse_optimizer: unknown sparse optimizer"),
    ],
)
def test_train_reports_config_errors_in_one_line(tmp_path, override, expected):
    result = invoke("train", "--config", config_file(tmp_path), "--set", override)
    assert result.exit_code == 1
    assert expected in result.output
    assert "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1


DENSE, CATEGORICAL = [f"I{j}" for j in range(1, 14)], [f"C{f}" for f in range(1, 5)]


@pytest.fixture(scope="module")
def parquet_files(tmp_path_factory):
    """(workdir, config, train.parquet, test.parquet) written by `data synth`."""
    workdir = tmp_path_factory.mktemp("synth")
    config = config_file(workdir)
    train, test = workdir / "data" / "train.parquet", workdir / "data" / "test.parquet"
    result = invoke("data", "synth", "--out", str(train), "--config", config)
    assert result.exit_code == 0, result.output
    result = invoke("data", "synth", "--out", str(test), "-c", config, "--split", "test")
    assert result.exit_code == 0, result.output
    return workdir, config, train, test


def parquet_overrides(train, **keys) -> list[str]:
    overrides = {
        "data.source": "parquet",
        "data.path": train.as_posix(),
        "data.schema.dense": json.dumps(DENSE),
        "data.schema.categorical": json.dumps(CATEGORICAL),
        "data.schema.dense_log1p": "true",
        "model.table_rows": "40",
        **keys,
    }
    return [arg for key, value in overrides.items() for arg in ("--set", f"{key}={value}")]


def summary_of(workdir, name: str) -> dict:
    return json.loads((workdir / "runs" / name / "summary.json").read_text())


def test_synth_writes_int_columns_and_inspect_reads_them(parquet_files):
    _, _, train, test = parquet_files
    table = pq.read_table(train)
    assert table.column_names == ["label", *DENSE, *CATEGORICAL]
    assert table.num_rows == 2000 and all(str(t) == "int64" for t in table.schema.types)
    assert pq.read_metadata(test).num_rows == 500
    positives = sum(table.column("label").to_pylist())
    result = invoke("data", "inspect", str(train))
    assert result.exit_code == 0, result.output
    assert "2,000" in result.output and f"{positives / 2000:.4f}" in result.output
    assert "13 dense" in result.output and "4 categorical" in result.output


def test_training_on_the_parquet_matches_training_on_the_task(parquet_files):
    workdir, config, train, test = parquet_files
    sets = parquet_overrides(train, **{"data.test_path": test.as_posix()})
    from_file = invoke("train", "-c", config, "--name", "file", "--no-progress", *sets)
    assert from_file.exit_code == 0, from_file.output
    synthetic = invoke("train", "-c", config, "--name", "synthetic", "--no-progress")
    assert synthetic.exit_code == 0, synthetic.output
    file_summary, synthetic_summary = summary_of(workdir, "file"), summary_of(workdir, "synthetic")
    assert file_summary["teacher_auc"] is None and file_summary["skipped"]["total"] == 0
    assert "skipped lines" in from_file.output
    # the Parquet round trip (integer counts, log(1+x) on reading) loses nothing
    assert file_summary["test_auc"] == pytest.approx(synthetic_summary["test_auc"], abs=1e-4)


def test_training_holds_out_a_fraction_of_the_file(parquet_files):
    workdir, config, train, _ = parquet_files
    sets = parquet_overrides(train, **{"data.test_fraction": "0.25"})
    result = invoke("train", "-c", config, "--name", "fraction", "--no-progress", *sets)
    assert result.exit_code == 0, result.output
    summary = summary_of(workdir, "fraction")
    assert summary["examples_trained"] + summary["test_examples"] == 2000
    assert 300 < summary["test_examples"] < 700


def test_inspect_counts_skipped_lines_by_reason(tmp_path):
    path = tmp_path / "small.csv"
    path.write_text("label,a,b\n1,2,x\n0,3,y\n1,3\n,4,z\n")
    result = invoke("data", "inspect", str(path))
    assert result.exit_code == 0, result.output
    assert "missing_label 1" in result.output and "wrong_field_count 1" in result.output
    strict = invoke("data", "inspect", str(path), "--strict")
    assert strict.exit_code == 1 and "line 4" in strict.output
    missing = invoke("data", "inspect", str(tmp_path / "absent.parquet"))
    assert missing.exit_code == 1 and "not found" in missing.output


def test_a_steps_bar_counts_each_announced_step_done_once_the_next_starts():
    from recsync.app.runs.progress import steps_bar

    done = []
    with steps_bar("calibrate", 3, enabled=False) as announce:
        for what in ("measure", "fit", "check"):
            announce(what)
            done.append(announce.completed)
    assert done == [0, 1, 2] and announce.completed == 3
    assert announce.bar.tasks[0].description == "done"


def test_calibrations_cpu_table_sets_each_roles_engine_cpu_beside_the_simulated():
    from rich.console import Console

    from recsync.app.cli.common import cpu_table

    rows = [
        {
            "config": "easgd",
            "cpu_us_per_example": {"trainers": 84.2, "sync_servers": 7.2},
            "predicted_cpu_us_per_example": {"trainers": 95.2, "sync_servers": 14.5},
        },
        {
            "config": "async",
            "cpu_us_per_example": {"trainers": 101.5, "dense_servers": 29.0},
            "predicted_cpu_us_per_example": {"trainers": 109.5, "dense_servers": 30.8},
        },
    ]
    console = Console(record=True, width=200)
    console.print(cpu_table(rows))
    text = console.export_text()
    header = next(line for line in text.splitlines() if "config" in line)
    assert header.index("dense_servers") < header.index("sync_servers") < header.index("trainers")
    easgd = next(line for line in text.splitlines() if "easgd" in line)
    assert " - " in easgd and "0 / 0" not in easgd  # no dense server in that job
    assert "7.2 / 14.5" in easgd and "84.2 / 95.2" in easgd
    assert "29 / 30.8" in next(line for line in text.splitlines() if "async" in line)


def test_data_tokens_are_printed_as_they_are_not_as_emoji_or_markup(tmp_path):
    path = tmp_path / "odd.libsvm"
    path.write_text("1 :thumbs_up: 2:3\n0 [bold]x 2:1\n")
    result = invoke("data", "inspect", str(path))
    assert result.exit_code == 0, result.output
    assert "':thumbs_up:'" in result.output and "\N{THUMBS UP SIGN}" not in result.output


def test_plan_shows_the_hierarchical_group_placement_before_and_after_refinement():
    result = invoke(
        "plan",
        "--set",
        "strategy.name=hierarchical",
        "--set",
        "cluster.num_dense_servers=3",
        "--set",
        "cluster.num_trainers=4",
    )
    assert result.exit_code == 0, result.output
    assert "hierarchical group placement" in result.output
    for device in ("trainers", "group-ps-0", "group-ps-1", "group-ps-2"):
        assert device in result.output
    assert "top.fc0+1.p2.a" in result.output  # a co-partitioned slice, placed
    assert " -> " in result.output  # utilisation tagged -> refined


def test_hierarchical_groups_must_divide_the_trainers():
    result = invoke("plan", "--set", "strategy.name=hierarchical", "--set", "strategy.groups=3")
    assert result.exit_code != 0
    assert "cluster.num_trainers" in result.output and "groups = 3" in result.output


def test_the_summary_says_how_each_lost_node_was_recovered():
    from rich.console import Console
    from rich.table import Table

    from recsync.app.cli.common import strategy_rows

    losses = [
        {"node": "embedding-server-1", "action": "partial"},
        {"node": "trainer-0", "action": "restart"},
        {"node": "reader", "action": "rollback"},
    ]
    summary = {"recovery": {"losses": losses, "examples_replayed": 640, "examples_lost": 704}}
    table = Table()
    table.add_column("what")
    table.add_column("value")
    strategy_rows(table, summary)
    console = Console(width=200, record=True)
    console.print(table)
    text = console.export_text()
    assert "embedding-server-1 (shard restored), trainer-0 (restarted), reader (rolled" in text
    assert "640 examples replayed, the updates of 704 lost" in text
