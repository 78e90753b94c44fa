"""Where `recsync reproduce` finds its reproductions: the experiments folder of a recsync
checkout (a Python package named `experiments`, outside the product and its wheel), loaded
by path when the command runs; the product never imports it.

The folder is the first of: `$RECSYNC_EXPERIMENTS`; `./experiments` in the current
directory; `experiments/` beside the `src/` folder the running recsync was loaded from
(an editable install or `PYTHONPATH=src` of a checkout). Its `experiments.repro` package
holds `REPRODUCTIONS`: command name -> a `Reproduction`.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol, cast

import recsync
from recsync.errors import RecsyncError

ENV_VAR = "RECSYNC_EXPERIMENTS"
PACKAGE = "experiments"
Progress = Callable[[Any], None]


class Reproduction(Protocol):
    """What `recsync reproduce` reads of a registered reproduction."""

    @property
    def name(self) -> str: ...
    @property
    def paper(self) -> str: ...
    @property
    def claim(self) -> str: ...
    @property
    def report_dir(self) -> str: ...
    @property
    def minutes(self) -> float: ...
    @property
    def run(self) -> Callable[[Path, Progress | None], Any]: ...
    @property
    def show(self) -> Callable[[Any], str]: ...
    def reproduce(
        self, out: Path, progress: Progress | None = None, command: str | None = None
    ) -> Any:
        """Run it into `out` and stamp the report (naming `command`)."""

    def stale_reason(self, out: Path) -> str | None:
        """Why the report in `out` is not current (None: it is)."""


def candidate_folders() -> list[tuple[str, Path]]:
    """The folders looked in, in order, each with where it comes from."""
    named = os.environ.get(ENV_VAR)
    if named:
        return [(f"${ENV_VAR}", Path(named).expanduser())]
    checkout = Path(recsync.__file__).resolve().parents[2] / PACKAGE
    return [("the current directory", Path.cwd() / PACKAGE), ("the checkout", checkout)]


def experiments_folder() -> Path:
    """The first candidate folder that is a package named `experiments`; raises naming every
    place looked in where none is."""
    candidates = candidate_folders()
    for _, folder in candidates:
        if (folder / "__init__.py").is_file() and folder.name == PACKAGE:
            return folder.resolve()
    looked = "; ".join(f"{where}: {folder}" for where, folder in candidates)
    raise RecsyncError(
        f"no experiments folder (a package named {PACKAGE}/ with an __init__.py) found; "
        f"looked in {looked}. Run from a recsync checkout, or set {ENV_VAR} to its "
        f"{PACKAGE}/ folder"
    )


def load_reproductions() -> Mapping[str, Reproduction]:
    """The reproductions the experiments folder registers, by command name."""
    folder = experiments_folder()
    loaded = sys.modules.get(PACKAGE)
    if loaded is None:
        sys.path.insert(0, str(folder.parent))  # so worker processes import it as well
    package = importlib.import_module(PACKAGE)
    where = Path(getattr(package, "__file__", None) or "?").parent
    if where.resolve() != folder:
        raise RecsyncError(
            f"the package {PACKAGE!r} loaded from {where}, not from the experiments folder "
            f"{folder} (set {ENV_VAR} to the one to use)"
        )
    repro = importlib.import_module(f"{PACKAGE}.repro")
    return cast(Mapping[str, Reproduction], repro.REPRODUCTIONS)
