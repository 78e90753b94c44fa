"""Fixtures shared by the test modules."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


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
