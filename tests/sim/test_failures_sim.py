"""Node losses in the simulator: the real-math job that loses nodes and rolls back to its
last cut or replaces the lost node alone (runtime/sim/faulty.py, one_node.py), and the long
job's timeline (runtime/sim/timeline.py)."""

from __future__ import annotations

import dataclasses
import math
import statistics

import pytest
import torch
from test_cuts import MODEL, SYNTHETIC, TRAIN, one_thread  # noqa: F401

from recsync.coordinator.cuts import CheckpointEvery
from recsync.coordinator.recovery import RecoveryPolicy
from recsync.coordinator.spec import ClusterSpec, JobSpec, plan_for
from recsync.families import strategy_config
from recsync.runtime.sim.cost import CostModel, Faults
from recsync.runtime.sim.faulty import FaultySimJob, NodeLost
from recsync.runtime.sim.job import SimJob
from recsync.runtime.sim.timeline import Timeline, run_timeline, young_daly

LOSING = Faults(server_mtbf_s=0.15, trainer_mtbf_s=0.15, detect_s=0.5, restart_s=2.0)


def sync_job() -> JobSpec:
    cluster = ClusterSpec(2, 2, 2, num_dense_servers=2)
    return JobSpec(MODEL, TRAIN, cluster, strategy_config("sync"), SYNTHETIC)


def faulty(spec: JobSpec, faults: Faults = LOSING, **policy) -> FaultySimJob:
    cost = CostModel(faults=faults)
    return FaultySimJob(spec, cost, CheckpointEvery(examples=1_280), RecoveryPolicy(**policy))


def test_a_job_rolled_back_after_losses_ends_with_the_uninterrupted_model():
    # sync's math does not depend on timing: losses that roll back to consistent cuts and
    # replay what came after must end with exactly the model of a run that lost nothing
    spec = sync_job()
    calm = SimJob(spec, plan_for(spec), CostModel())
    calm_summary = calm.run()
    job = faulty(spec, max_restarts=10)
    summary = job.run()
    recovery = summary["recovery"]
    losses = recovery["losses"]
    assert len(losses) >= 2, losses
    assert summary["examples_trained"] == SYNTHETIC.num_train
    assert recovery["examples_replayed"] == sum(x["position"] - x["back_to"] for x in losses)
    assert all(x["back_to"] % (64 * 4) == 0 for x in losses)  # sync cuts between steps
    restarts = len(losses) * (LOSING.detect_s + LOSING.restart_s)
    assert summary["train_seconds"] > calm_summary["train_seconds"] + restarts
    assert torch.allclose(job.final_state.dense, calm.final_state.dense, atol=1e-6)
    for mine, theirs in zip(job.final_state.shards, calm.final_state.shards, strict=True):
        assert torch.allclose(mine["weight"], theirs["weight"], atol=1e-6)


def test_losses_are_drawn_from_the_seed_and_a_stop_policy_stops():
    spec = sync_job()
    first, again = faulty(spec, max_restarts=10).run(), faulty(spec, max_restarts=10).run()
    assert first["recovery"] == again["recovery"]
    assert first["train_seconds"] == again["train_seconds"]
    with pytest.raises(NodeLost, match="was lost"):
        faulty(spec, trainer="stop", embedding_server="stop", dense_server="stop").run()
    other = dataclasses.replace(spec, train=dataclasses.replace(TRAIN, seed=5))
    assert faulty(other, max_restarts=10).run()["recovery"] != first["recovery"]


QUICK = {"detect_s": 0.001, "restart_s": 0.002}  # noticed and replaced within the job


def easgd_job() -> JobSpec:
    return JobSpec(MODEL, TRAIN, ClusterSpec(2, 2, 2), strategy_config("easgd"), SYNTHETIC)


def test_a_lost_shard_alone_comes_back_from_the_cut_and_its_updates_since_are_lost():
    spec = easgd_job()
    faults = Faults(server_mtbf_s=0.02, **QUICK)
    summary = faulty(spec, faults, embedding_server="partial", max_restarts=30).run()
    recovery = summary["recovery"]
    partial = [x for x in recovery["losses"] if x["action"] == "partial"]
    assert len(partial) >= 2, recovery
    assert all(x["node"].startswith("embedding-server-") for x in partial)
    assert all(x["replayed"] == 0 and x["lost"] == x["position"] - x["back_to"] for x in partial)
    assert recovery["examples_lost"] == sum(x["lost"] for x in partial) > 0
    assert summary["examples_trained"] == SYNTHETIC.num_train  # the others went on: no replay
    calm = SimJob(spec, plan_for(spec), CostModel()).run()
    assert summary["train_seconds"] > calm["train_seconds"]  # callers waited for the shard
    again = faulty(spec, faults, embedding_server="partial", max_restarts=30).run()
    assert again["recovery"] == recovery and again["train_seconds"] == summary["train_seconds"]


def test_a_lost_trainer_alone_restarts_and_what_it_held_goes_out_again():
    spec = easgd_job()
    faults = Faults(trainer_mtbf_s=0.02, **QUICK)
    job = faulty(spec, faults, trainer="restart", max_restarts=30)
    summary = job.run()
    recovery = summary["recovery"]
    losses = recovery["losses"]
    assert len(losses) >= 2 and all(x["action"] == "restart" for x in losses), losses
    assert all(x["back_to"] == x["position"] and x["lost"] == 0 for x in losses)
    assert recovery["examples_replayed"] == sum(x["replayed_examples"] for x in losses) > 0
    # every example handed out was trained once by some incarnation of its trainer
    assert sum(summary["examples_per_trainer"]) == summary["examples_trained"]
    assert summary["examples_trained"] == SYNTHETIC.num_train
    assert job.final_state is not None and torch.isfinite(job.final_state.dense).all()


