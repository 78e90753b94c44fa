"""A job with hash tables that loses nodes and rolls back to its last cut (runtime/sim/
faulty.py): it completes, accounts for every example, and (sync's math does not depend on
timing) ends with the model, rows, admission sketch and counters of a run that lost nothing."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from recsync.coordinator.cuts import CheckpointEvery
from recsync.coordinator.recovery import RecoveryPolicy
from recsync.coordinator.spec import ClusterSpec, JobSpec, plan_for
from recsync.data.synthetic import SyntheticSpec
from recsync.families import strategy_config
from recsync.model.hash_spec import Admission, Eviction, HashTables
from recsync.model.spec import ModelSpec, TableSpec
from recsync.optim.train_spec import TrainSpec
from recsync.runtime.sim.cost import CostModel, Faults
from recsync.runtime.sim.faulty import FaultySimJob
from recsync.runtime.sim.job import SimJob

EVERY = CheckpointEvery(examples=640)
NUM_TRAIN = 2_560
# the job trains ~0.02 virtual seconds: a loss or a few before it ends
SERVER_LOSSES = Faults(server_mtbf_s=0.03, detect_s=0.5, restart_s=2.0)
TRAINER_LOSSES = Faults(trainer_mtbf_s=0.03, detect_s=0.5, restart_s=2.0)


def hash_job() -> JobSpec:
    """Sync on hash tables that admit an id at its 2nd sighting and evict at every cut."""
    synthetic = SyntheticSpec(
        num_train=NUM_TRAIN, num_test=500, num_dense=2, table_rows=(60,) * 3, keyed=True
    )
    model = ModelSpec(
        num_dense=2,
        tables=tuple(TableSpec(f"C{i}", 60, 4) for i in range(3)),
        bottom_mlp=(4,),
        top_mlp=(8,),
        hash_tables=HashTables(admission=Admission(min_count=2), eviction=Eviction(ttl_steps=3)),
    )
    cluster = ClusterSpec(2, 2, 2, num_dense_servers=2)
    return JobSpec(model, TrainSpec(batch_size=64), cluster, strategy_config("sync"), synthetic)


@pytest.fixture(scope="module")
def calm() -> tuple[dict[str, Any], SimJob]:
    spec = hash_job()
    sim = SimJob(spec, plan_for(spec), CostModel(), checkpoint_every=EVERY)
    return sim.run(), sim


@pytest.mark.parametrize(
    ("faults", "lost"),
    [(SERVER_LOSSES, "embedding-server-"), (TRAINER_LOSSES, "trainer-")],
    ids=["embedding-server", "trainer"],
)
def test_a_hash_table_job_rolled_back_after_losses_ends_as_the_calm_run(calm, faults, lost):
    calm_summary, calm_sim = calm
    job = FaultySimJob(hash_job(), CostModel(faults=faults), EVERY, RecoveryPolicy(max_restarts=20))
    summary = job.run()
    losses = summary["recovery"]["losses"]
    assert any(x["node"].startswith(lost) for x in losses), losses
    assert all(x["action"] == "rollback" and x["lost"] == 0 for x in losses)
    assert summary["examples_trained"] == NUM_TRAIN
    replayed = sum(x["position"] - x["back_to"] for x in losses)
    assert summary["recovery"]["examples_replayed"] == replayed > 0
    assert summary["recovery"]["examples_lost"] == 0
    assert summary["embedding_rows"] == calm_summary["embedding_rows"]
    assert summary["embedding_rows"]["refused_lookups"] > 0  # admission was at work
    assert summary["embedding_rows"]["evicted"] > 0  # and eviction at the cuts
    assert job.final_state is not None and calm_sim.final_state is not None
    assert torch.equal(job.final_state.dense, calm_sim.final_state.dense)
    for mine, theirs in zip(job.final_state.shards, calm_sim.final_state.shards, strict=True):
        assert mine.keys() == theirs.keys()
        for name in ("keys", "weight", "versions", "last_seen", "sketch"):
            assert torch.equal(mine[name], theirs[name]), name
        for name, value in theirs["counters"].items():
            assert torch.equal(mine["counters"][name], value), name
        assert mine["clock"] == theirs["clock"]
