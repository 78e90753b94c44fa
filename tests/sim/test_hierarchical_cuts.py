"""Hierarchical training cut while it trains, resumed and rolled back in the simulator
(families/hierarchical/resume.py): a cut holds exactly the batches handed out, every one
of them through forward and backward on its group PSs; a job resumed from it goes on from
every group PS's parameters, optimizer and sync state; a lost group PS rolls the job back."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from test_sim import MODEL, TRAIN, one_thread  # noqa: F401
from test_sim import SYNTHETIC as SIM_SYNTHETIC

from recsync.coordinator.checkpoint import JobState
from recsync.coordinator.cuts import CheckpointEvery
from recsync.coordinator.recovery import RecoveryPolicy
from recsync.coordinator.spec import ClusterSpec, JobSpec, plan_for
from recsync.coordinator.topology import build_topology
from recsync.families import strategy_config
from recsync.families.hierarchical.nodes import GroupServerSpec
from recsync.families.hierarchical.topology import group_plan_for
from recsync.runtime.sim.cost import CostModel, Faults
from recsync.runtime.sim.faulty import FaultySimJob
from recsync.runtime.sim.job import SimJob

SYNTHETIC = dataclasses.replace(SIM_SYNTHETIC, num_train=3_200, num_test=1_000)
BATCH = TRAIN.batch_size
# one worker in one group, MA across the one group (an average of itself): the math does
# not depend on timing, so cuts and resumes must not change the model at all
EXACT = (ClusterSpec(1, 1, 2, 2), {"groups": 1, "cross_group": "ma"})


def job(cluster: ClusterSpec, resume: JobState | None = None, **fields) -> JobSpec:
    strategy = strategy_config("hierarchical", **fields)
    return JobSpec(MODEL, TRAIN, cluster, strategy, SYNTHETIC, resume=resume)


def run(spec: JobSpec, every: int = 0) -> tuple[SimJob, dict, list[JobState]]:
    states: list[JobState] = []
    sim = SimJob(
        spec,
        plan_for(spec),
        CostModel(),
        checkpoint_every=CheckpointEvery(examples=every),
        on_checkpoint=states.append,
    )
    return sim, sim.run(), states


def same_model(mine: JobState, theirs: JobState) -> bool:
    shards = zip(mine.shards, theirs.shards, strict=True)
    return torch.equal(mine.dense, theirs.dense) and all(
        torch.equal(a["weight"], b["weight"]) for a, b in shards
    )


def test_a_job_cut_while_training_or_resumed_from_a_cut_ends_with_the_uncut_model():
    cluster, fields = EXACT
    calm, _, _ = run(job(cluster, **fields))
    cut, summary, states = run(job(cluster, **fields), every=640)
    assert summary["examples_trained"] == SYNTHETIC.num_train and len(states) >= 4
    assert same_model(cut.final_state, calm.final_state)
    for state in (states[0], states[-2]):
        resumed, rest, _ = run(job(cluster, state, **fields))
        assert rest["examples_trained"] == SYNTHETIC.num_train - state.data_position
        assert same_model(resumed.final_state, calm.final_state)
        assert resumed.final_state.global_step == calm.final_state.global_step
        ends = (resumed.final_state.family_state, calm.final_state.family_state)
        for mine, theirs in zip(*(e["servers"] for e in ends), strict=True):
            assert mine["optimizer"]["steps"] == theirs["optimizer"]["steps"]
            assert torch.equal(mine["optimizer"]["sum"], theirs["optimizer"]["sum"])


@pytest.mark.parametrize("cross_group", ["easgd", "bmuf"])
def test_cuts_of_a_two_group_job_hold_every_handed_out_batch_trained_on_its_group_pss(
    cross_group,
):
    fields = {"groups": 2, "cross_group": cross_group}
    spec = job(ClusterSpec(2, 2, 2, 2), **fields)
    _, summary, states = run(spec, every=960)
    assert summary["examples_trained"] == SYNTHETIC.num_train and len(states) >= 3
    for state in states:
        batches = state.data_position // BATCH
        assert state.global_step == batches and state.in_flight_examples == 0
        held = state.family_state
        assert held is not None and held["groups"] == 2
        steps = [int(s["optimizer"]["steps"]) for s in held["servers"]]
        assert steps[0] + steps[2] == steps[1] + steps[3] == batches  # group PS j of each group
        assert len(held["centers"]) == (2 if cross_group == "easgd" else 0)
        assert all(bool(s["sync"]) == (cross_group == "bmuf") for s in held["servers"])
    state = states[1]
    resumed = job(ClusterSpec(2, 2, 2, 2), state, **fields)
    topology = build_topology(resumed, plan_for(resumed))
    servers = [n for n in topology.nodes if isinstance(n, GroupServerSpec)]
    for node, held in zip(servers, state.family_state["servers"], strict=True):
        assert node.start is not None and torch.equal(node.start.values, held["values"])
        assert node.start.optimizer["steps"] == held["optimizer"]["steps"]
    _, rest, _ = run(resumed)
    assert rest["examples_trained"] == SYNTHETIC.num_train - state.data_position


def test_a_job_of_other_groups_or_another_strategy_resumes_from_the_dense_model():
    spec = job(ClusterSpec(2, 1, 2, 2), groups=2, cross_group="ma")
    _, _, states = run(spec, every=1_280)
    state = states[0]
    other = job(ClusterSpec(2, 1, 2, 2), state, groups=1, cross_group="ma")
    plan = group_plan_for(other)
    parts = plan.split(MODEL, TRAIN.seed, state.dense)
    assert torch.equal(plan.unsplit(MODEL, TRAIN.seed, parts), state.dense)
    topology = build_topology(other, plan_for(other))
    starts = [n.start for n in topology.nodes if isinstance(n, GroupServerSpec)]
    for start, part in zip(starts, parts, strict=True):
        assert start is not None and torch.equal(start.values, part)
    _, rest, _ = run(other)
    assert rest["examples_trained"] == SYNTHETIC.num_train - state.data_position
    gradient = JobSpec(MODEL, TRAIN, ClusterSpec(2, 1, 2), strategy_config("async"), SYNTHETIC)
    _, _, async_states = run(gradient, every=1_280)
    _, rest, _ = run(job(ClusterSpec(2, 1, 2, 2), async_states[0], groups=2))
    assert rest["examples_trained"] == SYNTHETIC.num_train - async_states[0].data_position


def test_a_lost_group_ps_rolls_the_job_back_to_its_last_cut():
    cluster, fields = EXACT
    spec = job(cluster, **fields)
    calm, _, _ = run(spec)
    faults = Faults(server_mtbf_s=0.05, detect_s=0.5, restart_s=2.0)
    lossy = FaultySimJob(
        spec,
        CostModel(faults=faults),
        CheckpointEvery(examples=640),
        RecoveryPolicy(max_restarts=20),
    )
    summary = lossy.run()
    losses = summary["recovery"]["losses"]
    assert any(x["node"].startswith("group-server") for x in losses), losses
    assert all(x["action"] == "rollback" for x in losses)
    assert summary["examples_trained"] == SYNTHETIC.num_train
    assert summary["recovery"]["examples_replayed"] > 0
    assert lossy.final_state is not None and same_model(lossy.final_state, calm.final_state)
