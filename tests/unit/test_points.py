"""A reproduction stopped midway resumes where it stopped: its finished points are kept on
disk under its output folder, keyed by the code that computed them (the function's module
and what it imports), and kept when it finishes, so a rerun of the same code takes them
all; a finished run drops the points of other code."""

from __future__ import annotations

from pathlib import Path

import pytest

from experiments.repro import points
from experiments.repro.common import run_in_processes

MODULE = "experiments.repro.psp"


def square(item: tuple[str, int]) -> dict[str, int]:
    return {"value": item[1] ** 2}


class Stop(Exception):
    pass


def stop_after_one(row: dict[str, int]) -> None:
    raise Stop


def test_a_stopped_run_keeps_its_points_and_the_next_run_takes_them(tmp_path: Path) -> None:
    items = [("a", 1), ("b", 2), ("c", 3)]
    with pytest.raises(Stop), points.points_kept(tmp_path):
        run_in_processes(square, items, stop_after_one)
    kept = list((tmp_path / points.POINTS_DIR).rglob("*.pkl"))
    assert len(kept) == 1  # the first point back, then the stop
    told: list[dict[str, int]] = []
    with points.points_kept(tmp_path) as cache:
        rows = run_in_processes(square, items, told.append)
    assert rows == [{"value": 1}, {"value": 4}, {"value": 9}]
    assert cache.reused == 1 and cache.computed == 2 and len(told) == 3  # taken: told too
    with points.points_kept(tmp_path) as again:  # finished: kept, a rerun computes nothing
        assert run_in_processes(square, items, None) == rows
    assert again.reused == 3 and again.computed == 0


def test_points_of_other_code_or_another_item_are_not_taken(tmp_path: Path, monkeypatch) -> None:
    folder = tmp_path / points.POINTS_DIR / "old-code"
    old = points.PointCache(folder)
    old.put(square, ("a", 1), {"value": -1})
    assert old.get(square, ("a", 1)) == (True, {"value": -1})
    assert old.get(square, ("a", 2)) == (False, None)
    assert old.get(stop_after_one, ("a", 1)) == (False, None)  # another function's
    with points.points_kept(tmp_path) as cache:
        assert cache.folder(square) != folder
        assert run_in_processes(square, [("a", 1)], None) == [{"value": 1}]
    assert not folder.exists() and cache.folder(square).is_dir()  # other code's: dropped


def test_the_code_fingerprint_follows_the_code_a_point_runs(monkeypatch) -> None:
    before = points.code_fingerprint(MODULE)
    assert points.code_fingerprint(MODULE) == before
    assert points.code_fingerprint("experiments.repro.swap_days") != before
    real = Path.read_bytes

    def edited(name: str) -> str:
        monkeypatch.setattr(
            Path,
            "read_bytes",
            lambda path: real(path) + (b"#" if path.as_posix().endswith(name) else b""),
        )
        fingerprint = points.code_fingerprint(MODULE)
        monkeypatch.setattr(Path, "read_bytes", real)
        return fingerprint

    runs_files = ("repro/psp.py", "psp_settings.py", "sim/cost.py", "strategy/gradient.py")
    for runs in (*runs_files, "common.py"):
        assert edited(runs) != before, runs  # its module, what it imports, the simulator's
    for cannot in ("cli/main.py", "swap_days.py", "repro/stamp.py", "repro/reviewer.py"):
        assert edited(cannot) == before, cannot  # the CLI, another reproduction, words only


def test_an_item_that_names_an_object_identity_is_never_kept(tmp_path: Path) -> None:
    cache = points.PointCache(tmp_path)
    cache.put(square, ("a", object()), {"value": 0})
    assert not list(tmp_path.iterdir())
