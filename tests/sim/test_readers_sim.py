"""Several readers sharing one stream (data/shares.py): every example handed out once, a
job cut with 3 readers resumed onto 2, and the accounting of simulated jobs."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from reader_jobs import drained
from test_sim import MODEL, TRAIN, one_thread  # noqa: F401
from test_sim import SYNTHETIC as SIM_SYNTHETIC

from recsync.coordinator.cuts import CheckpointEvery
from recsync.coordinator.node_specs import BuildContext
from recsync.coordinator.reader import ReaderNode
from recsync.coordinator.readers import common_step
from recsync.coordinator.recovery import RecoveryPolicy
from recsync.coordinator.spec import ClusterSpec, JobSpec, plan_for
from recsync.coordinator.topology import build_topology
from recsync.data.batch import Batch
from recsync.families import strategy_config
from recsync.io.sources import SyntheticData
from recsync.protocol.address import Role
from recsync.protocol.reading import NextBatch, Park, PauseReading
from recsync.runtime.sim.cost import CostModel, Faults
from recsync.runtime.sim.faulty import FaultySimJob
from recsync.runtime.sim.job import SimJob

SYNTHETIC = dataclasses.replace(SIM_SYNTHETIC, num_train=9_000, num_test=2_000)
SMALL_BLOCKS = dataclasses.replace(TRAIN, batch_size=64)


def job(readers: int, trainers: int = 3, resume=None) -> JobSpec:
    cluster = ClusterSpec(trainers, 1, 2, num_readers=readers)
    return JobSpec(MODEL, TRAIN, cluster, strategy_config("independent"), SYNTHETIC, resume=resume)


def rows(batches: list[Batch]) -> list[tuple[float, ...]]:
    dense = torch.cat([b.dense for b in batches])
    labels = torch.cat([b.labels for b in batches]).unsqueeze(1)
    return sorted(map(tuple, torch.cat([dense, labels], dim=1).tolist()))


def whole_stream() -> list[Batch]:
    return list(SyntheticData(SYNTHETIC, TRAIN).train_batches())


def test_three_readers_hand_out_every_example_of_the_stream_once():
    assert rows(drained(job(3))) == rows(whole_stream())


def test_a_simulated_job_of_three_readers_trains_every_example_once():
    sim = SimJob(job(3), plan_for(job(3)), CostModel())
    summary = sim.run()
    assert summary["examples_trained"] == SYNTHETIC.num_train
    assert [r.total_examples for r in sim.reader.readers] == [4096, 4096, 808]  # blocks of 4,096
    assert sim.final_state is not None and sim.final_state.data_position == SYNTHETIC.num_train


def test_a_cut_of_three_readers_resumes_onto_two_with_every_example_once():
    spec = job(3)
    states: list = []
    sim = SimJob(
        spec,
        plan_for(spec),
        CostModel(speed_spread=0.5),  # readers at different places at the cut
        checkpoint_every=CheckpointEvery(examples=2_000),
        on_checkpoint=states.append,
    )
    sim.run()
    assert states and any(s.data_beyond for s in states)
    state = next(s for s in states if s.data_beyond)
    position = state.stream_position
    resumed_spec = job(2, resume=state)
    resumed = SimJob(resumed_spec, plan_for(resumed_spec), CostModel())
    rest = resumed.run()
    assert rest["examples_trained"] == SYNTHETIC.num_train - position.handed
    assert resumed.final_state is not None
    assert resumed.final_state.data_position == SYNTHETIC.num_train
    # the examples the resumed readers hand out and those handed before the cut: the stream
    stream = whole_stream()
    at = 0
    before = []
    for batch in stream:
        for start, stop in ((0, position.prefix), *position.beyond):
            lo, hi = max(start, at), min(stop, at + batch.batch_size)
            if lo < hi:
                before.append(batch.slice(lo - at, hi - at))
        at += batch.batch_size
    assert rows(before + drained(resumed_spec)) == rows(stream)


def test_one_reader_is_the_default_for_a_small_job():
    assert ClusterSpec(2, 2, 2).readers == 1
    assert ClusterSpec(100, 8, 2).readers == 13


STEP_JOBS = [
    ("sync", ClusterSpec(2, 2, 2, num_dense_servers=2, num_readers=2), {}),
    ("gba", ClusterSpec(2, 2, 2, num_dense_servers=1, num_readers=2), {"num_aggregate": 6}),
]


@pytest.mark.parametrize(("strategy", "cluster", "fields"), STEP_JOBS, ids=["sync", "gba"])
def test_readers_cut_a_job_of_global_steps_between_two_steps(strategy, cluster, fields):
    # every reader pauses before the same global step (each counts the steps of its own
    # share): a cut holds whole steps, and the job resumed from it trains the rest once (its
    # readers deal what is left afresh, so its steps are not the uninterrupted job's)
    spec = JobSpec(MODEL, TRAIN, cluster, strategy_config(strategy, **fields), SYNTHETIC)
    states: list = []
    sim = SimJob(
        spec,
        plan_for(spec),
        CostModel(),
        checkpoint_every=CheckpointEvery(examples=1_500),
        on_checkpoint=states.append,
    )
    assert sim.run()["examples_trained"] == SYNTHETIC.num_train
    step = 64 * spec.strategy.batches_per_step(cluster.hogwild_threads)
    assert len(states) >= 3
    assert all(s.stream_position.handed % step == 0 for s in states)
    final = sim.final_state
    assert final is not None
    resumed_spec = dataclasses.replace(spec, resume=states[1])
    resumed = SimJob(resumed_spec, plan_for(resumed_spec), CostModel())
    left = SYNTHETIC.num_train - states[1].stream_position.handed
    assert resumed.run()["examples_trained"] == left
    assert resumed.final_state is not None
    assert resumed.final_state.data_position == final.data_position == SYNTHETIC.num_train


def test_a_step_that_does_not_split_among_the_readers_refuses_cuts():
    cluster = ClusterSpec(2, 2, 2, num_dense_servers=1, num_readers=2)
    gba = JobSpec(MODEL, TRAIN, cluster, strategy_config("gba", num_aggregate=3), SYNTHETIC)
    refusal = gba.cut_refusal()
    assert refusal is not None and "does not split evenly" in refusal
    assert dataclasses.replace(gba, strategy=strategy_config("sync")).cut_refusal() is None
    for one_batch in ("easgd", "async", "independent"):  # steps of one batch: cut at once
        assert dataclasses.replace(gba, strategy=strategy_config(one_batch)).cut_refusal() is None
    assert SimJob(gba, plan_for(gba), CostModel()).run()["examples_trained"] == 9_000


def test_readers_agree_on_the_step_a_cut_falls_before():
    cluster = ClusterSpec(2, 2, 2, num_dense_servers=1, num_readers=2)
    spec = JobSpec(MODEL, TRAIN, cluster, strategy_config("sync"), SYNTHETIC)
    topology = build_topology(spec, plan_for(spec))
    first, second = (
        n.build(BuildContext(one_at_a_time=True)) for n in topology.of_role(Role.READER)
    )
    assert isinstance(first, ReaderNode) and isinstance(second, ReaderNode)
    # each serves 2 of the 4 workers
    assert first.stream.step_share == second.stream.step_share == 2
    for worker in (0, 1, 0):
        first.handle(NextBatch(0, worker=worker))
    for worker in (2, 3):
        second.handle(NextBatch(1, worker=worker))
    boundaries = [first.handle(PauseReading()), second.handle(PauseReading())]
    assert boundaries == [2, 1] and common_step(boundaries) == 2
    assert second.paused and not first.paused
    second.handle(Park(2))  # parked before it learned the cut moved on: it goes on
    second.handle(PauseReading(2))
    assert not second.paused and second.parked == set()
    for worker in (2, 3):
        assert second.handle(NextBatch(1, worker=worker)).batch is not None
    assert second.handle(NextBatch(1, worker=2)).paused
    assert first.handle(NextBatch(0, worker=1)).batch is not None
    assert first.handle(NextBatch(0, worker=0)).paused
    for reader, workers in ((first, (0, 1)), (second, (2, 3))):
        for worker in workers:
            reader.handle(Park(worker))
        assert reader.at_cut
    assert first.total_examples + second.total_examples == 8 * 64  # two whole steps


def test_the_simulator_charges_each_reader_so_more_readers_lift_a_reader_bound_job():
    # a reader that hands out 200 batches/s serves 8 workers that could take far more:
    # the job runs at the readers' pace, 4 readers (a block of 4,096 examples each, twice)
    # nearly 4 times as fast as 1
    cost = CostModel(reader_batch_s=5e-3)
    synthetic = dataclasses.replace(SYNTHETIC, num_train=8 * 4096)

    def eps(readers: int) -> float:
        spec = JobSpec(
            MODEL,
            TRAIN,
            ClusterSpec(8, 1, 2, num_readers=readers),
            strategy_config("independent"),
            synthetic,
        )
        return SimJob(spec, plan_for(spec), cost).run()["eps"]

    one, four = eps(1), eps(4)
    assert one <= 64 / 5e-3 * 1.01  # one reader's pace
    assert four > 3.5 * one


def test_a_lost_reader_rolls_the_job_back_to_every_reader_s_position_at_the_last_cut():
    faults = Faults(reader_mtbf_s=0.15, detect_s=0.01, restart_s=0.02)
    spec = job(3)
    run = FaultySimJob(
        spec,
        CostModel(speed_spread=0.5, faults=faults),
        CheckpointEvery(examples=1_500),
        RecoveryPolicy(reader="rollback", max_restarts=20),
    )
    summary = run.run()
    losses = summary["recovery"]["losses"]
    assert losses and all(x["node"].startswith("reader") for x in losses)
    assert {x["node"] for x in losses} - {"reader"}, "only the first reader was lost"
    assert any(x["back_to"] > 0 for x in losses), "no loss came after a cut"
    assert summary["examples_trained"] == SYNTHETIC.num_train
    assert summary["recovery"]["examples_replayed"] == sum(
        x["position"] - x["back_to"] for x in losses
    )
    assert run.final_state is not None and run.final_state.data_position == SYNTHETIC.num_train
