"""`recsync reproduce`: its commands are the experiments folder's reproductions, found
outside the product, and a new reproduction module is a new command."""

from __future__ import annotations

import json
import shutil
import subprocess
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
    for name in ("__init__.py", "registry.py", "stamp.py", "points.py", "code_closure.py"):
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
    report = (out / "report.md").read_text()
    assert report.startswith("<!-- stamp: written by experiments/repro/stamp.py")
    assert report.endswith("<!-- /stamp -->\n\ntoy")
    stamp = json.loads((out / "stamp.json").read_text())
    assert stamp["reproduction"] == "toy" and stamp["seeds"] == [0]
    assert stamp["cost_source"].startswith("stated in the reproduction's code")
    assert stamp["command"].startswith("recsync reproduce toy --out")
    assert stamp["commit"] is None and stamp["dirty"]  # the toy folder is no git checkout
    assert stamp["machine"]["cpus"] >= 1 and stamp["wall_s"] >= 0
    assert "experiments/repro/toy.py" in stamp["depends_on"]


def test_another_loaded_experiments_package_is_an_error(tmp_path: Path) -> None:
    folder = _toy_folder(tmp_path)
    result = runner.invoke(app, ["reproduce", "--list"], env={"RECSYNC_EXPERIMENTS": str(folder)})
    assert result.exit_code == 1
    assert f"not from the experiments folder {folder}" in " ".join(result.output.split())


TITLED = """
from pathlib import Path
from typing import Any

from experiments.repro.registry import Progress, reproduction


@reproduction("NAME", paper="a test", claim="--all", report_dir="reports/NAME", minutes=0.1,
              seeds=(0, 1, 2), cost={"toy": {"latency_s": 5e-05}})
def reproduce(out_dir: Path, progress: Progress | None = None) -> dict[str, Any]:
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "report.md").write_text("# NAME\\n\\nbody VERSION\\n")
    (out_dir / "results.json").write_text('{"value": 1}')
    return {}
"""


def _git(root: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def _commit(root: Path, message: str) -> None:
    _git(root, "add", "-A")
    _git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", message)


@pytest.mark.long  # three child processes, each importing recsync (~30 s on 2 busy cores)
def test_all_runs_in_parallel_stamps_and_resumes(
    tmp_path: Path, own_experiments: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = _toy_folder(tmp_path)
    (folder / "repro" / "toy.py").unlink()
    for name in ("one", "two"):
        text = TITLED.replace("NAME", name).replace("VERSION", "1")
        (folder / "repro" / f"{name}.py").write_text(text)
    _git(tmp_path, "init", "-q")
    _commit(tmp_path, "toys")
    monkeypatch.chdir(tmp_path)
    env = {"RECSYNC_EXPERIMENTS": str(folder), "COLUMNS": "200"}
    first = runner.invoke(app, ["reproduce", "--all", "--jobs", "2"], env=env)
    assert first.exit_code == 0, first.output
    assert "one: to run (no report" in first.output and "[2/2 done]" in first.output
    head = _git(tmp_path, "rev-parse", "HEAD")
    for name in ("one", "two"):
        out = tmp_path / "reports" / name
        stamp = json.loads((out / "stamp.json").read_text())
        assert stamp["commit"] == head and not stamp["dirty"]
        assert stamp["command"] == f"recsync reproduce {name}"
        assert stamp["launched_by"] == "recsync reproduce --all --jobs 2"
        assert stamp["seeds"] == [0, 1, 2] and stamp["cost_model"] == {
            "toy": "{'latency_s': 5e-05}"
        }
        assert json.loads((out / "results.json").read_text())["stamp"] == stamp
        report = (out / "report.md").read_text()
        assert report.startswith(f"# {name}\n\n<!-- stamp") and report.endswith("body 1\n")
        assert f"commit `{head[:12]}` (clean)" in report and "- toy: {'latency_s'" in report
    _commit(tmp_path, "reports")
    again = runner.invoke(app, ["reproduce", "--all"], env=env)
    assert again.exit_code == 0, again.output
    assert "one: current" in again.output and "two: current" in again.output
    assert "started" not in again.output
    (folder / "repro" / "two.py").write_text(TITLED.replace("NAME", "two").replace("VERSION", "2"))
    _commit(tmp_path, "two changed")
    listed = runner.invoke(app, ["reproduce", "--list"], env=env)
    assert "code changed since its stamp: 1 file" in " ".join(listed.output.split())
    third = runner.invoke(app, ["reproduce", "--all"], env=env)
    assert third.exit_code == 0, third.output
    assert "one: current" in third.output and "[1/1 done] two done" in third.output
    assert (tmp_path / "reports" / "two" / "report.md").read_text().count("<!-- stamp") == 1
    assert (tmp_path / "reports" / "two" / "report.md").read_text().endswith("body 2\n")


def test_all_with_a_local_ray_is_refused_naming_what_to_do() -> None:
    result = runner.invoke(app, ["reproduce", "--all", "--address", "local"])
    assert result.exit_code == 1
    assert "a Ray cluster per reproduction" in result.output
    assert "ray start --head" in result.output


def test_each_reproduction_takes_an_address_for_its_points() -> None:
    name = next(iter(REPRODUCTIONS))
    shown = runner.invoke(app, ["reproduce", name, "--help"], env={"COLUMNS": "250"})
    assert shown.exit_code == 0 and "--address" in shown.output
