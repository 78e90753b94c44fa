"""Placement planner: measured table costs, LPT packing with row-range splits (checked
against the single-shard layout by pooled lookups), dense range split, and the rich view."""

from __future__ import annotations

import pytest
import torch
from rich.console import Console

from recsync.app.runs.plan_view import imbalance, plan_table
from recsync.data.batch import Batch, collate
from recsync.model.spec import ModelSpec, TableSpec, default_tables
from recsync.optim.rowwise import RowOptimizerSpec
from recsync.ps.layout import EmbeddingLayout, TableSlice
from recsync.ps.local import LocalEmbeddings, build_shards
from recsync.ps.placement import (
    JobPlan,
    plan_dense,
    plan_embeddings,
    plan_job,
    table_costs,
)


def _tables(*rows: int, dim: int = 4) -> tuple[TableSpec, ...]:
    return tuple(TableSpec(f"T{i}", r, dim) for i, r in enumerate(rows))


# ---------------------------------------------------------------------------------------------
# table_costs


def test_costs_from_multi_id_bags():
    tables = (TableSpec("a", 10, 4), TableSpec("b", 10, 8), TableSpec("c", 10, 2))
    b1 = collate(
        [[0.0], [0.0]],
        [[[1, 2], [], [3]], [[0], [4, 5, 6], [1]]],
        [0.0, 1.0],
    )
    b2 = collate(
        [[0.0], [0.0]],
        [[[], [1], [0, 2]], [[3], [2], [5, 5, 5]]],
        [1.0, 0.0],
    )
    # ids per example over 4 examples: a 4/4, b 5/4, c 7/4; times dims 4, 8, 2
    assert table_costs(tables, [b1, b2]) == [4.0, 10.0, 3.5]


def test_costs_without_sample_assume_one_id_per_example():
    tables = (TableSpec("a", 10, 4), TableSpec("b", 10, 8))
    assert table_costs(tables, []) == [4.0, 8.0]


def test_costs_reject_feature_mismatch():
    batch = collate([[0.0]], [[[1], [2]]], [1.0])
    with pytest.raises(ValueError, match="features"):
        table_costs(_tables(10, 10, 10), [batch])


# ---------------------------------------------------------------------------------------------
# plan_embeddings


def test_lpt_hand_example():
    # LPT on [5, 4, 3, 3, 3], 2 servers: 5->s0 (5,0); 4->s1 (5,4); 3->s1 (5,7);
    # 3->s0 (8,7); 3->s1 (8,10). (The optimum is 9/9; LPT is a 4/3-approximation.)
    plan = plan_embeddings(_tables(10, 10, 10, 10, 10), [5.0, 4.0, 3.0, 3.0, 3.0], 2)
    assert plan.server_load == [8.0, 10.0]
    assert plan.layout.slices == [
        TableSlice(0, 0, 10, 0, 0),
        TableSlice(1, 0, 10, 1, 0),
        TableSlice(2, 0, 10, 1, 10),
        TableSlice(3, 0, 10, 0, 10),
        TableSlice(4, 0, 10, 1, 20),
    ]
    assert plan.server_rows == [20, 30]
    assert plan.layout.shard_rows == [20, 30]
    # weights + Adagrad state (dim floats per row): rows * (4 + 4) * 4 bytes
    assert plan.server_bytes == [640, 960]
    rowwise = plan_embeddings(
        _tables(10, 10, 10, 10, 10), [5.0, 4.0, 3.0, 3.0, 3.0], 2, state_floats_per_row=1
    )
    assert rowwise.server_bytes == [400, 600]


def test_lpt_ties_go_to_lower_index_deterministically():
    plan = plan_embeddings(_tables(5, 5, 5, 5), [3.0, 3.0, 3.0, 3.0], 2)
    assert [s.shard for s in plan.layout.slices] == [0, 1, 0, 1]
    assert plan.server_load == [6.0, 6.0]
    again = plan_embeddings(_tables(5, 5, 5, 5), [3.0, 3.0, 3.0, 3.0], 2)
    assert again.layout.slices == plan.layout.slices


