"""A reproduction's points as Ray tasks (`recsync reproduce NAME --address`): the same
numbers as in this machine's processes (the simulator is deterministic), each point kept
and taken again by a rerun of the same code."""

from __future__ import annotations

from pathlib import Path

import pytest

from experiments.repro import gba_norms
from experiments.repro.common import run_in_processes
from experiments.repro.points import points_kept
from recsync.runtime.pools import calls_on
from recsync.runtime.ray.tasks import TaskPool

ROOT = Path(__file__).resolve().parents[2]  # the checkout: its experiments/ folder
POINTS = [("sync", 32, 0, 3, 0), ("bsp", 16, 1, 3, 0)]  # two short GBA-norms runs


@pytest.mark.usefixtures("no_local_ray")
def test_a_reproductions_points_run_as_ray_tasks_and_are_kept(tmp_path):
    here = run_in_processes(gba_norms.run_point, POINTS, None)
    pool = TaskPool("local", num_cpus=2, python_path=[str(ROOT)])
    try:
        told: list[dict] = []
        with points_kept(tmp_path) as cache, calls_on(pool):
            on_ray = run_in_processes(gba_norms.run_point, POINTS, told.append)
        assert cache.computed == 2 and len(told) == 2
        with points_kept(tmp_path) as again, calls_on(pool):
            assert run_in_processes(gba_norms.run_point, POINTS, None) == on_ray
        assert again.reused == 2 and again.computed == 0
    finally:
        pool.close()
    assert on_ray == here
