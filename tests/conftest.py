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


@pytest.hookimpl(tryfirst=True)  # before xdist's `loadgroup` reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    root = Path(__file__).parent
    for item in items:
        tier = Path(item.path).relative_to(root).parts[0]
        assert tier in TIERS, f"{item.nodeid}: a test belongs in one of {TIERS}"
        item.add_marker(getattr(pytest.mark, tier))
        if tier == "engine":  # one Ray at a time: under xdist, one worker runs them all
            item.add_marker(pytest.mark.xdist_group("engine"))


class SharedRay:
    """The local Ray cluster of 2 CPUs the engine modules share: started by the first test
    that asks for it (`local_ray`), kept up for the next ones (a start costs seconds of
    both cores), stopped before a module that needs Ray down (`no_local_ray`: its own
    cluster, or a run that must start its own) and once the engine tests are done."""

    started = False

    @classmethod
    def start(cls) -> None:
        from recsync.runtime.ray.job import connect

        cls.started = connect(None, 2) or cls.started

    @classmethod
    def stop(cls) -> None:
        import ray

        if cls.started and ray.is_initialized():
            ray.shutdown()
        cls.started = False


@pytest.fixture(scope="module")
def local_ray() -> Iterator[None]:
    """A local Ray cluster of 2 CPUs for a module's engine tests (the shared one)."""
    SharedRay.start()
    yield


@pytest.fixture(scope="module")
def no_local_ray() -> Iterator[None]:
    """No shared Ray running in this process, for a module that starts a cluster of its
    own or runs one that must start its own."""
    SharedRay.stop()
    yield


@pytest.hookimpl(trylast=True)  # after the test's fixtures were torn down
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    if nextitem is None or nextitem.get_closest_marker("engine") is None:
        SharedRay.stop()
