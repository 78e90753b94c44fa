"""The README's walkthrough, command by command, on a generated libFM file: inspect, train
on the Ray engine (two strategies, two epochs, a held-out fifth), compare, export,
predict."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from test_cli import invoke

pytestmark = pytest.mark.usefixtures("local_ray")
README = Path(__file__).resolve().parents[2] / "README.md"


def walkthrough() -> list[list[str]]:
    text = README.read_text(encoding="utf-8")
    found = re.search(r"<!-- walkthrough -->\n```\n(.*?)```", text, re.S)
    assert found, "README has no walkthrough block"
    commands = [shlex.split(line) for line in found.group(1).splitlines() if line.strip()]
    assert all(c[0] == ".venv/bin/recsync" for c in commands)
    return [c[1:] for c in commands]


def libfm_file(path: Path, count: int, seed: int) -> None:
    """100 users and 300 items with raw 12-digit ids; clicks from a user x item affinity."""
    lines = []
    for i in range(count):
        user, item = (i * 7 + seed) % 100, (i * 13 + seed * 3) % 300
        label = int((user % 3 == 0) != (item % 4 == 0)) if i % 5 else i % 2
        raw_user, raw_item = 310_000_000_000 + user * 7_919, 920_000_000_000 + item * 104_729
        lines.append(f"{label} {raw_user}:1 {raw_item}:1 400:{(i % 9) / 9:.2f}\n")
    path.write_text("".join(lines))


def test_every_walkthrough_command_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    libfm_file(tmp_path / "clicks.libfm", 5_000, seed=1)
    libfm_file(tmp_path / "new.libfm", 500, seed=2)
    for args in walkthrough():
        result = invoke(*args, "--no-progress") if args[0] == "train" else invoke(*args)
        assert result.exit_code == 0, (args, result.output)
    first = json.loads((tmp_path / "runs" / "first" / "summary.json").read_text())
    assert first["examples_trained"] + first["test_examples"] * 2 == 2 * 5_000
    assert first["test_auc"] > 0.6
    records = (tmp_path / "runs" / "first" / "metrics.jsonl").read_text().splitlines()
    assert len(records) >= 2
    assert (tmp_path / "compare.png").stat().st_size > 0
    assert (tmp_path / "model_dir" / "dense.pt2").exists()  # hash tables: raw ids
    assert pq.read_table(tmp_path / "model_dir" / "tables" / "C1.parquet").num_rows == 401
    assert pq.read_table(tmp_path / "scores.parquet").num_rows == 500
