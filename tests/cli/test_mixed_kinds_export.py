"""A job of hash and fixed tables through the CLI: it simulates, exports (the fixed table's
ids below its rows, model.json naming its kind and rows) and predicts as docs/export.md's
plain lines score its export."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from test_cli import invoke

PAGE = Path(__file__).resolve().parents[2] / "docs" / "export.md"
TABLES = '[{name = "user", kind = "hash", dim = 2}, {name = "item", kind = "fixed", rows = 7}]'


def test_a_job_of_hash_and_fixed_tables_simulates_exports_and_predicts(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    lines = [f"{(u + i) % 2} 0:{10**12 + u}:1 1:{1000 + i}:1" for u in range(40) for i in range(25)]
    (tmp_path / "clicks.ffm").write_text("\n".join(lines) + "\n")
    trained = invoke(
        "simulate", "--set", "data.source=libffm", "--set", "data.path=clicks.ffm",
        "--set", "data.test_fraction=0.2", "--set", "model.embedding_dim=4",
        "--set", f"model.tables={TABLES}", "--name", "r", "--no-progress",
    )  # fmt: skip
    assert trained.exit_code == 0, trained.output
    summary = json.loads((tmp_path / "runs" / "r" / "summary.json").read_text())
    per_table = summary["embedding_rows"]["per_table"]
    assert per_table["user"]["live"] == 40 and per_table["item"]["live"] == 7
    assert invoke("export", "runs/r", "model_dir").exit_code == 0
    described = json.loads((tmp_path / "model_dir" / "model.json").read_text())
    user, item = described["tables"]
    assert "kind" not in user and (item["kind"], item["num_rows"], item["dim"]) == ("fixed", 7, 4)
    ids = pq.read_table(tmp_path / "model_dir" / "tables" / "item.parquet").column("id")
    assert sorted(ids.to_pylist()) == list(range(7))  # the data's ids modulo its rows
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
        user_id, item_id = (int(field.split(":")[1]) for field in lines[n].split()[1:])
        got = scope["score"]([[user_id], [item_id]], [])
        assert float(got[0]) == pytest.approx(scores[n], abs=1e-6)
