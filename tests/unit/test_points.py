"""A reproduction stopped midway resumes where it stopped: its finished points are kept on
disk under its output folder, keyed by the code that computed them, and dropped when it
finishes."""

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
    with pytest.raises(Stop), points.points_kept(tmp_path, MODULE):
        run_in_processes(square, items, stop_after_one)
    kept = list((tmp_path / points.POINTS_DIR).rglob("*.pkl"))
    assert len(kept) == 1  # the first point back, then the stop
    told: list[dict[str, int]] = []
    with points.points_kept(tmp_path, MODULE) as cache:
        rows = run_in_processes(square, items, told.append)
    assert rows == [{"value": 1}, {"value": 4}, {"value": 9}]
    assert cache.reused == 1 and len(told) == 3  # a point taken is told too
    assert not (tmp_path / points.POINTS_DIR).exists()  # finished: dropped


def test_points_of_other_code_or_another_item_are_not_taken(tmp_path: Path, monkeypatch) -> None:
    folder = tmp_path / points.POINTS_DIR / "old-code"
    old = points.PointCache(folder)
    old.put(square, ("a", 1), {"value": -1})
    assert old.get(square, ("a", 1)) == (True, {"value": -1})
    assert old.get(square, ("a", 2)) == (False, None)
    assert old.get(stop_after_one, ("a", 1)) == (False, None)  # another function's
    with points.points_kept(tmp_path, MODULE) as cache:
        assert cache.folder != folder
        assert run_in_processes(square, [("a", 1)], None) == [{"value": 1}]


def test_the_code_fingerprint_follows_the_reproductions_own_files(monkeypatch) -> None:
    before = points.code_fingerprint(MODULE)
    assert points.code_fingerprint(MODULE) == before
    assert points.code_fingerprint("experiments.repro.swap_days") != before
    real = Path.read_bytes

    def edited(path: Path) -> bytes:
        data = real(path)
        return data + b"#" if path.name == "psp.py" else data

    monkeypatch.setattr(Path, "read_bytes", edited)
    assert points.code_fingerprint(MODULE) != before


def test_an_item_that_names_an_object_identity_is_never_kept(tmp_path: Path) -> None:
    cache = points.PointCache(tmp_path)
    cache.put(square, ("a", object()), {"value": 0})
    assert not list(tmp_path.iterdir())
