"""`recsync advise` on a tiny job: two candidates, a condition, one quality seed; the
rerun resumes from the points kept; bad input ends with the key named."""

from __future__ import annotations

import json
import tomllib

from test_cli import invoke

TINY = """
[data.synthetic]
num_train = 3000
num_test = 300
table_rows = [40, 40, 40, 40]
[model]
embedding_dim = 4
bottom_mlp = [8]
top_mlp = [8]
[train]
batch_size = 100
"""
CLUSTER = """
[machines]
count = 2
cores = 8
preset = "dev-2core"
[grid]
trainers = [2]
embedding_servers = [1]
[[condition]]
name = "stragglers"
kind = "stragglers"
fraction = 0.5
slowdown = 4.0
"""


def files(tmp_path, cluster=CLUSTER):
    (tmp_path / "job.toml").write_text(TINY)
    (tmp_path / "cluster.toml").write_text(cluster)
    return str(tmp_path / "job.toml"), str(tmp_path / "cluster.toml")


def advise(tmp_path, *more: str, cluster=CLUSTER):
    job, cluster_file = files(tmp_path, cluster)
    return invoke(
        "advise", "-c", job, "--cluster", cluster_file, "--out", str(tmp_path / "out"),
        "--strategies", "easgd,async", "--slice", "800", "--sample", "1000",
        "--test-sample", "300", "--seeds", "0", "--no-progress", *more,
    )  # fmt: skip


def test_advise_ranks_writes_the_winner_and_resumes(tmp_path):
    result = advise(tmp_path)
    assert result.exit_code == 0, result.output
    out = tmp_path / "out"
    record = json.loads((out / "advice.json").read_text())
    rows = record["rows"]
    assert [r["candidate"] for r in rows] != [] and len(rows) == 2
    assert {r["strategy"] for r in rows} == {"easgd", "async"}
    assert record["conditions"] == ["clean", "stragglers"]
    for row in rows:
        assert row["eps"] > 0 and row["time_per_pass_s"] == 3000 / row["eps"]
        assert set(row["eps_by_condition"]) == {"clean", "stragglers"}
        # half the worker threads 4x slower: no strategy goes faster
        assert row["eps_by_condition"]["stragglers"] <= row["eps"] * 1.001
        assert row["test_auc"] is not None and row["seeds"] == 1
        # trained until its held-out loss flattened, or the whole sample where it had not
        (examples,), (flattened,) = row["quality_examples"], row["flattened"]
        assert examples < 1000 if flattened else examples == 1000
        assert row["bottleneck"] in row["bytes_sent"] or row["bottleneck"] == "reader"
    assert rows[0]["rank"] == 1
    winner = tomllib.loads((out / "winner.toml").read_text())
    assert winner["strategy"]["name"] == rows[0]["strategy"]
    assert winner["cluster"]["num_trainers"] == 2
    assert winner["cluster"]["num_embedding_servers"] == 1
    assert (out / "advice.png").stat().st_size > 0
    assert f'--set strategy.name="{rows[0]["strategy"]}"' in result.output
    assert "recsync advise" in result.output and "stragglers" in result.output
    assert "quality: trained until the held-out loss flattened" in result.output
    points = (out / "points.jsonl").read_text().splitlines()
    assert len(points) == 2 + 2 + 2  # clean, stragglers, quality: each of the two

    again = advise(tmp_path)
    assert again.exit_code == 0, again.output
    assert "points measured 0" in again.output
    assert json.loads((out / "advice.json").read_text())["rows"] == rows
    assert (out / "points.jsonl").read_text().splitlines() == points


def test_a_spent_budget_lists_what_was_not_measured(tmp_path):
    result = advise(tmp_path, "--budget", "0.00001", "--no-quality")
    assert result.exit_code == 0, result.output
    assert "not measured (budget spent)" in result.output
    assert "no candidate to advise was measured" in result.output or "advice:" in result.output


def test_bad_input_names_the_key(tmp_path):
    result = advise(tmp_path, cluster=CLUSTER.replace("dev-2core", "cray-1"))
    assert result.exit_code == 1
    assert "machines.preset: unknown preset 'cray-1'" in " ".join(result.output.split())
    result = advise(
        tmp_path, cluster=CLUSTER.replace("count = 2\ncores = 8", "count = 1\ncores = 3")
    )
    assert result.exit_code == 1
    assert "machines.count / machines.cores" in result.output
