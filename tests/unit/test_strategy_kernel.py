"""The strategy kernel (recsync.strategy) is one package low in the stack: the servers, the
trainers and the coordinator use it, so it runs below them. Its family interface names the
specs a family builds and reads (the job's, its nodes', its plan) for the type checker
alone: import-linter lets those imports through by name (pyproject.toml), and this test
checks that they stay type-only, in a fresh Python that imports the whole kernel."""

from __future__ import annotations

import pkgutil
import subprocess
import sys

import recsync.strategy

# the packages above the kernel in the layers of pyproject.toml
ABOVE = (
    "recsync.ps",
    "recsync.trainer",
    "recsync.io",
    "recsync.coordinator",
    "recsync.families",
    "recsync.runtime",
    "recsync.app",
)


def test_the_kernel_loads_nothing_above_it():
    modules = [
        f"recsync.strategy.{m.name}" for m in pkgutil.iter_modules(recsync.strategy.__path__)
    ]
    assert "recsync.strategy.family" in modules and "recsync.strategy.roles" in modules
    check = (
        f"import sys\nfor module in {modules!r}:\n    __import__(module)\n"
        f"print(sorted(m for m in sys.modules if m.startswith({ABOVE!r})))"
    )
    done = subprocess.run(
        [sys.executable, "-c", check], capture_output=True, text=True, timeout=300, check=True
    )
    assert done.stdout.strip() == "[]", done.stdout + done.stderr


def test_the_family_interface_and_the_config_base_are_in_the_kernel():
    from recsync.families.gradient.asynchronous import AsyncConfig
    from recsync.strategy.config import StrategyConfig
    from recsync.strategy.family import Family, family_of

    assert isinstance(family_of(AsyncConfig()), Family)
    assert issubclass(AsyncConfig, StrategyConfig)
