"""Hash and fixed tables in one simulated job: both kinds train (the fixed tables' rows in
stores of their own, below their rows, never evicted), deterministically, and the same
model whatever the embedding servers."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from recsync.coordinator.spec import ClusterSpec, JobSpec, plan_for
from recsync.data.keys import ID_MASK, table_of
from recsync.data.synthetic import SyntheticSpec
from recsync.families import strategy_config
from recsync.model.hash_spec import Eviction, HashTables
from recsync.model.spec import ModelSpec, TableSpec
from recsync.optim.train_spec import TrainSpec
from recsync.protocol.address import Role
from recsync.ps.dim_groups import HashGroupedShard
from recsync.ps.hash_layout import stores_of
from recsync.runtime.sim.cost import CostModel
from recsync.runtime.sim.job import SimJob

KINDS = ("hash", "fixed", "hash", "fixed")
DIMS = (4, 8, 8, 4)
SYNTHETIC = SyntheticSpec(
    num_train=2_000, num_test=500, num_dense=4, table_rows=(40,) * 4, keyed=True
)
MODEL = ModelSpec(
    num_dense=4,
    tables=tuple(
        TableSpec(f"C{i}", 40, d, kind="fixed" if k == "fixed" else None)
        for i, (k, d) in enumerate(zip(KINDS, DIMS, strict=True))
    ),
    bottom_mlp=(16,),
    top_mlp=(16,),
    interaction_dim=8,
    hash_tables=HashTables(eviction=Eviction(ttl_steps=2)),
)
TRAIN = TrainSpec(batch_size=64)


@pytest.fixture(autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def run(strategy: str, servers: int) -> tuple[SimJob, dict]:
    cluster = ClusterSpec(2, 1 if strategy == "allreduce" else 2, servers, 1)
    spec = JobSpec(MODEL, TRAIN, cluster, strategy_config(strategy), SYNTHETIC)
    sim = SimJob(spec, plan_for(spec), CostModel())
    return sim, sim.run()


def rows_by_table(sim: SimJob) -> dict[int, tuple[torch.Tensor, torch.Tensor]]:
    """Each table's (keys, rows) gathered from every server's stores, by key."""
    found: dict[int, list[tuple[torch.Tensor, torch.Tensor]]] = {}
    for server in sim.nodes_of(Role.EMBEDDING_SERVER):
        assert isinstance(server.shard, HashGroupedShard)
        for store in stores_of(server.shard.state_dict()):
            keys, weight = store["keys"], store["weight"][: store["keys"].numel()]
            for f in table_of(keys).unique().tolist():
                mine = table_of(keys) == f
                found.setdefault(f, []).append((keys[mine], weight[mine]))
    out = {}
    for f, parts in found.items():
        keys = torch.cat([k for k, _ in parts])
        rows = torch.cat([w for _, w in parts])
        order = keys.argsort()
        out[f] = (keys[order], rows[order])
    return out


@pytest.mark.parametrize("strategy", ["easgd", "gba"])
def test_a_job_of_hash_and_fixed_tables_trains_both_kinds_deterministically(strategy):
    first, a = run(strategy, 2)
    second, b = run(strategy, 2)
    assert a["examples_trained"] == SYNTHETIC.num_train
    assert a["test_auc"] == b["test_auc"] and a["embedding_rows"] == b["embedding_rows"]
    assert a["test_auc"] > 0.55
    tables = rows_by_table(first)
    assert sorted(tables) == [0, 1, 2, 3]
    for f, (keys, rows) in tables.items():
        assert rows.shape[1] >= DIMS[f] and bool((rows[:, : DIMS[f]] != 0).any()), f
        assert int((keys & ID_MASK).max()) < 40
    per_table = a["embedding_rows"]["per_table"]
    if strategy == "easgd":  # the hash tables' ttl_steps evicts rows
        assert per_table["C0"]["evicted"] + per_table["C2"]["evicted"] > 0
    assert per_table["C1"]["evicted"] == per_table["C3"]["evicted"] == 0  # fixed: never
    assert per_table["C1"]["live"] == per_table["C3"]["live"] == 40  # every row, once
    for f, (keys, rows) in rows_by_table(second).items():
        assert torch.equal(keys, tables[f][0]) and torch.equal(rows, tables[f][1])


def test_a_fixed_tables_id_past_its_rows_is_an_error_naming_it():
    too_many = dataclasses.replace(SYNTHETIC, table_rows=(40, 60, 40, 40))
    spec = JobSpec(MODEL, TRAIN, ClusterSpec(1, 1, 1, 1), strategy_config("easgd"), too_many)
    with pytest.raises(Exception, match="table C1: id \\d+ is past its 40 rows"):
        SimJob(spec, plan_for(spec), CostModel()).run()
