"""Every committed report of a registered reproduction is current (issue 55): stamped at a
commit from a clean tree, and no file its reproduction depends on (its module, the
experiments.repro modules it imports, common.py, verdict.py, and the simulator,
src/recsync/runtime/sim/ with its cost model) changed after that commit. A report without a
stamp counts as stale.

Every report is stamped, so a change to the simulator or to a reproduction's code fails
`test_every_report_is_current` until that report is regenerated (`recsync reproduce NAME`,
or `make reproduce` for all). `test_a_stale_report_is_found` shows the check itself can
fail."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from experiments.repro import REPRODUCTIONS, stamp

ROOT = Path(__file__).resolve().parents[2]


def _stale() -> dict[str, str]:
    """Each registered reproduction's report directory that is not current, with why."""
    if not stamp.in_git_checkout():
        pytest.skip("not in a git checkout: a report's stamp cannot be checked against history")
    found = {}
    for r in REPRODUCTIONS.values():
        reason = r.stale_reason(ROOT / r.report_dir)
        if reason is not None:
            found[r.report_dir] = reason
    return found


def test_every_report_is_current() -> None:
    stale = _stale()
    assert not stale, "stale reports (run `make reproduce`): " + "; ".join(
        f"{where}: {why}" for where, why in stale.items()
    )


def test_every_reproduction_has_a_report_directory_and_known_dependencies() -> None:
    for r in REPRODUCTIONS.values():
        assert (ROOT / r.report_dir).is_dir(), r.report_dir
        depends = stamp.dependencies(r.run.__module__)
        assert (
            depends[0].startswith("experiments/") and "src/recsync/runtime/sim/cost.py" in depends
        )
        assert "experiments/repro/verdict.py" in depends
        assert not any(path.startswith("src/recsync/app/cli/") for path in depends)
        assert all((ROOT / path).exists() for path in depends), depends


def _git(root: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def test_a_stale_report_is_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The check on a throwaway checkout: current, then stale after a change to the
    simulator, to the module, and stale where unstamped or stamped from a dirty tree."""
    (tmp_path / "experiments" / "repro").mkdir(parents=True)
    (tmp_path / "src" / "recsync" / "runtime" / "sim").mkdir(parents=True)
    module = tmp_path / "experiments" / "repro" / "toy.py"
    module.write_text("from experiments.repro.helper import X\nimport recsync.runtime.sim.cost\n")
    (tmp_path / "experiments" / "repro" / "helper.py").write_text("X = 1\n")
    cost = tmp_path / "src" / "recsync" / "runtime" / "sim" / "cost.py"
    cost.write_text("A = 1\n")
    out = tmp_path / "reports" / "toy"
    out.mkdir(parents=True)
    (out / "report.md").write_text("# toy\n")
    monkeypatch.setattr(stamp, "ROOT", tmp_path)
    git = lambda *args: _git(tmp_path, *args)  # noqa: E731
    commit = ("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam")
    git("init", "-q")
    git("add", "-A")
    git(*commit, "start")
    assert stamp.stale_reason("experiments.repro.toy", out) == "no stamp"
    made = stamp.make_stamp("toy", "experiments.repro.toy", [0, 1, 2], {}, 0.0, 1.0)
    assert made["depends_on"] == [
        "experiments/repro/helper.py",
        "experiments/repro/toy.py",
        "src/recsync/runtime/sim/cost.py",
    ]
    stamp.write_stamp(out, made)
    git("add", "-A")
    git(*commit, "report")
    assert stamp.stale_reason("experiments.repro.toy", out) is None
    (tmp_path / "README").write_text("unrelated\n")
    git("add", "-A")
    git(*commit, "unrelated")
    assert stamp.stale_reason("experiments.repro.toy", out) is None
    for changed in (cost, tmp_path / "experiments" / "repro" / "helper.py", module):
        git("reset", "-q", "--hard", "HEAD")
        changed.write_text(changed.read_text() + "# changed\n")
        git(*commit, f"change {changed.name}")
        assert "changed its code after the stamp's" in str(
            stamp.stale_reason("experiments.repro.toy", out)
        )
        git("reset", "-q", "--hard", "HEAD~1")
    module.write_text(module.read_text() + "# uncommitted\n")
    dirty = stamp.make_stamp("toy", "experiments.repro.toy", [0], {}, 0.0, 1.0)
    assert dirty["dirty"]
    (out / "stamp.json").write_text(json.dumps(dirty))
    assert stamp.stale_reason("experiments.repro.toy", out) == (
        "stamped from uncommitted changes to its code"
    )


def test_every_report_has_its_reviewer_section_and_a_stamp_block() -> None:
    """(A reproduction not yet run has no report: `test_every_report_is_current` says so.)"""
    for r in REPRODUCTIONS.values():
        path = ROOT / r.report_dir / "report.md"
        if not path.is_file():
            continue
        report = path.read_text()
        assert "\n## What a reviewer would still ask\n" in report, r.report_dir
        assert report.count(stamp.BEGIN) == 1 and report.count(stamp.END) == 1, r.report_dir
