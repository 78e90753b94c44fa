"""Two readers on real Ray actors: every example trained once, cuts record both readers'
positions, and a cut resumes onto one reader."""

from __future__ import annotations

import dataclasses

import pytest
from small_jobs import ENGINE_MODEL, ENGINE_SYNTHETIC

from recsync.coordinator.cuts import CheckpointEvery
from recsync.coordinator.spec import ClusterSpec, JobSpec
from recsync.families import strategy_config
from recsync.optim.train_spec import TrainSpec
from recsync.runtime.ray.job import run_job

pytestmark = pytest.mark.usefixtures("local_ray")

SYNTHETIC = dataclasses.replace(ENGINE_SYNTHETIC, num_train=20_000, num_test=4_000)


def spec(readers: int, resume=None, slowdown: float = 1.0) -> JobSpec:
    slowed = (slowdown, slowdown)
    cluster = ClusterSpec(
        2, 1, 1, 0, trainer_slowdown=slowed, worker_processes=False, num_readers=readers
    )
    return JobSpec(
        model=ENGINE_MODEL,
        train=TrainSpec(batch_size=128),
        cluster=cluster,
        strategy=strategy_config("independent"),
        synthetic=SYNTHETIC,
        resume=resume,
    )


def test_two_readers_hand_out_every_example_once_and_a_cut_resumes_onto_one():
    # the driver cuts only when it polls (every 0.5 s): on a quiet machine the unslowed job
    # trains its 20,000 examples in about one poll, so its trainers are slowed to leave cuts
    states: list = []
    summary = run_job(
        spec(2, slowdown=6.0),
        checkpoint_every=CheckpointEvery(examples=6_000),
        on_checkpoint=states.append,
    )
    assert summary["examples_trained"] == SYNTHETIC.num_train
    assert summary["checkpoint"]["data_position"] == SYNTHETIC.num_train
    assert states, "no cut was taken"
    state = states[0]
    rest = run_job(spec(1, resume=state))
    assert rest["examples_trained"] == SYNTHETIC.num_train - state.stream_position.handed
    assert rest["checkpoint"]["data_position"] == SYNTHETIC.num_train
