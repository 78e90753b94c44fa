"""Tables of different dims in simulated jobs: the same model whatever the placement, every
strategy family's payloads at each table's own width, deterministic runs."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from recsync.coordinator.spec import ClusterSpec, JobSpec, plan_for
from recsync.data.synthetic import SyntheticSpec, SyntheticTask
from recsync.families import strategy_config
from recsync.model.hash_spec import Admission, Eviction, HashTables
from recsync.model.spec import ModelSpec, TableSpec
from recsync.optim.train_spec import TrainSpec
from recsync.protocol.address import Role
from recsync.ps.dim_groups import DimGroupedShard, rows_in_state
from recsync.runtime.sim.cost import CostModel
from recsync.runtime.sim.job import SimJob
from recsync.trainer.reference import ReferenceTrainer

DIMS = (2, 8, 4, 16, 8, 2)
SYNTHETIC = SyntheticSpec(num_train=3_000, num_test=1_000, num_dense=4, table_rows=(50,) * 6)
MODEL = ModelSpec(
    num_dense=4,
    tables=tuple(TableSpec(f"C{i}", 50, d) for i, d in enumerate(DIMS)),
    bottom_mlp=(16,),
    top_mlp=(16,),
    interaction_dim=8,
)
TRAIN = TrainSpec(batch_size=64)


@pytest.fixture(autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def job(strategy: str, cluster: ClusterSpec) -> SimJob:
    spec = JobSpec(MODEL, TRAIN, cluster, strategy_config(strategy), SYNTHETIC)
    return SimJob(spec, plan_for(spec), CostModel())


def table_rows(sim: SimJob, table: int) -> torch.Tensor:
    """A table's rows gathered from the simulated shards' stores, in table order."""
    layout = sim.plan.embeddings.layout
    servers = sim.nodes_of(Role.EMBEDDING_SERVER)
    return torch.cat(
        [
            rows_in_state(
                servers[s.shard].shard.state_dict(), s.shard_row, s.shard_row + s.num_rows
            )
            for s in layout.slices
            if s.table == table
        ]
    )


def test_one_worker_on_three_servers_trains_the_reference_model_bit_for_bit():
    sim = job("independent", ClusterSpec(1, 1, 3))
    summary = sim.run()
    servers = sim.nodes_of(Role.EMBEDDING_SERVER)
    assert all(isinstance(server.shard, DimGroupedShard) for server in servers)
    reference = ReferenceTrainer(MODEL, TRAIN)
    for batch in SyntheticTask(SYNTHETIC).train_batches(TRAIN.batch_size):
        reference.train_step(batch)
    flat = sim.nodes_of(Role.TRAINER)[0].replica.flat
    assert torch.equal(flat, reference.replica.flat)
    ref_state = reference.embeddings.shards[0].state_dict()
    ref_layout = reference.embeddings.layout
    for t, spec in enumerate(MODEL.tables):
        (s,) = [s for s in ref_layout.slices if s.table == t]
        ref_rows = rows_in_state(ref_state, s.shard_row, s.shard_row + s.num_rows)
        rows = table_rows(sim, t)
        assert rows.shape == (spec.num_rows, spec.dim)
        assert torch.equal(rows, ref_rows), f"table {t}"
    assert summary["examples_trained"] == SYNTHETIC.num_train


@pytest.mark.parametrize("strategy", ["easgd", "gba", "allreduce", "hierarchical"])
def test_a_mixed_dim_job_is_deterministic_and_trains(strategy):
    cluster = ClusterSpec(2, 1 if strategy == "allreduce" else 2, 2, 1)
    first, second = job(strategy, cluster), job(strategy, cluster)
    a, b = first.run(), second.run()
    assert a["examples_trained"] == b["examples_trained"] == SYNTHETIC.num_train
    assert a["test_auc"] == b["test_auc"] and a["train_seconds"] == b["train_seconds"]
    for t in range(len(DIMS)):
        assert torch.equal(table_rows(first, t), table_rows(second, t))
    assert a["test_auc"] > 0.55


def test_the_pooled_bags_travel_at_their_tables_own_widths():
    """The bytes the embedding servers send (their lookups' replies): each one-hot bag is
    its table's dim of floats, not the widest table's."""
    summary = job("easgd", ClusterSpec(1, 1, 2)).run()
    assert summary["bytes_sent"]["embedding_servers"] == 4 * sum(DIMS) * SYNTHETIC.num_train


HASH_MODEL = dataclasses.replace(
    MODEL,
    tables=tuple(
        TableSpec(f"C{i}", 50, d, admission=Admission(min_count=2) if i == 1 else None)
        for i, d in enumerate(DIMS)
    ),
    hash_tables=HashTables(eviction=Eviction(ttl_steps=3)),
)


@pytest.mark.parametrize("strategy", ["easgd", "gba"])
def test_hash_tables_of_several_dims_and_admissions_train_deterministically(strategy):
    synthetic = dataclasses.replace(SYNTHETIC, keyed=True)
    spec = JobSpec(HASH_MODEL, TRAIN, ClusterSpec(2, 2, 2), strategy_config(strategy), synthetic)
    a = SimJob(spec, plan_for(spec), CostModel()).run()
    b = SimJob(spec, plan_for(spec), CostModel()).run()
    assert a["test_auc"] == b["test_auc"] and a["embedding_rows"] == b["embedding_rows"]
    assert a["test_auc"] > 0.55
    per_table = a["embedding_rows"]["per_table"]
    assert per_table["C1"]["refused_lookups"] > 0  # its own admission: 2 sightings
    assert all(per_table[f"C{i}"]["refused_lookups"] == 0 for i in (0, 2, 3, 4, 5))
    assert a["embedding_rows"]["evicted"] > 0  # the model's eviction, in every store
