"""The papers' reproductions, one module per paper (with its helpers' modules), and their
registry.

Each reproduction is one command (`recsync reproduce NAME`) that writes a report directory
(report.md, figures, a results JSON) under reports/. A module registers its reproduction
with `@reproduction(...)` on its runner (`registry.py`); importing this package imports
every module in it, so `REPRODUCTIONS` holds them all, in the modules' alphabetical order.
"""

from __future__ import annotations

import importlib
import pkgutil

from experiments.repro.registry import REPRODUCTIONS, Reproduction, reproduction

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")

__all__ = ["REPRODUCTIONS", "Reproduction", "reproduction"]
