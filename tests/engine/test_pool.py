"""Node processes kept warm between jobs (runtime/ray/pool.py): a later job of the same Ray
session hosts its nodes in the processes of the one before, trains as a fresh job does
(its measures its own, nothing of the earlier node left), and a process that died is not
taken again."""

from __future__ import annotations

import os
import signal

import pytest
import ray
from small_jobs import ENGINE_MODEL, ENGINE_TRAIN

from recsync.coordinator.spec import ClusterSpec, JobSpec
from recsync.data.synthetic import SyntheticSpec
from recsync.families import strategy_config
from recsync.runtime.ray.job import run_job
from recsync.runtime.ray.pool import IDLE

pytestmark = pytest.mark.usefixtures("local_ray")

SMALL = SyntheticSpec(num_train=8_000, num_test=2_000, num_dense=4, table_rows=(100,) * 8)


def _job(strategy: str) -> JobSpec:
    return JobSpec(
        model=ENGINE_MODEL,
        train=ENGINE_TRAIN,
        cluster=ClusterSpec(2, 2, 2, worker_processes=False),
        strategy=strategy_config(strategy),
        synthetic=SMALL,
    )


def _run(strategy: str) -> tuple[dict, dict[str, int]]:
    """A job's summary and the process id of each of its nodes."""
    jobs: list = []
    pids: dict[str, int] = {}

    def on_progress(done: int, total: int, eps: float) -> None:
        if not pids:
            actors = jobs[0].hosts.actors
            found = ray.get([actor.ping.remote() for actor in actors.values()])
            pids.update(zip((a.name for a in actors), found, strict=True))

    summary = run_job(_job(strategy), on_progress=on_progress, on_start=jobs.append)
    return summary, pids


def test_a_later_job_hosts_its_nodes_in_the_earlier_jobs_processes():
    first, first_pids = _run("easgd")
    kept = len(IDLE)
    assert kept >= len(first_pids), (kept, first_pids)  # every node process released
    victim = first_pids["embedding-server-0"]
    os.kill(victim, signal.SIGKILL)  # an idle process that died is not taken again

    second, second_pids = _run("async")  # another strategy: other nodes, other classes
    assert first_pids and second_pids
    reused = set(second_pids.values()) & set(first_pids.values())
    assert len(reused) >= len(second_pids) - 1, (first_pids, second_pids)
    assert victim not in second_pids.values()
    for summary in (first, second):
        assert summary["examples_trained"] == SMALL.num_train
        assert summary["test_auc"] > 0.6, summary["test_auc"]
        # a job's measures are its own (the earlier node's counts carried over would double
        # them): a call a batch, and each worker's last call that found the data ended
        calls = summary["calls_per_batch"]["trainers"]
        batches = SMALL.num_train / ENGINE_TRAIN.batch_size
        assert calls["NextBatch"] == pytest.approx((batches + 4) / batches, abs=0.01), calls
