"""Per-table embedding dims: the spec, the dense arch's projections, [[model.tables]]'s
validation, and fixed tables of several dims on shards (one store per dim)."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from recsync.app.config.load import load_config
from recsync.data.batch import collate
from recsync.errors import ConfigError
from recsync.model.dlrm import DenseArch, build_dense, dense_num_params
from recsync.model.exported import ExportedDLRM
from recsync.model.hash_spec import Admission, Eviction, HashTables
from recsync.model.spec import ModelSpec, TableSpec
from recsync.optim.rowwise import RowOptimizerSpec
from recsync.ps.dim_groups import DimGroupedShard, HashGroupedShard, compact, pad, rows_in_state
from recsync.ps.hash_delta import apply_shard_delta, is_hash_state, shard_delta
from recsync.ps.hash_layout import HashLayout, hash_groups
from recsync.ps.layout import EmbeddingLayout, TableSlice
from recsync.ps.local import LocalEmbeddings, build_shards
from recsync.ps.placement import plan_embeddings
from recsync.ps.serving_tables import KeyedRows

TABLES = (
    TableSpec("a", 20, 4),
    TableSpec("b", 30, 8, "mean"),
    TableSpec("c", 25, 4),
    TableSpec("d", 10, 16),
)
SPEC = ModelSpec(num_dense=3, tables=TABLES, bottom_mlp=(8,), top_mlp=(8,), interaction_dim=8)
OPTIMIZER = RowOptimizerSpec("adagrad", lr=0.1)


def batch():
    """3 examples, 4 features, bags of 0 to 3 ids."""
    bags = [[[1, 2], [7], [3, 4], [5]], [[2], [], [9], []], [[11], [7, 8], [2], [1, 2, 3]]]
    return collate([[0.1, 0.2, 0.3]] * 3, bags, [0.0, 1.0, 1.0])


# ---------------------------------------------------------------- spec and projections


def test_one_dim_specs_are_unchanged_and_an_interaction_dim_equal_to_it_is_none():
    assert ModelSpec(interaction_dim=16) == ModelSpec()
    assert ModelSpec().projected == () and ModelSpec().pooled_dim == 16
    assert SPEC.embedding_dim == 8 and SPEC.pooled_dim == 16 and SPEC.projected == (0, 2, 3)


def test_tables_of_several_dims_need_an_interaction_dim():
    with pytest.raises(ValueError, match="need an interaction_dim"):
        ModelSpec(tables=TABLES)


def test_only_tables_off_the_interaction_dim_get_a_projection_of_their_own():
    arch = DenseArch(SPEC)
    assert arch.projections is not None
    shapes = [tuple(w.shape) for w in arch.projections.weights]
    assert shapes == [(2, 4, 8), (1, 16, 8)]  # a and c: 4 -> 8; d: 16 -> 8; b at 8 as is
    one_dim = ModelSpec(num_dense=3, tables=TABLES[1:2], bottom_mlp=(8,), top_mlp=(8,))
    extra = 2 * 4 * 8 + 16 * 8
    flops_extra = 2 * 3 * extra
    assert dense_num_params(SPEC) == sum(p.numel() for p in arch.parameters())
    assert DenseArch(one_dim).projections is None
    assert SPEC.dense_flops_per_example() > flops_extra


def test_the_projection_is_each_tables_own_linear_map_of_its_first_dim_entries():
    arch = build_dense(SPEC, seed=3)
    pooled = torch.randn(5, 4, 16)
    vectors = arch.embed(pooled)
    assert vectors.shape == (5, 4, 8)
    w_ac, w_d = arch.projections.weights
    torch.testing.assert_close(vectors[:, 0], pooled[:, 0, :4] @ w_ac[0])
    torch.testing.assert_close(vectors[:, 2], pooled[:, 2, :4] @ w_ac[1])
    torch.testing.assert_close(vectors[:, 3], pooled[:, 3] @ w_d[0])
    assert torch.equal(vectors[:, 1], pooled[:, 1, :8])
    # what lies past a table's dim (the padding) changes nothing
    padded = pooled.clone()
    padded[:, 0, 4:] = 7.0
    padded[:, 1, 8:] = -3.0
    dense = torch.randn(5, 3)
    assert torch.equal(arch(dense, padded), arch(dense, pooled))


def test_gradients_reach_the_projections_and_only_each_tables_own_entries():
    arch = build_dense(SPEC, seed=1)
    pooled = torch.randn(6, 4, 16, requires_grad=True)
    arch(torch.randn(6, 3), pooled).sum().backward()
    assert all(
        w.grad is not None and bool(w.grad.abs().sum() > 0) for w in arch.projections.weights
    )
    grad = pooled.grad
    assert bool((grad[:, 0, 4:] == 0).all()) and bool((grad[:, 1, 8:] == 0).all())
    assert bool(grad[:, 3].abs().sum() > 0)


def test_with_no_dense_feature_the_projected_vectors_feed_the_top_and_the_fm_terms():
    spec = ModelSpec(num_dense=0, tables=TABLES, bottom_mlp=(8,), top_mlp=(8,), interaction_dim=8)
    arch = build_dense(spec, seed=0)
    assert spec.top_input == 4 * 8 + 6
    assert arch(torch.zeros(3, 0), torch.randn(3, 4, 16)).shape == (3,)


def test_the_exported_module_scores_as_the_shards_and_the_arch_do():
    layout = EmbeddingLayout.single_shard(TABLES)
    local = LocalEmbeddings(layout, build_shards(layout, OPTIMIZER, seed=2))
    exported = ExportedDLRM(SPEC)
    exported.dense.load_state_dict(build_dense(SPEC, 5).state_dict())
    state = local.shards[0].state_dict()
    for s in layout.slices:
        exported.set_rows(
            s.table, s.row_start, rows_in_state(state, s.shard_row, s.shard_row + s.num_rows)
        )
    b = batch()
    with torch.no_grad():
        expected = torch.sigmoid(exported.dense(b.dense, local.peek(b)))
        torch.testing.assert_close(exported(b.dense, b.ids, b.offsets), expected)


# ---------------------------------------------------------------- shards


def layouts():
    slices = [
        (0, 0, 10, 0),
        (0, 10, 20, 1),
        (1, 0, 30, 1),
        (2, 0, 25, 0),
        (3, 0, 5, 0),
        (3, 5, 10, 1),
    ]
    return [
        EmbeddingLayout.single_shard(TABLES),
        plan_embeddings(TABLES, [1.0] * 4, 3).layout,
        plan_embeddings(TABLES, [1.0] * 4, 2).layout,
        EmbeddingLayout(TABLES, [TableSlice(t, a, b, s, 0) for t, a, b, s in slices], 2),
    ]


def test_any_placement_pools_and_trains_the_same_rows():
    results = []
    for layout in layouts():
        local = LocalEmbeddings(layout, build_shards(layout, OPTIMIZER, seed=3))
        assert all(isinstance(s, DimGroupedShard) for s in local.shards)
        steps = []
        for step in range(3):
            pooled, requests = local.lookup(batch())
            steps.append(pooled)
            grad = torch.randn(pooled.shape, generator=torch.Generator().manual_seed(step))
            local.apply(grad, requests)
        results.append(steps)
    for other in results[1:]:
        for mine, theirs in zip(results[0], other, strict=True):
            torch.testing.assert_close(mine, theirs)
    pooled = results[0][-1]
    assert pooled.shape == (3, 4, 16)
    assert bool((pooled[:, 0, 4:] == 0).all()) and bool((pooled[:, 1, 8:] == 0).all())


def test_a_shard_keeps_one_store_per_dim_and_rows_at_their_tables_width():
    layout = plan_embeddings(TABLES, [1.0] * 4, 2).layout
    shards = build_shards(layout, OPTIMIZER, seed=0)
    rows = {d: 0 for d in (4, 8, 16)}
    for shard in shards:
        assert isinstance(shard, DimGroupedShard)
        for store, dim in zip(shard.stores, shard.dims, strict=True):
            assert store.weight.shape[1] == dim
            rows[dim] += store.num_rows
    assert rows == {4: 45, 8: 30, 16: 10}


def test_requests_and_pushes_are_compact():
    layout = plan_embeddings(TABLES, [1.0] * 4, 2).layout
    shards = build_shards(layout, OPTIMIZER, seed=0)
    b = batch()
    dims = torch.tensor([t.dim for t in TABLES])
    for r in layout.route(b):
        assert bool(((r.offsets[1:] - r.offsets[:-1]) > 0).all())  # no empty bag is sent
        partial = shards[r.shard].lookup(r.rows, r.offsets, r.weights)
        assert partial.dim() == 1
        assert partial.numel() == int(dims[r.bag_index // b.batch_size].sum())
        widths = shards[r.shard].widths_of(r.rows.unique())
        grads = torch.randn(widths.numel(), 16)
        wire = layout.wire_grads(r.shard, r.rows.unique(), grads)
        assert wire.numel() == int(widths.sum())
        assert torch.equal(
            shards[r.shard].padded(r.rows.unique(), wire), pad(compact(grads, widths), widths, 16)
        )


def test_a_grouped_shards_state_loads_back_and_names_a_wrong_one():
    layout = EmbeddingLayout.single_shard(TABLES)
    (shard,) = build_shards(layout, OPTIMIZER, seed=0)
    (other,) = build_shards(layout, OPTIMIZER, seed=1)
    rows = torch.tensor([0, 25, 70])
    shard.apply_gradients(rows, torch.ones(3, 16))
    other.load_state_dict(shard.state_dict())
    assert torch.equal(other.versions_of(rows), torch.ones(3, dtype=torch.int64))
    for mine, theirs in zip(shard.stores, other.stores, strict=True):
        assert torch.equal(mine.weight, theirs.weight)
    assert other.global_step == 1
    state = shard.state_dict() | {"dims": [4, 8]}
    with pytest.raises(ValueError, match="dims"):
        other.load_state_dict(state)


# ---------------------------------------------------------------- config

ROWS = {"data.synthetic.table_rows": [50, 60, 70]}


def tables(*entries):
    return {**ROWS, "model.tables": list(entries)}


def test_model_tables_give_each_table_its_dim_and_the_interaction_dim():
    model = (
        load_config(None, tables({"name": "a", "dim": 4}, {"name": "b"}, {"name": "c", "dim": 32}))
        .to_specs()
        .model
    )
    assert [t.dim for t in model.tables] == [4, 16, 32]
    assert [t.name for t in model.tables] == ["a", "b", "c"]
    assert model.embedding_dim == 16 and model.projected == (0, 2)
    assert model.hash_tables is None


def test_without_model_tables_the_model_is_the_default():
    plain = load_config(None, ROWS).to_specs().model
    same = (
        load_config(None, tables({"name": "C1"}, {"name": "C2"}, {"name": "C3"})).to_specs().model
    )
    assert same.interaction_dim is None and same.tables == plain.tables and same == plain


@pytest.mark.parametrize(
    ("entries", "message"),
    [
        (
            [{"name": "a", "dim": 0}, {"name": "b"}, {"name": "c"}],
            r"model.tables\[0\].dim: must be >= 1",
        ),
        ([{"name": "a"}, {"name": "b"}], "model.tables: 2 tables, but the data has 3 categorical"),
        (
            [{"name": "a"}, {"name": "a"}, {"name": "c"}],
            r"model.tables\[1\].name: 'a' is model.tables\[0\]'s",
        ),
        (
            [{"name": "a", "rows": 50}, {"name": "b"}, {"name": "c"}],
            r"model.tables\[1\].rows: give every",
        ),
        (
            [{"name": "a", "rows": 0}, {"name": "b"}, {"name": "c"}],
            r"model.tables\[0\].rows: must be >= 1",
        ),
        (
            [{"name": "a", "size": 3}, {"name": "b"}, {"name": "c"}],
            r"model.tables\[0\].size: unknown key",
        ),
        ([{"dim": 3}, {"name": "b"}, {"name": "c"}], r"model.tables\[0\].name: required"),
    ],
)
def test_model_tables_errors_name_the_key(entries, message):
    with pytest.raises(ConfigError, match=message):
        load_config(None, tables(*entries))


def test_per_table_rows_must_be_the_synthetic_datas():
    entries = [{"name": n, "rows": 10} for n in "abc"]
    with pytest.raises(ConfigError, match="model.table_rows: must equal data.synthetic"):
        load_config(None, tables(*entries))


FILE_DATA = {
    "data.source": "csv",
    "data.path": "x.csv",
    "data.test_fraction": 0.1,
    "data.schema.dense": ["I1"],
    "data.schema.categorical": ["user", "item"],
}


def test_file_data_tables_follow_the_columns():
    wrong = {**FILE_DATA, "model.tables": [{"name": "item"}, {"name": "user"}]}
    with pytest.raises(
        ConfigError,
        match=r"model.tables\[0\].name: 'item', but the data's categorical column 0 is 'user'",
    ):
        load_config(None, wrong)
    entries = [
        {"name": "user", "dim": 8, "rows": 100},
        {"name": "item", "dim": 32, "rows": 500, "kind": "fixed"},
    ]
    model = load_config(None, {**FILE_DATA, "model.tables": entries}).to_specs().model
    assert model.hash_tables is None and [(t.num_rows, t.dim) for t in model.tables] == [
        (100, 8),
        (500, 32),
    ]


def test_a_hash_tables_own_admission_and_eviction_override_the_models():
    entries = [
        {"name": "user", "dim": 8, "admission": {"min_count": 3}},
        {"name": "item", "dim": 32, "eviction": {"ttl_days": 2}},
    ]
    overrides = {
        **FILE_DATA,
        "model.tables": entries,
        "model.hash_tables.admission.probability": 0.5,
        "model.hash_tables.eviction.ttl_steps": 100,
    }
    model = load_config(None, overrides).to_specs().model
    user, item = model.tables
    assert model.hash_tables is not None
    assert user.admission == Admission(min_count=3, probability=0.5) and user.eviction is None
    assert item.eviction == Eviction(ttl_steps=100, ttl_days=2) and item.admission is None
    groups = hash_groups(model.tables, model.hash_tables)
    assert [(g.dim, g.tables) for g in groups] == [(8, (0,)), (32, (1,))]
    bad = {
        **overrides,
        "model.tables": [{"name": "user", "admission": {"min_count": 0}}, {"name": "item"}],
    }
    with pytest.raises(ConfigError, match=r"model.tables\[0\].admission"):
        load_config(None, bad)
    fixed = {
        **ROWS,
        "model.tables": [{"name": "a", "eviction": {"ttl_steps": 3}}, {"name": "b"}, {"name": "c"}],
    }
    with pytest.raises(ConfigError, match=r"model.tables\[0\].eviction: only hash tables"):
        load_config(None, fixed)


def test_hash_tables_of_several_dims_and_policies_keep_one_store_per_group():
    tables = (
        TableSpec("a", 1, 4),
        TableSpec("b", 1, 8, admission=Admission(min_count=2)),
        TableSpec("c", 1, 4),
        TableSpec("d", 1, 16),
    )
    config = HashTables()
    layout = HashLayout(tables, 2, config)
    assert [(g.dim, g.tables) for g in layout.groups] == [(4, (0, 2)), (8, (1,)), (16, (3,))]
    single = HashLayout(tables, 1, config)
    one = LocalEmbeddings(single, build_shards(single, OPTIMIZER, seed=4))
    two = LocalEmbeddings(layout, build_shards(layout, OPTIMIZER, seed=4))
    assert all(isinstance(s, HashGroupedShard) for s in two.shards)
    b = keyed(batch())
    for step in range(3):
        x, requests_x = one.lookup(b)
        y, requests_y = two.lookup(b)
        torch.testing.assert_close(x, y)
        grad = torch.randn(x.shape, generator=torch.Generator().manual_seed(step))
        one.apply(grad, requests_x)
        two.apply(grad, requests_y)
    assert x.shape == (3, 4, 16) and bool((x[:, 0, 4:] == 0).all())
    (shard,) = one.shards
    widths = [store.weight.shape[1] for store in shard.stores]
    assert widths == [4, 8, 16]
    assert len({store.clock for store in shard.stores}) == 1  # every update reaches each
    summary = single.rows_summary([shard.state_dict()])
    assert summary["per_table"]["b"]["refused_lookups"] > 0  # b's admission: 2 sightings
    rows = KeyedRows.from_shards([s.state_dict() for s in two.shards])
    ids, vectors = rows.table(3, 16)
    assert vectors.shape == (ids.numel(), 16) and rows.table(0, 4)[1].shape[1] == 4


def keyed(b):
    """The batch's ids as feature-prefixed keys (hash tables)."""
    F, B = b.num_features, b.batch_size
    table_of_id = torch.arange(F).repeat_interleave(B).repeat_interleave(b.bag_lengths())
    return dataclasses.replace(b, ids=b.ids | (table_of_id << 56))


