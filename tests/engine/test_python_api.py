"""The Python API page's example, run as a user would (a local Ray, the simulator), and
what it wrote."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.usefixtures("local_ray")

PAGE = Path(__file__).resolve().parents[2] / "docs" / "python-api.md"


def example() -> str:
    """The page's code block after its example marker."""
    text = PAGE.read_text(encoding="utf-8")
    found = re.search(r"<!-- python-api example.*?-->\s*```python\n(.*?)```", text, re.S)
    assert found, f"{PAGE}: no example block after its marker"
    return found[1]


def test_the_python_api_example_runs(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    exec(compile(example(), str(PAGE), "exec"), {})
    printed = capsys.readouterr().out
    assert "simulated:" in printed and "trained: 8,000 examples" in printed
    for name in ("what-if", "on-ray", "on-ray-then-sync"):
        summary = json.loads((tmp_path / "runs" / name / "summary.json").read_text())
        assert summary["examples_trained"] > 0, name
    switched = json.loads((tmp_path / "runs" / "on-ray-then-sync" / "summary.json").read_text())
    assert switched["strategy"].startswith("sync")
    assert (tmp_path / "runs" / "on-ray" / "ray.log").exists()  # Ray's messages kept there
