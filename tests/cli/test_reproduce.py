"""`recsync reproduce`: its commands are the experiments folder's reproductions, found
outside the product, and a new reproduction module is a new command."""

from __future__ import annotations

import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from experiments.repro import REPRODUCTIONS, reproduction
from recsync.app.cli.main import app

EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"
runner = CliRunner()

TOY = """
from pathlib import Path
from typing import Any

from experiments.repro.registry import Progress, reproduction


def _point(point: int) -> str:
    return f"toy point {point}"


@reproduction("toy", paper="a test", claim="a module is a command", report_dir="toy",
              minutes=0.1, show=_point)
def reproduce(out_dir: Path, progress: Progress | None = None) -> dict[str, Any]:
    out_dir.mkdir(parents=True, exist_ok=True)
    if progress:
        progress(7)
    (out_dir / "report.md").write_text("toy")
    return {}
"""


def test_help_lists_every_reproduction_with_its_report_option() -> None:
    listed = runner.invoke(app, ["reproduce", "--help"], env={"COLUMNS": "250"})
    assert listed.exit_code == 0, listed.output
    assert len(REPRODUCTIONS) >= 12
    for name, r in REPRODUCTIONS.items():
        assert f" {name} " in listed.output
        one = runner.invoke(app, ["reproduce", name, "--help"], env={"COLUMNS": "250"})
        assert one.exit_code == 0, one.output
        assert "--out" in one.output and r.report_dir in one.output


def test_a_missing_folder_is_an_error_naming_where_it_looked(tmp_path: Path) -> None:
    missing = tmp_path / "experiments"
    result = runner.invoke(app, ["reproduce", "--list"], env={"RECSYNC_EXPERIMENTS": str(missing)})
    assert result.exit_code == 1
    assert "no experiments folder" in result.output
    assert str(missing) in result.output


def test_two_reproductions_of_one_name_are_refused() -> None:
    def run(out: Path, progress: object = None) -> None:
        return None

    with pytest.raises(ValueError, match="two reproductions are named 'psp'"):
        reproduction("psp", paper="", claim="", report_dir="", minutes=0)(run)


def _toy_folder(root: Path) -> Path:
    """A copy of the experiments package and its registry, plus one reproduction module."""
    folder = root / "experiments"
    (folder / "repro").mkdir(parents=True)
    (folder / "__init__.py").write_text("")
    for name in ("__init__.py", "registry.py"):
        shutil.copy(EXPERIMENTS / "repro" / name, folder / "repro" / name)
    (folder / "repro" / "toy.py").write_text(TOY)
    return folder


def _experiments_modules() -> list[str]:
    return [n for n in sys.modules if n == "experiments" or n.startswith("experiments.")]


@pytest.fixture
def own_experiments(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The test imports its own `experiments`: the loaded one is set aside, then put back."""
    for name in _experiments_modules():
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setattr(sys, "path", list(sys.path))
    yield
    for name in _experiments_modules():
        del sys.modules[name]


def test_a_new_module_is_a_new_command(tmp_path: Path, own_experiments: None) -> None:
    folder = _toy_folder(tmp_path)
    out = tmp_path / "report"
    result = runner.invoke(
        app, ["reproduce", "toy", "--out", str(out)], env={"RECSYNC_EXPERIMENTS": str(folder)}
    )
    assert result.exit_code == 0, result.output
    assert "toy point 7" in result.output
    assert (out / "report.md").read_text() == "toy"


def test_another_loaded_experiments_package_is_an_error(tmp_path: Path) -> None:
    folder = _toy_folder(tmp_path)
    result = runner.invoke(app, ["reproduce", "--list"], env={"RECSYNC_EXPERIMENTS": str(folder)})
    assert result.exit_code == 1
    assert f"not from the experiments folder {folder}" in " ".join(result.output.split())
