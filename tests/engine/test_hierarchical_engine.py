"""Hierarchical training on real Ray actors and in the simulator, 2 groups x 2 trainers x 2
group PSs: the same bytes per node kind and message kind, and the same quality; and on Ray,
cut while it trains, resumed from a cut, and rolled back after a group PS's process was
killed."""

from __future__ import annotations

import dataclasses
import os
import signal

import pytest
import ray
import torch
from small_jobs import ENGINE_MODEL, ENGINE_SYNTHETIC

from experiments.repro.hierarchical import traffic_differences
from recsync.coordinator.checkpoint import JobState
from recsync.coordinator.cuts import CheckpointEvery
from recsync.coordinator.recovery import RecoveryPolicy
from recsync.coordinator.spec import ClusterSpec, JobSpec, plan_for
from recsync.families import strategy_config
from recsync.families.hierarchical.server import GROUP_SERVER
from recsync.optim.train_spec import TrainSpec
from recsync.protocol.address import Address
from recsync.runtime.ray.job import RayJob, run_job
from recsync.runtime.sim.cost import CostModel
from recsync.runtime.sim.job import SimJob

pytestmark = pytest.mark.usefixtures("local_ray")

SYNTHETIC, MODEL = ENGINE_SYNTHETIC, ENGINE_MODEL


def test_simulator_and_engine_agree_on_bytes_and_auc():
    spec = JobSpec(
        MODEL,
        TrainSpec(batch_size=128),
        ClusterSpec(4, 1, 2, num_dense_servers=2),
        strategy_config("hierarchical", groups=2),
        SYNTHETIC,
    )
    torch.set_num_threads(1)
    sim = SimJob(spec, plan_for(spec), CostModel()).run()
    real = run_job(spec)
    assert sim["examples_trained"] == real["examples_trained"] == SYNTHETIC.num_train
    assert sim["num_group_servers"] == real["num_group_servers"] == 4
    assert not traffic_differences(sim, real)  # timing-dependent kinds compared as sums
    assert sim["cross_group_syncs"] > 0 and real["cross_group_syncs"] > 0
    assert sim["test_auc"] > 0.7, sim["test_auc"]  # it learned (EASGD here: 0.743)
    assert abs(sim["test_auc"] - real["test_auc"]) < 0.01, (sim["test_auc"], real["test_auc"])


SMALL = dataclasses.replace(ENGINE_SYNTHETIC, num_train=16_000, num_test=4_000)


def small_job(resume: JobState | None = None) -> JobSpec:
    strategy = strategy_config("hierarchical", groups=2)
    cluster = ClusterSpec(2, 1, 2, num_dense_servers=1)
    return JobSpec(MODEL, TrainSpec(batch_size=128), cluster, strategy, SMALL, resume=resume)


def test_cuts_hold_every_handed_out_batch_and_a_job_resumes_from_one():
    states: list[JobState] = []
    summary = run_job(
        small_job(), checkpoint_every=CheckpointEvery(examples=2_000), on_checkpoint=states.append
    )
    assert summary["examples_trained"] == SMALL.num_train and states
    for state in states:
        batches = state.data_position // 128
        assert state.global_step == batches and state.in_flight_examples == 0
        held = state.family_state
        assert held is not None and len(held["centers"]) == 1
        assert sum(int(s["optimizer"]["steps"]) for s in held["servers"]) == batches
    rest = run_job(small_job(states[0]))
    assert rest["examples_trained"] == SMALL.num_train - states[0].data_position
    assert rest["test_auc"] > 0.6, rest["test_auc"]


def test_a_killed_group_ps_rolls_the_job_back_to_its_last_cut():
    lost = Address(GROUP_SERVER, 1)
    jobs: list[RayJob] = []
    killed: list[int] = []

    def kill(done: int, total: int | None, eps: float) -> None:
        if not killed and done >= 9_000:
            os.kill(ray.get(jobs[0].hosts.actors[lost].ping.remote()), signal.SIGKILL)
            killed.append(done)

    summary = run_job(
        small_job(),
        on_progress=kill,
        on_start=jobs.append,
        checkpoint_every=CheckpointEvery(examples=2_000),
        recovery=RecoveryPolicy(),
    )
    (loss,) = summary["recovery"]["losses"]
    assert loss["node"] == lost.name and loss["action"] == "rollback"
    assert loss["back_to"] % 128 == 0  # a cut's position (0: none was taken yet)
    assert summary["recovery"]["examples_replayed"] == loss["position"] - loss["back_to"] > 0
    assert summary["examples_trained"] == SMALL.num_train
