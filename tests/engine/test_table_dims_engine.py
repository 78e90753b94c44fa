"""Tables of different dims on the Ray engine: a job trains, stops at a checkpoint, resumes
from it, and its model exports and scores a file as the run evaluated it; hash and fixed
tables of several dims in one job train, export and predict."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest
import torch
from sklearn.metrics import roc_auc_score
from test_cli import invoke, parquet_files, parquet_overrides  # noqa: F401

pytestmark = pytest.mark.usefixtures("local_ray")

TABLES = '[{name = "C1", dim = 2}, {name = "C2", dim = 4}, {name = "C3", dim = 8}, {name = "C4"}]'


def test_a_mixed_dim_job_trains_resumes_exports_and_predicts(parquet_files, tmp_path):  # noqa: F811
    workdir, config, train, test = parquet_files
    sets = parquet_overrides(
        train,
        **{
            "data.test_path": test.as_posix(),
            "model.tables": TABLES,
            "cluster.num_trainers": "1",
            "cluster.workers_per_trainer": "2",
            "cluster.num_embedding_servers": "2",
            "cluster.num_cpus": "2",
        },
    )
    common = ["-c", config, "--strategy", "easgd", "--no-progress", *sets]
    result = invoke("train", *common, "--name", "dims-half", "--stop-after", "1000")
    assert result.exit_code == 0, result.output
    half = workdir / "runs" / "dims-half"
    result = invoke("train", "--resume", str(half), "--name", "dims", "--no-progress")
    assert result.exit_code == 0, result.output
    run = workdir / "runs" / "dims"
    summary = json.loads((run / "summary.json").read_text())
    assert summary["examples_trained"] == 1000 and summary["test_auc"] > 0.5  # the rest

    out = tmp_path / "model"
    result = invoke("export", str(run), str(out))
    assert result.exit_code == 0, result.output
    described = json.loads((out / "model.json").read_text())
    assert [t["dim"] for t in described["tables"]] == [2, 4, 8, 4]
    state = torch.load(out / "model.pt")
    assert [tuple(state[f"tables.{f}.weight"].shape) for f in range(4)] == [
        (40, 2),
        (40, 4),
        (40, 8),
        (40, 4),
    ]
    assert tuple(state["dense.projections.weights.0"].shape) == (1, 2, 4)  # C1: 2 -> 4
    assert tuple(state["dense.projections.weights.1"].shape) == (1, 8, 4)  # C3: 8 -> 4

    scores = tmp_path / "scores.parquet"
    result = invoke("predict", str(run), str(test), "--out", str(scores))
    assert result.exit_code == 0, result.output
    table = pq.read_table(scores)
    auc = roc_auc_score(table.column("label").to_numpy(), table.column("score").to_numpy())
    assert auc == pytest.approx(summary["test_auc"], abs=1e-6)  # the run's own evaluation


def test_hash_and_fixed_tables_of_several_dims_train_export_and_predict(parquet_files, tmp_path):  # noqa: F811
    """C1 and C3 hash tables (C1 with its own admission), C2 and C4 fixed tables of the
    data's 40 rows (model.table_rows: a hash table's expected ids)."""
    workdir, config, train, test = parquet_files
    tables = TABLES.replace(
        '{name = "C1", dim = 2}', '{name = "C1", dim = 2, admission = {min_count = 2}}'
    )
    tables = tables.replace('{name = "C2", dim = 4}', '{name = "C2", dim = 4, kind = "fixed"}')
    tables = tables.replace('{name = "C4"}', '{name = "C4", kind = "fixed"}')
    sets = parquet_overrides(
        train,
        **{
            "data.test_path": test.as_posix(),
            "model.table_kind": '"hash"',
            "model.tables": tables,
            "cluster.num_trainers": "1",
            "cluster.workers_per_trainer": "2",
            "cluster.num_embedding_servers": "2",
            "cluster.num_cpus": "2",
        },
    )
    result = invoke(
        "train", "-c", config, "--strategy", "gba", "--no-progress", *sets, "--name", "hash-dims"
    )
    assert result.exit_code == 0, result.output
    run = workdir / "runs" / "hash-dims"
    summary = json.loads((run / "summary.json").read_text())
    assert summary["examples_trained"] == 2000 and summary["test_auc"] > 0.5
    per_table = summary["embedding_rows"]["per_table"]
    assert per_table["C1"]["refused_lookups"] > 0
    for fixed in ("C2", "C4"):  # every id admitted, at most the table's rows, none evicted
        assert per_table[fixed]["refused_lookups"] == per_table[fixed]["evicted"] == 0
        assert 0 < per_table[fixed]["live"] <= 40

    out = tmp_path / "model"
    result = invoke("export", str(run), str(out))
    assert result.exit_code == 0, result.output
    widths = [
        pq.read_schema(out / "tables" / f"C{f}.parquet").field("vector").type.list_size
        for f in range(1, 5)
    ]
    assert widths == [2, 4, 8, 4]
    described = json.loads((out / "model.json").read_text())
    assert [t.get("kind") for t in described["tables"]] == [None, "fixed", None, "fixed"]
    ids = pq.read_table(out / "tables" / "C2.parquet").column("id").to_pylist()
    assert ids and max(ids) < 40
    scores = tmp_path / "scores.parquet"
    result = invoke("predict", str(run), str(test), "--out", str(scores))
    assert result.exit_code == 0, result.output
    assert pq.read_table(scores).num_rows == 500