LOSING_READERS = Faults(reader_mtbf_s=0.02, detect_s=1e-5, restart_s=0.002)  # replies in flight


def test_a_lost_reader_alone_is_replaced_and_the_job_ends_with_the_uninterrupted_model():
    # reader = restart (the default): the replacement replays the stream to where it
    # stood; every batch handed out once, so sync's model is exactly the calm run's
    spec = sync_job()
    calm = SimJob(spec, plan_for(spec), CostModel())
    calm.run()
    job = faulty(spec, LOSING_READERS, max_restarts=10)
    summary = job.run()
    recovery = summary["recovery"]
    losses = recovery["losses"]
    assert len(losses) >= 2 and all(x["action"] == "restart" for x in losses), losses
    assert all(x["node"] == "reader" and x["back_to"] == x["position"] for x in losses)
    assert recovery["examples_replayed"] == recovery["examples_lost"] == 0
    assert summary["examples_trained"] == SYNTHETIC.num_train
    assert torch.allclose(job.final_state.dense, calm.final_state.dense, atol=1e-6)
    for mine, theirs in zip(job.final_state.shards, calm.final_state.shards, strict=True):
        assert torch.allclose(mine["weight"], theirs["weight"], atol=1e-6)
    again = faulty(spec, LOSING_READERS, max_restarts=10).run()
    assert again["recovery"] == recovery and again["train_seconds"] == summary["train_seconds"]


def test_readers_and_trainers_lost_alone_leave_every_example_trained_once():
    # two readers, trainers restarted alone too: what a lost trainer trained, held or gave
    # back is known to the replacement of its reader (the driver kept what it trained)
    train = dataclasses.replace(TRAIN, seed=0)
    cluster = ClusterSpec(4, 2, 2, num_readers=2)
    spec = JobSpec(MODEL, train, cluster, strategy_config("easgd"), SYNTHETIC)
    faults = Faults(reader_mtbf_s=0.02, trainer_mtbf_s=0.04, detect_s=1e-5, restart_s=0.002)
    cost = CostModel(faults=faults, speed_spread=0.5)
    summary = FaultySimJob(
        spec,
        cost,
        CheckpointEvery(examples=1_280),
        RecoveryPolicy(max_restarts=40, trainer="restart"),
    ).run()
    losses = summary["recovery"]["losses"]
    alone = {(x["node"].split("-")[0], x["action"]) for x in losses}
    assert {("reader", "restart"), ("trainer", "restart")} <= alone, losses
    readers = [x for x in losses if x["node"].startswith("reader") and x["action"] == "restart"]
    assert all(x["replayed"] == x["lost"] == 0 for x in readers)
    # each once: the job's end checks, per trainer, that what it was handed (by every
    # incarnation of its reader) is what it trained (coordinator/outcome.py)
    assert summary["examples_trained"] == SYNTHETIC.num_train


def timeline(**fields) -> Timeline:
    base = {
        "work_s": 100_000.0,
        "interval_s": 1_000.0,
        "cut_s": 0.0,
        "detect_s": 10.0,
        "restart_s": 50.0,
        "counts": {"trainer": 10, "embedding-server": 5},
        "mtbf_s": {"trainer": 150_000.0, "embedding-server": 150_000.0},
        "actions": {"trainer": "rollback", "embedding-server": "rollback"},
    }
    return Timeline(**(base | fields))


def test_a_timeline_without_losses_is_the_work_and_its_cuts():
    calm = run_timeline(timeline(cut_s=2.0, mtbf_s={}), seed=0)
    assert calm.losses == 0 and calm.cuts == 99
    assert calm.seconds == pytest.approx(100_000 + 99 * 2.0)


def test_a_rollback_timeline_spends_the_work_the_replays_and_the_restarts():
    result = run_timeline(timeline(), seed=3)
    assert result.losses > 3 and result.replayed_s > 0 and result.lost_s == 0
    expected = 100_000 + result.replayed_s + result.losses * 60.0
    assert result.seconds == pytest.approx(expected)
    assert run_timeline(timeline(), seed=3) == result


def test_partial_recovery_replays_nothing_and_counts_the_lost_updates():
    partial = timeline(actions={"trainer": "partial", "embedding-server": "partial"})
    result = run_timeline(partial, seed=3)
    assert result.losses > 3 and result.replayed_s == 0 and result.lost_s > 0
    rollback = run_timeline(timeline(), seed=3)
    assert result.seconds < rollback.seconds


def test_the_simulated_best_interval_is_near_young_and_daly():
    cut_s, job_mtbf = 30.0, 10_000.0
    young, daly = young_daly(cut_s, job_mtbf, 60.0)
    assert young == pytest.approx(math.sqrt(2 * 30 * 10_000))
    intervals = [200, 400, 600, 800, 1_200, 1_600, 2_400, 3_200]

    def mean_seconds(interval: float) -> float:
        tl = timeline(
            work_s=200_000.0,
            interval_s=interval,
            cut_s=cut_s,
            counts={"trainer": 1},
            mtbf_s={"trainer": job_mtbf},
        )
        return statistics.mean(run_timeline(tl, seed).seconds for seed in range(40))

    best = min(intervals, key=mean_seconds)
    assert young / 1.6 <= best <= young * 1.6, (best, young, daly)
