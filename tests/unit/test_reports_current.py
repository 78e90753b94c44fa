"""The report-currency check (`recsync reproduce --check`, each results page's status): a
report is current where its stamp's code is the code as it is now, the whole product
package and the reproduction's own modules. These tests check the check on throwaway
checkouts; whether every committed report is current is the check's to say, not CI's (a
change to the product stales every report until `make reproduce` regenerates them)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from experiments.repro import REPRODUCTIONS, stamp
from recsync.app.cli.main import app

ROOT = Path(__file__).resolve().parents[2]


def test_every_reproduction_has_a_report_directory_and_known_dependencies() -> None:
    product = set(stamp.product_files())
    assert "src/recsync/runtime/sim/cost.py" in product
    assert "src/recsync/families/gradient/worker.py" in product  # families, not only sim
    assert "src/recsync/app/config/default.toml" in product  # the data the product ships
    for r in REPRODUCTIONS.values():
        assert (ROOT / r.report_dir).is_dir(), r.report_dir
        depends = stamp.dependencies(r.run.__module__)
        own = [path for path in depends if path not in product]
        assert r.run.__module__.replace(".", "/") + ".py" in own, own
        assert all(path.startswith("experiments/") for path in own), own
        assert "experiments/repro/verdict.py" in own
        assert set(depends) - set(own) == product
        assert all((ROOT / path).exists() for path in depends), depends


def _git(root: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=True)
    return done.stdout.strip()


@pytest.fixture
def toy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A throwaway checkout: a reproduction `toy` importing a helper, a product package of
    two modules (one the reproduction never imports) and a report directory."""
    (tmp_path / "experiments" / "repro").mkdir(parents=True)
    (tmp_path / "src" / "recsync" / "runtime" / "sim").mkdir(parents=True)
    (tmp_path / "src" / "recsync" / "families").mkdir(parents=True)
    module = tmp_path / "experiments" / "repro" / "toy.py"
    module.write_text("from experiments.repro.helper import X\nimport recsync.runtime.sim.cost\n")
    (tmp_path / "experiments" / "repro" / "helper.py").write_text("X = 1\n")
    (tmp_path / "experiments" / "repro" / "other.py").write_text("Y = 1\n")  # not imported
    (tmp_path / "src" / "recsync" / "runtime" / "sim" / "cost.py").write_text("A = 1\n")
    (tmp_path / "src" / "recsync" / "families" / "family.py").write_text("B = 1\n")
    (tmp_path / "reports" / "toy").mkdir(parents=True)
    (tmp_path / "reports" / "toy" / "report.md").write_text("# toy\n")
    monkeypatch.setattr(stamp, "ROOT", tmp_path)
    _git(tmp_path, "init", "-q")
    _commit(tmp_path, "start")
    return tmp_path


def _commit(root: Path, message: str) -> None:
    _git(root, "add", "-A")
    _git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", message)


def _stamp(root: Path) -> dict[str, object]:
    made = stamp.make_stamp("toy", "experiments.repro.toy", [0, 1, 2], {}, 0.0, 1.0)
    stamp.write_stamp(root / "reports" / "toy", made)
    _commit(root, "report")
    return made


def test_a_report_is_current_until_any_product_file_or_own_module_changes(toy: Path) -> None:
    out = toy / "reports" / "toy"
    assert stamp.stale_reason("experiments.repro.toy", out) == "no stamp"
    made = _stamp(toy)
    assert made["depends_on"] == [
        "experiments/repro/helper.py",
        "experiments/repro/toy.py",
        "src/recsync/",
    ]
    assert set(made["code"]) == {  # type: ignore[arg-type]
        "experiments/repro/helper.py",
        "experiments/repro/toy.py",
        "src/recsync/families/family.py",
        "src/recsync/runtime/sim/cost.py",
    }
    assert stamp.stale_reason("experiments.repro.toy", out) is None
    for unrelated in (toy / "README", toy / "experiments" / "repro" / "other.py"):
        unrelated.write_text("changed\n")
        assert stamp.stale_reason("experiments.repro.toy", out) is None
    changes = {
        "src/recsync/families/family.py": "B = 2\n",  # never imported by the reproduction
        "src/recsync/runtime/sim/cost.py": "A = 2\n",
        "experiments/repro/helper.py": "X = 2\n",
    }
    for path, text in changes.items():
        before = (toy / path).read_text()
        (toy / path).write_text(text)
        reason = stamp.stale_reason("experiments.repro.toy", out)
        assert reason == f"code changed since its stamp: 1 file (`{path}`)"
        (toy / path).write_text(before)  # the same contents again: current again
        assert stamp.stale_reason("experiments.repro.toy", out) is None
    (toy / "src" / "recsync" / "new.py").write_text("C = 1\n")  # a file added counts
    assert "`src/recsync/new.py`" in str(stamp.stale_reason("experiments.repro.toy", out))