def test_big_table_split_into_row_ranges():
    # total 120 rows, share 60: A (100 rows) -> [0,50) and [50,100), cost 5 each.
    # Items 5 (A0), 5 (A50), 4 (B), 3 (C): s0 A0 (5); s1 A50 (5); B tie -> s0 (9); C -> s1 (8).
    tables = _tables(100, 10, 10, dim=3)
    plan = plan_embeddings(tables, [10.0, 4.0, 3.0], 2)
    assert plan.layout.slices == [
        TableSlice(0, 0, 50, 0, 0),
        TableSlice(0, 50, 100, 1, 0),
        TableSlice(1, 0, 10, 0, 50),
        TableSlice(2, 0, 10, 1, 50),
    ]
    assert plan.server_load == [9.0, 8.0]
    assert plan.server_rows == [60, 60]


def test_split_is_near_equal_and_covers_table():
    # total 103, share ceil(103/3) = 35: A (101) -> 3 slices of 34, 34, 33.
    plan = plan_embeddings(_tables(101, 1, 1), [6.0, 1.0, 1.0], 3)
    a = [s for s in plan.layout.slices if s.table == 0]
    assert [(s.row_start, s.row_end) for s in a] == [(0, 34), (34, 68), (68, 101)]
    assert sum(plan.server_load) == pytest.approx(8.0)
    assert sum(plan.server_rows) == 103


def _random_batch(tables: tuple[TableSpec, ...], batch_size: int, seed: int) -> Batch:
    g = torch.Generator().manual_seed(seed)
    bags = []
    for _ in range(batch_size):
        example = []
        for spec in tables:
            n = int(torch.randint(0, 5, (1,), generator=g))
            example.append(torch.randint(0, spec.num_rows, (n,), generator=g).tolist())
        bags.append(example)
    return collate([[0.0]] * batch_size, bags, [0.0] * batch_size)


@pytest.mark.parametrize("num_servers", [1, 2, 3, 4, 7])
def test_split_layout_pools_like_single_shard(num_servers):
    tables = (
        TableSpec("A", 100, 3),
        TableSpec("B", 10, 3, pooling="mean"),
        TableSpec("C", 10, 3),
        TableSpec("D", 2, 3),
    )
    batch = _random_batch(tables, 16, seed=1)
    costs = table_costs(tables, [batch])
    plan = plan_embeddings(tables, costs, num_servers)
    assert any(s.num_rows < tables[s.table].num_rows for s in plan.layout.slices) == (
        num_servers > 1
    )
    single = EmbeddingLayout.single_shard(tables)
    spec = RowOptimizerSpec()
    expected, _ = LocalEmbeddings(single, build_shards(single, spec, 7)).lookup(batch)
    got, _ = LocalEmbeddings(plan.layout, build_shards(plan.layout, spec, 7)).lookup(batch)
    torch.testing.assert_close(got, expected)


def test_more_servers_than_items_leaves_empty_servers():
    plan = plan_embeddings(_tables(1, 1), [2.0, 1.0], 3)
    assert plan.server_rows == [1, 1, 0]
    assert plan.server_load == [2.0, 1.0, 0.0]


def test_embedding_errors():
    with pytest.raises(ValueError, match="num_servers"):
        plan_embeddings(_tables(10), [1.0], 0)
    with pytest.raises(ValueError, match="at least one"):
        plan_embeddings((), [], 2)
    with pytest.raises(ValueError, match="costs"):
        plan_embeddings(_tables(10, 10), [1.0], 2)
    with pytest.raises(ValueError, match="cost"):
        plan_embeddings(_tables(10), [-1.0], 2)


# ---------------------------------------------------------------------------------------------
# plan_dense and plan_job


def test_dense_hand_example():
    plan = plan_dense(10, 3)
    assert plan.ranges == [(0, 4), (4, 7), (7, 10)]
    assert plan.bytes_per_server == [16, 12, 12]


