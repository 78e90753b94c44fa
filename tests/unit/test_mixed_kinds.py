"""Hash and fixed tables in one job: [[model.tables]]'s kinds resolved and checked, the
spec's fixed tables among hash tables, their keys taken modulo their rows, and the hash
layout's stores of their own."""

from __future__ import annotations

import pytest
import torch

from recsync.app.config.load import load_config
from recsync.data.batch import collate
from recsync.data.keys import ID_MASK, fixed_keys, key, table_of
from recsync.errors import ConfigError
from recsync.io.sources import FileData, prepared
from recsync.model.hash_spec import Admission, Eviction, HashTables
from recsync.model.spec import ModelSpec, TableSpec
from recsync.optim.rowwise import RowOptimizerSpec
from recsync.ps.dim_groups import HashGroupedShard
from recsync.ps.hash_layout import HashLayout
from recsync.ps.local import LocalEmbeddings, build_shards

FILE_DATA = {
    "data.source": "csv",
    "data.path": "x.csv",
    "data.test_fraction": 0.1,
    "data.schema.dense": ["I1"],
    "data.schema.categorical": ["user", "item", "ad"],
}


def model_of(overrides):
    return load_config(None, overrides).to_specs().model


def test_tables_of_both_kinds_make_a_model_of_hash_tables_with_fixed_ones_among_them():
    entries = [
        {"name": "user", "kind": "hash", "dim": 8},
        {"name": "item", "kind": "fixed", "rows": 500},
        {"name": "ad", "kind": "fixed", "rows": 30, "dim": 4},
    ]
    specs = load_config(None, {**FILE_DATA, "model.tables": entries}).to_specs()
    model = specs.model
    assert model.hash_tables is not None
    assert [(t.kind, t.num_rows, t.dim) for t in model.tables] == [
        (None, 1, 8),  # a hash table: rows made as ids arrive
        ("fixed", 500, 16),
        ("fixed", 30, 4),
    ]
    assert model.fixed_rows == ((1, 500), (2, 30))
    assert specs.files is not None and specs.files.fixed_rows == ((1, 500), (2, 30))
    assert specs.files.schema.keyed  # every column keyed, the fixed ones then reduced


def test_a_tables_kind_overrides_model_table_kind_either_way():
    hashed = model_of(
        {
            **FILE_DATA,
            "model.table_kind": "hash",
            "model.tables": [
                {"name": "user"},
                {"name": "item", "kind": "fixed", "rows": 9},
                {"name": "ad"},
            ],
        }
    )
    assert [t.kind for t in hashed.tables] == [None, "fixed", None]
    fixed = model_of(
        {
            **FILE_DATA,
            "model.table_kind": "fixed",
            "model.table_rows": 40,
            "model.tables": [{"name": "user", "kind": "hash"}, {"name": "item"}, {"name": "ad"}],
        }
    )
    assert fixed.hash_tables is not None and fixed.fixed_rows == ((1, 40), (2, 40))
    auto = {"data.synthetic.table_rows": [50, 60, 70]}
    one = [{"name": "a", "kind": "hash"}, {"name": "b"}, {"name": "c"}]
    assert model_of({**auto, "model.tables": one}).fixed_rows == ()  # auto: the one kind given
    both = [{"name": "a", "kind": "hash"}, {"name": "b", "kind": "fixed"}, {"name": "c"}]
    synthetic = model_of({**auto, "model.tables": both})
    assert synthetic.fixed_rows == ((1, 60), (2, 70))  # auto: the synthetic data's, fixed


def test_one_kind_given_everywhere_is_the_job_of_that_kind_as_before():
    entries = [{"name": n, "kind": "fixed", "rows": 20} for n in ("user", "item", "ad")]
    fixed = model_of({**FILE_DATA, "model.tables": entries})
    assert fixed.hash_tables is None and all(t.kind is None for t in fixed.tables)
    entries = [{"name": n, "kind": "hash"} for n in ("user", "item", "ad")]
    hashed = model_of({**FILE_DATA, "model.tables": entries})
    assert hashed.hash_tables is not None and hashed.fixed_rows == ()


