"""`recsync advise --address`: a phase's points run as Ray tasks, as many at once as the
cluster has cores, and give the advice the same points measured in this process give
(every point is a seeded simulation)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_advise import CLUSTER, files

from recsync.app.advise.advice import AdviseOptions, advise
from recsync.app.advise.candidates import JobSource
from recsync.app.advise.cluster import load_cluster
from recsync.app.advise.report import advice_rows
from recsync.runtime.ray.tasks import TaskPool

pytestmark = pytest.mark.usefixtures("local_ray")


def test_points_run_as_ray_tasks_give_the_advice_of_points_run_here(tmp_path):
    job_file, cluster_file = files(tmp_path, CLUSTER)
    job = JobSource(Path(job_file), {})
    cluster = load_cluster(cluster_file)
    options = AdviseOptions(
        strategies=["easgd", "async"],
        slice_examples=800,
        quality_examples=1000,
        quality_test_examples=300,
        seeds=(0,),
    )
    here = advise(job, cluster, options, tmp_path / "here")
    pool = TaskPool("local")
    assert pool.slots >= 2 and not pool.started  # the shared Ray of 2 cores, joined
    try:
        there = advise(job, cluster, options, tmp_path / "there", runner=pool)
    finally:
        pool.close()
    assert there.measured_points == here.measured_points == 6
    assert json.dumps(advice_rows(there)) == json.dumps(advice_rows(here))