@pytest.mark.parametrize("num_params", [0, 1, 5, 17, 100, 1001])
@pytest.mark.parametrize("num_servers", [1, 2, 3, 8])
def test_dense_ranges_cover_contiguously(num_params, num_servers):
    plan = plan_dense(num_params, num_servers)
    assert len(plan.ranges) == num_servers
    assert plan.ranges[0][0] == 0 and plan.ranges[-1][1] == num_params
    for (_, stop), (start, _) in zip(plan.ranges, plan.ranges[1:], strict=False):
        assert stop == start
    sizes = [stop - start for start, stop in plan.ranges]
    assert max(sizes) - min(sizes) <= 1
    assert plan.bytes_per_server == [4 * n for n in sizes]


def test_dense_errors():
    with pytest.raises(ValueError, match="num_servers"):
        plan_dense(10, 0)
    with pytest.raises(ValueError, match="num_params"):
        plan_dense(-1, 2)


def test_plan_job():
    model = ModelSpec(tables=default_tables(4, 100, 8))
    plan = plan_job(model, 2, 2, [], num_dense_params=1001)
    assert plan.embeddings.server_load == [16.0, 16.0]
    assert plan.dense is not None and plan.dense.ranges == [(0, 501), (501, 1001)]
    assert plan_job(model, 3, 0, None).dense is None
    with pytest.raises(ValueError, match="num_dense_params"):
        plan_job(model, 2, 1, [])
    with pytest.raises(ValueError, match="num_servers"):
        plan_job(model, 0, 1, [], num_dense_params=10)


# ---------------------------------------------------------------------------------------------
# plan_view


def test_plan_table_renders():
    tables = _tables(100, 10, 10, dim=3)
    embeddings = plan_embeddings(tables, [10.0, 4.0, 3.0], 2)
    plan = JobPlan(embeddings, plan_dense(1001, 2))
    console = Console(record=True, width=200)
    console.print(plan_table(plan, tables))
    text = console.export_text()
    for needle in ("emb-0", "emb-1", "sync-0", "sync-1", "T0[0:50)", "T0[50:100)", "T1", "T2"):
        assert needle in text
    assert "dense[0:501)" in text and "dense[501:1001)" in text
    assert "52.9" in text  # emb-0 carries 9 of 17
    assert imbalance(plan) == 9.0 / 8.5
    assert imbalance(embeddings) == 9.0 / 8.5


def _one_hot_batch(tables: tuple[TableSpec, ...], batch_size: int, seed: int) -> Batch:
    g = torch.Generator().manual_seed(seed)
    bags = [
        [torch.randint(0, spec.num_rows, (1,), generator=g).tolist() for spec in tables]
        for _ in range(batch_size)
    ]
    return collate([[0.0]] * batch_size, bags, [0.0] * batch_size)


def _whole_tables_on(tables: tuple[TableSpec, ...], shards: list[int]) -> EmbeddingLayout:
    bases = [0] * (max(shards) + 1)
    slices = []
    for t, (spec, shard) in enumerate(zip(tables, shards, strict=True)):
        slices.append(TableSlice(t, 0, spec.num_rows, shard, bases[shard]))
        bases[shard] += spec.num_rows
    return EmbeddingLayout(tables, slices, max(shards) + 1)


@pytest.mark.parametrize("one_hot", [True, False])
def test_whole_tables_on_several_shards_pool_and_update_like_one_shard(one_hot):
    tables = _tables(30, 20, 10, 5, 8)
    layout = _whole_tables_on(tables, [2, 0, 1, 0, 2])
    single = EmbeddingLayout.single_shard(tables)
    make = _one_hot_batch if one_hot else _random_batch
    batch = make(tables, 16, seed=3)
    spec = RowOptimizerSpec()
    split = LocalEmbeddings(layout, build_shards(layout, spec, 7))
    whole = LocalEmbeddings(single, build_shards(single, spec, 7))
    pooled, requests = split.lookup(batch)
    expected, expected_requests = whole.lookup(batch)
    assert [r.one_per_bag for r in requests] == [one_hot] * 3
    assert torch.equal(pooled, expected)
    grad_pooled = torch.randn(expected.shape, generator=torch.Generator().manual_seed(4))
    split.apply(grad_pooled, requests)
    whole.apply(grad_pooled, expected_requests)
    assert torch.equal(split.lookup(batch)[0], whole.lookup(batch)[0])
