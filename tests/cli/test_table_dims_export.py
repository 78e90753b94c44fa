"""Exports of models whose tables differ in dim: docs/export.md's plain-PyTorch lines load
them and score as recsync does (fixed tables: the state dict; hash tables: the keyed
files and the dense program)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import torch
from sklearn.metrics import roc_auc_score
from test_cli import invoke, parquet_files, parquet_overrides  # noqa: F401
from test_export import export_snippet

from recsync.app.runs.export import exported_model
from recsync.io.readers import open_dataset
from recsync.io.sources import prepared

PAGE = Path(__file__).resolve().parents[2] / "docs" / "export.md"
TABLES = '[{name = "C1", dim = 2}, {name = "C2", dim = 8}, {name = "C3"}, {name = "C4", dim = 2}]'


def test_the_export_page_lines_score_a_mixed_dim_export_as_recsync(parquet_files, tmp_path):  # noqa: F811
    workdir, config, train, test = parquet_files
    sets = parquet_overrides(train, **{"data.test_path": test.as_posix(), "model.tables": TABLES})
    result = invoke(
        "simulate", "-c", config, "--name", "dims", "--no-progress", "--strategy", "async", *sets
    )
    assert result.exit_code == 0, result.output
    run = workdir / "runs" / "dims"
    result = invoke("export", str(run), str(tmp_path / "model"))
    assert result.exit_code == 0, result.output
    scope: dict = {}
    exec(compile(export_snippet(tmp_path / "model"), "docs/export.md snippet", "exec"), scope)
    plain = scope["model"]
    ours, config_of_run = exported_model(run)
    files = config_of_run.to_specs().files
    batch = prepared(
        next(iter(open_dataset([test], files.fmt, files.schema, batch_size=500))), files
    )
    with torch.no_grad():
        theirs = plain(batch.dense, batch.ids, batch.offsets)
        mine = ours(batch.dense, batch.ids, batch.offsets)
    torch.testing.assert_close(theirs, mine)
    summary = json.loads((run / "summary.json").read_text())
    auc = roc_auc_score(batch.labels.numpy(), mine.numpy())
    assert auc == pytest.approx(summary["test_auc"], abs=1e-6)


def test_the_export_page_scores_a_keyed_mixed_dim_export_as_predict_does(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    lines = [
        f"{(u + i) % 2} 0:{10**12 + u}:1 1:{7 * 10**15 + i}:1" for u in range(40) for i in range(25)
    ]
    (tmp_path / "clicks.ffm").write_text("\n".join(lines) + "\n")
    trained = invoke(
        "simulate", "--set", "data.source=libffm", "--set", "data.path=clicks.ffm",
        "--set", "data.test_fraction=0.2", "--set", "model.embedding_dim=4",
        "--set", 'model.tables=[{name = "C1", dim = 2}, {name = "C2", dim = 6}]',
        "--name", "r", "--no-progress",
    )  # fmt: skip
    assert trained.exit_code == 0, trained.output
    assert invoke("export", "runs/r", "model_dir").exit_code == 0
    described = json.loads((tmp_path / "model_dir" / "model.json").read_text())
    assert described["pooled_dim"] == 6 and [t["dim"] for t in described["tables"]] == [2, 6]
    predicted = invoke("predict", "runs/r", "clicks.ffm", "--out", "s.parquet")
    assert predicted.exit_code == 0, predicted.output
    found = re.search(
        r"<!-- keyed-export-snippet -->\n```python\n(.*?)```", PAGE.read_text("utf-8"), re.S
    )
    assert found, "docs/export.md has no keyed export snippet"
    scope: dict = {}
    exec(compile(found.group(1), "docs/export.md snippet", "exec"), scope)
    scores = pq.read_table(tmp_path / "s.parquet").column("score").to_pylist()
    for n in (0, 333, 999):
        user, item = lines[n].split()[1:]
        got = scope["score"]([[int(user.split(":")[1])], [int(item.split(":")[1])]], [])
        assert float(got[0]) == pytest.approx(scores[n], abs=1e-6)
