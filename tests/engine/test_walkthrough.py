"""The README's walkthrough, command by command, on a generated libFM file: inspect, train
on the Ray engine (two strategies, two epochs, a held-out fifth), compare, export,
predict; and every other command the documentation shows that starts Ray."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from doc_commands import all_commands, runnable, walkthrough
from test_cli import invoke

pytestmark = pytest.mark.usefixtures("local_ray")


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


def engine_commands() -> list[list[str]]:
    """Every command the docs show that starts Ray, but the walkthrough's; and, in their
    place, the `recsync data synth` commands, which write the files a page then trains on."""
    walked = walkthrough()
    return [
        runnable(c.argv)
        for c in all_commands()
        if (c.starts_ray or c.argv[1:3] == ("data", "synth"))
        and c.placeholder_test is None
        and list(c.argv[1:]) not in walked
    ]


def test_every_other_engine_command_of_the_docs_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    commands = engine_commands()
    assert ["train", *runnable(("recsync", "train"))[1:]] in commands  # make run's
    for args in commands:
        result = invoke(*args)
        assert result.exit_code == 0, (args, result.output)
