"""The points an advice measured, kept in its output folder (points.jsonl, one JSON line
each, appended as soon as a point is known) so that a rerun measures only what is missing.

A point's key is a digest of everything its result depends on: the candidate's whole
resolved job config, the cost model of its condition, the measurement's settings (slice,
sample, seed) and recsync's version and code (a digest of every source file of the
package but those that only order, rank and print points), so a change to any of them
measures it anew.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

import recsync
from recsync.app.runs.run_dir import json_ready

POINTS = "points.jsonl"


# source files no point's value depends on: the command line, and the advice's own
# ordering, ranking, caching and printing of points (measure.py, cluster.py and
# candidates.py make the points: they count)
NOT_IN_POINTS = (
    "app/cli/",
    "app/advise/advice.py",
    "app/advise/rank.py",
    "app/advise/report.py",
    "app/advise/cache.py",
)


@cache
def code_digest() -> str:
    """recsync's version and a digest of its package's source files (but NOT_IN_POINTS)."""
    root = Path(recsync.__file__).parent
    digest = hashlib.sha256(recsync.__version__.encode())
    for path in sorted(root.rglob("*.py")):
        if path.relative_to(root).as_posix().startswith(NOT_IN_POINTS):
            continue
        digest.update(path.relative_to(root).as_posix().encode())
        digest.update(path.read_bytes())
    return f"{recsync.__version__}+{digest.hexdigest()[:16]}"


def point_key(parts: Mapping[str, Any]) -> str:
    """The key of a point measured from `parts` (JSON-able), with the code's digest."""
    text = json.dumps({**parts, "code": code_digest()}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:24]


class PointCache:
    """The points of an output folder by key; `put` appends one to its file at once."""

    def __init__(self, folder: Path | None):
        self.path = None if folder is None else folder / POINTS
        self.points: dict[str, dict[str, Any]] = {}
        if self.path is not None and self.path.exists():
            for line in self.path.read_text(encoding="utf-8").splitlines():
                try:
                    record = json.loads(line)
                except json.JSONDecodeError:  # a line cut short by a killed run
                    continue
                if isinstance(record, dict) and "key" in record and "point" in record:
                    self.points[record["key"]] = record["point"]

    def get(self, key: str) -> dict[str, Any] | None:
        return self.points.get(key)

    def put(self, key: str, point: dict[str, Any]) -> None:
        self.points[key] = point
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a", encoding="utf-8") as handle:
                handle.write(json.dumps({"key": key, "point": json_ready(point)}) + "\n")
