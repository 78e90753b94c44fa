"""Fixtures shared by the test modules, and the tiers: each test is marked by its folder.

- `unit/`: pure code, one process, no simulated job (seconds);
- `sim/`: whole jobs in the simulator, real math (seconds each);
- `cli/`: the `recsync` command run in-process on small files (simulator jobs);
- `engine/`: real Ray actors and processes (minutes in all).

`make test-fast` runs every tier but `engine` and tests marked `long`; `make test` runs all.
Shared helpers live in `support/` (on the path, as are the tier folders, so a test module
may import another's helpers by its name).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

TIERS = ("unit", "sim", "cli", "engine")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    root = Path(__file__).parent
    for item in items:
        tier = Path(item.path).relative_to(root).parts[0]
        assert tier in TIERS, f"{item.nodeid}: a test belongs in one of {TIERS}"
        item.add_marker(getattr(pytest.mark, tier))


@pytest.fixture(scope="module")
def local_ray() -> Iterator[None]:
    """A local Ray cluster of 2 CPUs for a module's engine tests, stopped after them (unless
    one was already running)."""
    import ray

    from recsync.runtime.ray.job import connect

    started = connect(None, 2)
    yield
    if started:
        ray.shutdown()
