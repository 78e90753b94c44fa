"""`recsync advise`'s point cache (app/advise/cache.py): keys follow what a point depends
on; points survive in the folder, a line cut short by a killed run is skipped."""

from __future__ import annotations

from recsync.app.advise.cache import POINTS, PointCache, code_digest, point_key


def test_the_key_follows_the_parts_and_the_code():
    parts = {"kind": "priced", "examples": 100, "config": {"a": 1}}
    assert point_key(parts) == point_key(dict(reversed(list(parts.items()))))
    assert point_key(parts) != point_key({**parts, "examples": 101})
    assert code_digest().startswith("0.") or "+" in code_digest()


def test_points_are_kept_and_read_back(tmp_path):
    cache = PointCache(tmp_path)
    cache.put("k1", {"eps": 1.5, "loads": {"reader": float("nan")}})
    cache.put("k2", {"eps": 2.0})
    with (tmp_path / POINTS).open("a") as handle:
        handle.write('{"key": "k3", "point": {"eps"')  # killed mid-line
    again = PointCache(tmp_path)
    assert again.get("k1") == {"eps": 1.5, "loads": {"reader": None}}
    assert again.get("k2") == {"eps": 2.0}
    assert again.get("k3") is None
    assert PointCache(None).get("k1") is None  # no folder: nothing kept
