"""A reproduction's finished points, kept on disk while it runs, so that a run stopped
midway (Ctrl-C, a lost machine, the end of a session) resumes where it stopped (issue 55).

A point is one call of a runner's per-point function on one item (`common.run_in_processes`
runs them). It is stored under the reproduction's output folder, in `.points/<code>/`,
keyed by the function's name and the item's repr; `<code>` fingerprints the code that
computes it: every Python file of the product (src/recsync) and the reproduction's own
modules (`stamp.dependencies`), so a point computed by other code is never reused. A
reproduction that finishes drops its points; one that stops keeps them for the next run.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from experiments.repro import stamp

POINTS_DIR = ".points"
_kept: ContextVar[PointCache | None] = ContextVar("kept_points", default=None)


def code_fingerprint(module: str) -> str:
    """A digest of the files whose change could change a point of the reproduction in
    `module` (a dotted name in experiments.repro)."""
    files = sorted((stamp.ROOT / "src" / "recsync").rglob("*.py"))
    for dependency in stamp.dependencies(module):
        path = stamp.ROOT / dependency
        files += [path] if path.is_file() else sorted(path.rglob("*.py"))
    digest = hashlib.sha256()
    for path in sorted(set(files)):
        digest.update(str(path.relative_to(stamp.ROOT)).encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()[:16]


class PointCache:
    """The points of one reproduction's run computed so far, by function and item."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.reused = 0  # points this run took from an earlier, stopped run

    @staticmethod
    def _key(run: Callable[..., Any], item: Any) -> str | None:
        text = repr(item)
        if " at 0x" in text:  # an object's identity: not the same item in another run
            return None
        name = f"{run.__module__}.{run.__qualname__}\0{text}"
        return hashlib.sha256(name.encode()).hexdigest()

    def get(self, run: Callable[..., Any], item: Any) -> tuple[bool, Any]:
        """(True, the point) if it was computed before, else (False, None)."""
        key = self._key(run, item)
        path = None if key is None else self.folder / f"{key}.pkl"
        if path is None or not path.is_file():
            return False, None
        self.reused += 1
        return True, pickle.loads(path.read_bytes())

    def put(self, run: Callable[..., Any], item: Any, point: Any) -> None:
        key = self._key(run, item)
        if key is None:
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        partial = self.folder / f"{key}.part{os.getpid()}"
        partial.write_bytes(pickle.dumps(point))
        partial.replace(self.folder / f"{key}.pkl")  # whole or absent, never half written


def kept_points() -> PointCache | None:
    """The cache of the reproduction running in this process (None: points are not kept)."""
    return _kept.get()


@contextmanager
def points_kept(out: Path, module: str) -> Iterator[PointCache]:
    """Keep the points computed inside the block under `out`; drop them if it finishes."""
    cache = PointCache(out / POINTS_DIR / code_fingerprint(module))
    token = _kept.set(cache)
    try:
        yield cache
    finally:
        _kept.reset(token)
    shutil.rmtree(out / POINTS_DIR, ignore_errors=True)  # reached only when it finished
