"""Checkpoints while a job trains (coordinator/cuts.py): the reader's pause and the workers'
parking (pure, message by message), and simulated jobs cut as they run: a cut holds
exactly the batches handed out, so a job resumed from it ends where the uninterrupted one
does."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from test_sim import MODEL, TRAIN, one_thread  # noqa: F401
from test_sim import SYNTHETIC as SIM_SYNTHETIC

from recsync.coordinator.cuts import CheckpointEvery, CutSchedule
from recsync.coordinator.reader import ReaderNode
from recsync.coordinator.spec import ClusterSpec, JobSpec, plan_for
from recsync.families import strategy_config
from recsync.io.sources import SyntheticData
from recsync.optim.train_spec import TrainSpec
from recsync.protocol.reading import AwaitCut, NextBatch, Park, PauseReading, ResumeReading
from recsync.runtime.sim.cost import CostModel
from recsync.runtime.sim.job import SimJob
from recsync.strategy.timing import Timing

SYNTHETIC = dataclasses.replace(SIM_SYNTHETIC, num_train=6_400, num_test=2_000)


def reader(num_workers: int, batches_per_step: int) -> ReaderNode:
    source = SyntheticData(SYNTHETIC, TrainSpec(batch_size=64))
    return ReaderNode(source, 1, num_workers=num_workers, batches_per_step=batches_per_step)


def test_the_schedule_is_due_by_examples_or_by_seconds_since_the_last_cut():
    schedule = CutSchedule(CheckpointEvery(examples=1_000, seconds=10.0))
    assert not schedule.due(999, 9.9) and schedule.due(1_000, 0.0) and schedule.due(0, 10.0)
    schedule.taken(1_000, 4.0)
    assert not schedule.due(1_999, 13.9) and schedule.due(2_000, 4.0) and schedule.due(0, 14.0)
    assert not CutSchedule(CheckpointEvery()).due(10**9, 1e9)
    with pytest.raises(ValueError, match="intervals must be >= 0"):
        CheckpointEvery(examples=-1)


def test_a_pause_waits_for_the_step_in_progress_then_every_worker_parks():
    node = reader(num_workers=3, batches_per_step=3)
    for _ in range(4):  # step 1 (3 batches) and one batch of step 2
        assert node.handle(NextBatch(0)).batch is not None
    node.handle(PauseReading())
    assert not node.ready(AwaitCut())
    for _ in range(2):  # the rest of step 2 is still handed out
        assert node.handle(NextBatch(0)).batch is not None
    assert node.handle(NextBatch(0)).paused
    for worker in (0, 2):
        node.handle(Park(worker))
        assert not node.ready(AwaitCut())
    parked = NextBatch(0, parked=1)
    node.handle(Park(1))
    assert node.ready(AwaitCut()) and node.handle(AwaitCut()) == 6 * 64
    assert not node.ready(parked)
    node.handle(ResumeReading())
    assert node.ready(parked) and node.handle(parked).batch is not None


def test_a_worker_out_of_data_counts_as_parked_and_an_exhausted_stream_has_no_cut():
    node = reader(num_workers=2, batches_per_step=1)
    while node.handle(NextBatch(0)).batch is not None:  # one worker drains the stream
        pass
    node.handle(PauseReading())
    assert node.ready(AwaitCut()) and node.handle(AwaitCut()) is None
    assert node.handle(NextBatch(0)).batch is None and not node.handle(NextBatch(0)).paused


def sim_job(strategy: str, cluster: ClusterSpec, every: int, **fields) -> tuple[SimJob, list]:
    spec = JobSpec(MODEL, TRAIN, cluster, strategy_config(strategy, **fields), SYNTHETIC)
    states: list = []
    every_examples = CheckpointEvery(examples=every)
    sim = SimJob(
        spec,
        plan_for(spec),
        CostModel(),
        checkpoint_every=every_examples,
        on_checkpoint=states.append,
    )
    return sim, states


CUT_JOBS = [
    ("sync", ClusterSpec(2, 2, 2, num_dense_servers=2), {}),
    ("allreduce", ClusterSpec(3, 1, 2), {}),
    ("gba", ClusterSpec(2, 2, 2, num_dense_servers=1), {"num_aggregate": 3}),
    ("independent", ClusterSpec(1, 1, 1), {}),
]


@pytest.mark.parametrize(("strategy", "cluster", "fields"), CUT_JOBS, ids=[j[0] for j in CUT_JOBS])
def test_a_job_resumed_from_a_cut_ends_with_the_uninterrupted_jobs_model(strategy, cluster, fields):
    # strategies whose math does not depend on timing: resuming from any cut must give the
    # model the uninterrupted run ends with (a cut that lost or repeated a batch, or missed a
    # push, would not)
    sim, states = sim_job(strategy, cluster, 1_500, **fields)
    summary = sim.run()
    assert summary["examples_trained"] == SYNTHETIC.num_train
    step = 64 * sim.spec.strategy.batches_per_step(cluster.hogwild_threads)
    assert len(states) >= 3 and all(s.data_position % step == 0 for s in states)
    final = sim.final_state
    for state in (states[0], states[-1]):
        spec = dataclasses.replace(sim.spec, resume=state)
        resumed = SimJob(spec, plan_for(spec), CostModel())
        rest = resumed.run()
        assert rest["examples_trained"] == SYNTHETIC.num_train - state.data_position
        assert torch.allclose(resumed.final_state.dense, final.dense, atol=1e-6)
        for mine, theirs in zip(resumed.final_state.shards, final.shards, strict=True):
            assert torch.allclose(mine["weight"], theirs["weight"], atol=1e-6)


@pytest.mark.parametrize("strategy", ["easgd", "async", "bounded_staleness", "psp"])
def test_cut_jobs_of_every_timing_dependent_strategy_account_for_every_batch(strategy):
    cluster = ClusterSpec(2, 2, 2, num_dense_servers=1)
    fields = {"timing": Timing()} if strategy == "easgd" else {}
    sim, states = sim_job(strategy, cluster, 1_000, **fields)
    summary = sim.run()
    assert summary["examples_trained"] == SYNTHETIC.num_train and len(states) >= 4
    positions = [s.data_position for s in states]
    assert positions == sorted(positions) and positions[-1] < SYNTHETIC.num_train
    assert all(s.in_flight_examples == 0 for s in states)


def test_a_fixed_rate_collective_refuses_cuts():
    refusal = strategy_config("ma", timing=Timing("fixed", every_iterations=5)).cut_refusal()
    assert refusal is not None and "timing = shadow" in refusal
    assert strategy_config("ma").cut_refusal() is None
