"""`recsync export` and `recsync predict`: the exported state dict, loaded by docs/export.md's
plain-PyTorch lines, scores as recsync does; predict scores a file of the run's format."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import torch
from sklearn.metrics import roc_auc_score
from test_cli import config_file, invoke, parquet_files, parquet_overrides  # noqa: F401

from recsync.app.runs.export import exported_model
from recsync.io.readers import open_dataset
from recsync.io.sources import prepared

EXPORT_PAGE = Path(__file__).resolve().parents[2] / "docs" / "export.md"


def export_snippet(model_dir: Path) -> str:
    text = EXPORT_PAGE.read_text(encoding="utf-8")
    found = re.search(r"<!-- export-snippet -->\n```python\n(.*?)```", text, re.S)
    assert found, "docs/export.md has no export snippet"
    return found.group(1).replace("model_dir/", f"{model_dir.as_posix()}/")


@pytest.fixture(scope="module")
def trained(parquet_files):  # noqa: F811
    workdir, config, train, test = parquet_files
    sets = parquet_overrides(train, **{"data.test_path": test.as_posix()})
    result = invoke(
        "simulate", "-c", config, "--name", "to-export", "--no-progress", "--strategy", "async",
        *sets,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    return workdir / "runs" / "to-export", test


def test_the_export_page_lines_load_the_export_and_score_as_recsync(trained, tmp_path):
    run, test_file = trained
    result = invoke("export", str(run), str(tmp_path / "model"))
    assert result.exit_code == 0, result.output
    description = json.loads((tmp_path / "model" / "model.json").read_text())
    assert (
        description["format"] == "recsync-export-1" and description["data"]["source"] == "parquet"
    )
    scope: dict = {}
    exec(compile(export_snippet(tmp_path / "model"), "docs/export.md snippet", "exec"), scope)
    plain = scope["model"]
    ours, config = exported_model(run)
    files = config.to_specs().files
    batch = prepared(
        next(iter(open_dataset([test_file], files.fmt, files.schema, batch_size=500))),
        files,
    )
    with torch.no_grad():
        theirs = plain(batch.dense, batch.ids, batch.offsets)
        mine = ours(batch.dense, batch.ids, batch.offsets)
    assert torch.equal(theirs, mine)
    summary = json.loads((run / "summary.json").read_text())
    auc = roc_auc_score(batch.labels.numpy(), theirs.numpy())
    assert auc == pytest.approx(summary["test_auc"], abs=1e-6)  # the run's own evaluation


def test_predict_scores_every_row_of_a_file(trained, tmp_path):
    run, test_file = trained
    out = tmp_path / "scores.parquet"
    result = invoke("predict", str(run), str(test_file), "--out", str(out))
    assert result.exit_code == 0, result.output
    table = pq.read_table(out)
    assert table.column_names == ["label", "score"] and table.num_rows == 500
    scores = table.column("score").to_numpy()
    assert ((scores > 0) & (scores < 1)).all()
    summary = json.loads((run / "summary.json").read_text())
    auc = roc_auc_score(table.column("label").to_numpy(), scores)
    assert auc == pytest.approx(summary["test_auc"], abs=1e-6)


def test_export_of_a_run_without_checkpoint_and_predict_on_synthetic_runs_are_clear(tmp_path):
    result = invoke("export", str(tmp_path), str(tmp_path / "out"))
    assert result.exit_code == 1 and "not a run directory" in result.output
    path = config_file(tmp_path)
    simulated = invoke("simulate", "-c", path, "--name", "syn", "--no-progress", "--strategy", "ma")
    assert simulated.exit_code == 0, simulated.output
    refused = invoke("predict", str(tmp_path / "runs" / "syn"), str(path))
    assert refused.exit_code == 1 and "synthetic task" in refused.output


def test_a_reference_run_ends_with_a_checkpoint_that_exports(parquet_files, tmp_path):  # noqa: F811
    workdir, config, train, test = parquet_files
    sets = parquet_overrides(train, **{"data.test_path": test.as_posix()})
    result = invoke("train", "-c", config, "--name", "ref-export", "--no-progress", *sets)
    assert result.exit_code == 0, result.output
    run = workdir / "runs" / "ref-export"
    out = tmp_path / "scores.parquet"
    assert invoke("predict", str(run), str(test), "--out", str(out)).exit_code == 0
    table = pq.read_table(out)
    auc = roc_auc_score(table.column("label").to_numpy(), table.column("score").to_numpy())
    assert auc == pytest.approx(
        json.loads((run / "summary.json").read_text())["test_auc"], abs=1e-6
    )


def test_the_export_page_lines_score_a_model_of_data_with_no_dense_feature(tmp_path):
    # one multi-hot libFM bag: the export page's model takes the branch with no bottom MLP
    lines = [
        f"{(i % 5 + i % 7) % 2} {i % 30}:1 {30 + i % 11}:1 {41 + i % 3}:1\n" for i in range(3_000)
    ]
    (tmp_path / "bag.libfm").write_text("".join(lines))
    sets = {
        "data.source": "auto",
        "data.path": (tmp_path / "bag.libfm").as_posix(),
        "data.test_fraction": "0.2",
        "model.table_rows": "64",
    }
    args = [a for key, value in sets.items() for a in ("--set", f"{key}={value}")]
    path = config_file(tmp_path)
    result = invoke(
        "simulate", "-c", path, "--name", "bag", "--no-progress", "--strategy", "async", *args
    )
    assert result.exit_code == 0, result.output
    run = tmp_path / "runs" / "bag"
    assert invoke("export", str(run), str(tmp_path / "model")).exit_code == 0
    scope: dict = {}
    exec(compile(export_snippet(tmp_path / "model"), "docs/export.md snippet", "exec"), scope)
    ours, config = exported_model(run)
    files = config.to_specs().files
    batch = next(
        iter(open_dataset([tmp_path / "bag.libfm"], files.fmt, files.schema, batch_size=500))
    )
    assert batch.dense.shape[1] == 0
    with torch.no_grad():
        theirs = scope["model"](batch.dense, batch.ids, batch.offsets)
        mine = ours(batch.dense, batch.ids, batch.offsets)
    assert torch.equal(theirs, mine)