def test_incremental_checkpoints_reach_every_store_of_a_grouped_shard():
    tables = tuple(TableSpec(name, 1, dim) for name, dim in zip("abcd", (4, 8, 4, 8), strict=True))
    layout = HashLayout(tables, 1, HashTables())
    local = LocalEmbeddings(layout, build_shards(layout, OPTIMIZER, seed=0))
    b = keyed(batch())
    base = local.shards[0].state_dict()
    pooled, requests = local.lookup(b)
    local.apply(torch.ones(pooled.shape), requests)
    new = local.shards[0].state_dict()
    assert is_hash_state(base) and is_hash_state(new)
    rebuilt = apply_shard_delta(base, shard_delta(base, new))
    for mine, theirs in zip(rebuilt["groups"], new["groups"], strict=True):
        assert torch.equal(mine["weight"], theirs["weight"]) and torch.equal(
            mine["keys"], theirs["keys"]
        )


def test_hierarchical_training_takes_projected_tables():
    entries = tables({"name": "a", "dim": 4}, {"name": "b"}, {"name": "c"})
    model = load_config(None, {**entries, "strategy.name": "hierarchical"}).to_specs().model
    assert model.projected == (0,)


def test_a_new_day_evicts_each_group_by_its_own_ttl_days():
    from recsync.app.runs.continual_days import day_started
    from recsync.coordinator.checkpoint import JobState

    config = load_config(
        None,
        {
            "model.table_kind": "hash",
            "data.synthetic.table_rows": [50] * 4,
            "model.tables": [
                {"name": "a", "dim": 4, "eviction": {"ttl_days": 1}},
                {"name": "b", "dim": 8},
                {"name": "c", "dim": 4, "eviction": {"ttl_days": 1}},
                {"name": "d", "dim": 8},
            ],
        },
    )
    model = config.to_specs().model
    layout = HashLayout(model.tables, 1, model.hash_tables)
    local = LocalEmbeddings(layout, build_shards(layout, OPTIMIZER, seed=0))
    pooled, requests = local.lookup(keyed(batch()))
    local.apply(torch.ones(pooled.shape), requests)
    state = JobState(torch.zeros(1), {}, [local.shards[0].state_dict()], [], 0, 0, 0, "sync")
    kept = [int(g["keys"].numel()) for g in state.shards[0]["groups"]]
    first = day_started(config, state)
    second = day_started(config, first)  # day 1's rows were not seen on day 2: a's, c's go
    after = [int(g["keys"].numel()) for g in second.shards[0]["groups"]]
    assert [g.tables for g in layout.groups] == [(0, 2), (1, 3)]
    assert after == [0, kept[1]] and kept[0] > 0
