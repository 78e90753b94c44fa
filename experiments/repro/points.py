"""A reproduction's finished points, kept on disk while it runs, so that a run stopped
midway (Ctrl-C, a lost machine, the end of a session) resumes where it stopped (issue 55).

A point is one call of a runner's per-point function on one item (`common.run_in_processes`
runs them). It is stored under the reproduction's output folder, in `.points/<code>/`,
keyed by the function's name and the item's repr; `<code>` fingerprints the code that
computes it: the function's module and every file of the checkout it imports, transitively
(`code_closure`), so a point computed by other code is never reused, and a change that
cannot alter a point (a report's wording, its claims, the CLI) does not discard it. The
points stay after a run finishes, so regenerating a report whose points' code did not
change costs only its rendering; the stamp counts the points taken (`reused`). A finished
run drops the points of other code.
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

from experiments.repro import code_closure, stamp

POINTS_DIR = ".points"
# modules of a report's words only (the reviewer's questions, a claim's record): a report
# depends on them (`stamp.dependencies`), no point's number does
TEXT_ONLY = ("reviewer", "claims")
_kept: ContextVar[PointCache | None] = ContextVar("kept_points", default=None)


def code_fingerprint(module: str) -> str:
    """A digest of the files whose change could change a point computed by a function of
    `module` (dotted): the module and every file of the checkout it runs."""
    skip = [f"{stamp.PACKAGE}.{name}" for name in (*stamp.NOT_DEPENDENCIES, *TEXT_ONLY)]
    digest = hashlib.sha256()
    for path in code_closure.closure(module, stamp.ROOT, skip):
        digest.update(str(path.relative_to(stamp.ROOT)).encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()[:16]


class PointCache:
    """The points of one reproduction's runs, by the code that computed them, function and
    item, under `root` (the `.points` folder of its output)."""

    def __init__(self, root: Path):
        self.root = root
        self.reused = 0  # points this run took from an earlier run of the same code
        self.computed = 0  # points this run computed
        self._codes: dict[str, str] = {}  # a function's module -> its code's fingerprint

    def folder(self, run: Callable[..., Any]) -> Path:
        """Where the points of `run` under its module's current code are kept."""
        module = run.__module__
        if module not in self._codes:
            self._codes[module] = code_fingerprint(module)
        return self.root / self._codes[module]

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
        path = None if key is None else self.folder(run) / f"{key}.pkl"
        if path is None or not path.is_file():
            return False, None
        self.reused += 1
        return True, pickle.loads(path.read_bytes())

    def put(self, run: Callable[..., Any], item: Any, point: Any) -> None:
        self.computed += 1
        key = self._key(run, item)
        if key is None:
            return
        folder = self.folder(run)
        folder.mkdir(parents=True, exist_ok=True)
        partial = folder / f"{key}.part{os.getpid()}"
        partial.write_bytes(pickle.dumps(point))
        partial.replace(folder / f"{key}.pkl")  # whole or absent, never half written

    def drop_other_code(self) -> None:
        """Delete the points of code this run did not use (an older version's)."""
        used = set(self._codes.values())
        for folder in self.root.glob("*") if self.root.is_dir() else ():
            if folder.name not in used:
                shutil.rmtree(folder, ignore_errors=True)


def kept_points() -> PointCache | None:
    """The cache of the reproduction running in this process (None: points are not kept)."""
    return _kept.get()


@contextmanager
def points_kept(out: Path) -> Iterator[PointCache]:
    """Keep the points computed inside the block under `out`, and take those computed
    before by the same code; when the block finishes, drop those of other code."""
    cache = PointCache(out / POINTS_DIR)
    token = _kept.set(cache)
    try:
        yield cache
    finally:
        _kept.reset(token)
    cache.drop_other_code()  # reached only when it finished