@pytest.mark.parametrize(
    ("entries", "message"),
    [
        (
            [{"name": "user", "kind": "hash"}, {"name": "item", "kind": "fixed"}, {"name": "ad"}],
            r"model.tables\[1\].rows: a fixed table among hash tables needs its rows",
        ),
        (
            [
                {"name": "user", "kind": "hash"},
                {"name": "item", "kind": "fixed", "rows": 5, "admission": {"min_count": 2}},
                {"name": "ad", "kind": "hash"},
            ],
            r"model.tables\[1\].admission: only hash tables admit and evict rows",
        ),
        (
            [
                {"name": "user", "kind": "hash"},
                {"name": "item", "kind": "fixed", "rows": 5},
                {"name": "ad", "kind": "other"},
            ],
            r"model.tables\[2\].kind",
        ),
    ],
)
def test_mixed_kinds_errors_name_the_key(entries, message):
    with pytest.raises(ConfigError, match=message):
        load_config(None, {**FILE_DATA, "model.tables": entries})


def test_the_spec_checks_a_tables_kind():
    with pytest.raises(ValueError, match="table a: a hash table needs the model's hash_tables"):
        ModelSpec(tables=(TableSpec("a", 5, 4, kind="hash"),))
    with pytest.raises(ValueError, match="table a: admission and eviction are a hash table's"):
        TableSpec("a", 5, 4, admission=Admission(min_count=2), kind="fixed")
    with pytest.raises(ValueError, match="every table is fixed"):
        ModelSpec(tables=(TableSpec("a", 5, 4, kind="fixed"),), hash_tables=HashTables())
    assert ModelSpec(tables=(TableSpec("a", 5, 4, kind="fixed"),)).fixed_rows == ()


def test_fixed_keys_take_only_the_fixed_tables_ids_modulo_their_rows():
    keys = torch.tensor([key(0, 123), key(1, 123), key(2, 7), key(200, 99)], dtype=torch.int64)
    out = fixed_keys(keys, ((1, 10), (200, 50)))
    assert out.tolist() == [key(0, 123), key(1, 3), key(2, 7), key(200, 49)]
    assert torch.equal(table_of(out), table_of(keys))
    assert fixed_keys(keys, ()) is keys


def test_prepared_batches_reduce_the_fixed_tables_keys():
    bags = [[[key(0, 1000)], [key(1, 1000), key(1, 3)]], [[key(0, 5)], [key(1, 11)]]]
    batch = collate([[1.0], [2.0]], bags, [0.0, 1.0])
    files = FileData((), "csv", None, False, (), 0.1, 10, False, fixed_rows=((1, 10),))  # type: ignore[arg-type]
    out = prepared(batch, files)
    assert (out.ids & ID_MASK).tolist() == [1000, 5, 0, 3, 1]


TABLES = (
    TableSpec("h", 1, 4, eviction=Eviction(ttl_steps=1)),
    TableSpec("f", 12, 4, kind="fixed"),
    TableSpec("g", 8, 8, kind="fixed"),
)


def test_fixed_tables_keep_stores_of_their_own_that_admit_all_and_never_evict_or_fill():
    config = HashTables(admission=Admission(min_count=3), max_rows=2)
    layout = HashLayout(TABLES, 1, config)
    assert [(g.dim, g.tables, g.fixed) for g in layout.groups] == [
        (4, (0,), False),
        (4, (1,), True),
        (8, (2,), True),
    ]
    local = LocalEmbeddings(layout, build_shards(layout, RowOptimizerSpec("adagrad", 0.1), 0))
    (shard,) = local.shards
    assert isinstance(shard, HashGroupedShard)
    bags = [[[key(0, i)], [key(1, i)], [key(2, i % 8)]] for i in range(12)]
    batch = collate([[0.0]] * 12, bags, [0.0] * 12)
    for _ in range(2):
        pooled, requests = local.lookup(batch)
        local.apply(torch.ones(pooled.shape), requests)
    summary = layout.rows_summary([shard.state_dict()])["per_table"]
    assert summary["h"]["live"] == 0  # min_count 3: not yet admitted
    assert summary["f"]["live"] == 12 and summary["g"]["live"] == 8  # no max_rows bound
    assert summary["f"]["evicted"] == summary["g"]["evicted"] == 0


def test_a_fixed_tables_key_past_its_rows_is_an_error_naming_the_table():
    layout = HashLayout(TABLES, 2, HashTables())
    batch = collate([[0.0]], [[[key(0, 10**9)], [key(1, 12)], [key(2, 0)]]], [0.0])
    with pytest.raises(ValueError, match="table f: id 12 is past its 12 rows"):
        layout.route(batch)