def test_a_stamp_from_uncommitted_code_or_an_old_stamp_read_at_its_commit(toy: Path) -> None:
    out = toy / "reports" / "toy"
    (toy / "experiments" / "repro" / "toy.py").write_text("import recsync.runtime.sim.cost\n")
    dirty = stamp.make_stamp("toy", "experiments.repro.toy", [0], {}, 0.0, 1.0)
    assert dirty["dirty"]
    (out / "stamp.json").write_text(json.dumps(dirty))
    assert stamp.stale_reason("experiments.repro.toy", out) == (
        "stamped from uncommitted changes to its code"
    )
    _git(toy, "checkout", "-q", "--", "experiments")
    old = stamp.make_stamp("toy", "experiments.repro.toy", [0], {}, 0.0, 1.0)
    del old["code"]  # a stamp of before the code ids were kept: read at its commit
    (out / "stamp.json").write_text(json.dumps(old))
    assert stamp.stale_reason("experiments.repro.toy", out) is None
    (toy / "src" / "recsync" / "runtime" / "sim" / "cost.py").write_text("A = 3\n")
    _commit(toy, "cost")
    reason = stamp.stale_reason("experiments.repro.toy", out)
    assert reason == "code changed since its stamp: 1 file (`src/recsync/runtime/sim/cost.py`)"
    old["commit"] = "0" * 40
    (out / "stamp.json").write_text(json.dumps(old))
    assert stamp.stale_reason("experiments.repro.toy", out) == (
        "the stamp's commit 000000000000 is not in this checkout"
    )


def test_many_changed_files_are_named_then_counted() -> None:
    files = [f"src/recsync/m{i}.py" for i in range(9)]
    assert stamp.files_text(files) == (
        "9 files (`src/recsync/m0.py`, `src/recsync/m1.py`, `src/recsync/m2.py`, "
        "`src/recsync/m3.py`, `src/recsync/m4.py`, `src/recsync/m5.py` and 3 more)"
    )
    assert stamp.blob_id(Path(__file__)) == _git(ROOT, "hash-object", __file__)


def test_the_check_command_lists_each_report_and_fails_on_a_stale_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    names = list(REPRODUCTIONS)
    monkeypatch.setattr(
        type(REPRODUCTIONS[names[0]]),
        "stale_reason",
        lambda self, out: (
            "code changed since its stamp: 1 file (`x.py`)" if self.name == names[0] else None
        ),
    )
    result = CliRunner().invoke(app, ["reproduce", "--check"])
    assert result.exit_code == 1, result.output
    assert f"{names[0]} ({REPRODUCTIONS[names[0]].report_dir}): stale: code changed" in (
        result.output
    )
    assert f"{names[1]} ({REPRODUCTIONS[names[1]].report_dir}): current" in result.output
    assert f"{len(names) - 1} of {len(names)} reports current" in result.output
    monkeypatch.setattr(type(REPRODUCTIONS[names[0]]), "stale_reason", lambda self, out: None)
    assert CliRunner().invoke(app, ["reproduce", "--check"]).exit_code == 0


def test_every_report_has_its_reviewer_section_and_a_stamp_block() -> None:
    for r in REPRODUCTIONS.values():
        path = ROOT / r.report_dir / "report.md"
        if not path.is_file():
            continue
        report = path.read_text()
        assert "\n## What a reviewer would still ask\n" in report, r.report_dir
        assert report.count(stamp.BEGIN) == 1 and report.count(stamp.END) == 1, r.report_dir
