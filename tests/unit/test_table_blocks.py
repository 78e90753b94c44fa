"""Parquet read a column at a time gives the very batches, skips and errors of the row
parser, on clean record batches and on record batches that need the row parser."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from recsync.data.batch import Batch, rebatch
from recsync.data.skips import SkipReport
from recsync.errors import DataError
from recsync.io.formats.tabular import blocks as table_blocks
from recsync.io.formats.tabular.blocks import columnar_batch
from recsync.io.formats.tabular.rows import TabularSchema
from recsync.io.readers import open_dataset

SCHEMA = TabularSchema(
    label="y",
    dense=("price", "count"),
    categorical=("item", "city", "user"),
    table_rows=(50, 7, 1000),
    hashed=("city",),
)
FIELDS = ("dense", "ids", "offsets", "labels")


def _table(rows: int, seed: int) -> dict[str, list]:
    rng = np.random.default_rng(seed)
    return {
        "y": rng.integers(0, 2, rows).tolist(),
        "price": [None if rng.random() < 0.1 else float(v) for v in rng.normal(3, 2, rows)],
        "count": rng.integers(0, 10**12, rows).tolist(),
        "item": rng.integers(0, 10**6, rows).tolist(),
        "city": [f"city-{v}" for v in rng.integers(0, 40, rows)],
        "user": rng.integers(0, 2**40, rows).tolist(),
        "other": ["x"] * rows,
    }


def _write(tmp_path, columns: dict[str, list], name: str = "t.parquet"):
    path = tmp_path / name
    pq.write_table(pa.table(columns), path, row_group_size=64)
    return path


def _both(path, monkeypatch, strict=False):
    """Batches and skips read column by column and row by row (record batches of 50)."""
    monkeypatch.setattr(table_blocks, "PARQUET_READ_ROWS", 50)
    out = []
    for columnar in (True, False):
        skips = SkipReport()
        blocks = table_blocks.parquet_blocks(
            path, SCHEMA, strict=strict, skips=skips, columnar=columnar
        )
        out.append((list(rebatch(blocks, 32)), skips))
    return out


def _same(mine: list[Batch], theirs: list[Batch]) -> None:
    assert len(mine) == len(theirs) > 0
    for a, b in zip(mine, theirs, strict=True):
        for name in FIELDS:
            x, y = getattr(a, name), getattr(b, name)
            assert x.dtype == y.dtype and torch.equal(x, y), name


def test_clean_record_batches_convert_column_by_column_to_the_row_parsers_batches(
    tmp_path, monkeypatch
):
    path = _write(tmp_path, _table(300, 1))
    (fast, fast_skips), (slow, slow_skips) = _both(path, monkeypatch)
    _same(fast, slow)
    assert fast_skips.counts == slow_skips.counts == {}
    record_batch = pq.ParquetFile(path).iter_batches(50, columns=list(SCHEMA.columns))
    assert columnar_batch(next(record_batch), SCHEMA) is not None  # the fast path ran


@pytest.mark.parametrize(
    ("column", "row", "value", "reason"),
    [
        ("y", 3, None, "missing_label"),
        ("y", 60, 2, "bad_label"),
        ("price", 120, float("nan"), "nan_value"),
        ("price", 7, float("inf"), "nan_value"),
        ("item", 201, -4, "bad_id"),
        ("city", 99, "", None),  # an empty string is a null: an empty bag, not a skip
        ("city", 150, None, None),
        ("item", 250, None, None),
    ],
)
def test_a_record_batch_with_an_odd_value_goes_row_by_row_with_the_same_result(
    tmp_path, monkeypatch, column, row, value, reason
):
    table = _table(300, 2)
    table[column][row] = value
    path = _write(tmp_path, table)
    (fast, fast_skips), (slow, slow_skips) = _both(path, monkeypatch)
    _same(fast, slow)
    assert fast_skips.counts == slow_skips.counts == ({reason: 1} if reason else {})
    assert fast_skips.first == slow_skips.first
    if reason:
        assert f"line {row + 1}," in fast_skips.first[reason]  # its row number, per file
        with pytest.raises(DataError, match=f"line {row + 1}, field {column}"):
            _both(path, monkeypatch, strict=True)


def test_float_ids_and_integer_hashed_values_take_the_row_parser(tmp_path, monkeypatch):
    table = _table(120, 3)
    table["item"] = [float(v) for v in table["item"]]  # integral floats: ids all the same
    path = _write(tmp_path, table)
    (fast, _), (slow, _) = _both(path, monkeypatch)
    _same(fast, slow)
    record_batch = next(pq.ParquetFile(path).iter_batches(50, columns=list(SCHEMA.columns)))
    assert columnar_batch(record_batch, SCHEMA) is None


def test_several_files_read_through_open_dataset_fill_batches_across_them(tmp_path):
    paths = [_write(tmp_path, _table(70, s), f"part-{s}.parquet") for s in (4, 5)]
    batches = list(open_dataset(paths, "parquet", SCHEMA, batch_size=32))
    assert [b.batch_size for b in batches] == [32, 32, 32, 32, 12]
    labels = torch.cat([b.labels for b in batches]).tolist()
    assert labels == [float(v) for s in (4, 5) for v in _table(70, s)["y"]]


def _csv_text(table: dict[str, list]) -> str:
    names = list(table)
    lines = [",".join(names)]
    for row in zip(*(table[n] for n in names), strict=True):
        lines.append(",".join("" if v is None else str(v) for v in row))
    return "\n".join(lines) + "\n"


def _both_csv(tmp_path, text: str, monkeypatch, strict=False):
    """Batches and skips of a CSV read column by column and row by row (small blocks)."""
    from recsync.io import readers

    monkeypatch.setattr(readers, "CSV_BLOCK_BYTES", 4096)
    path = tmp_path / "t.csv"
    path.write_text(text)
    out = []
    for columnar in (True, False):
        skips = SkipReport()
        blocks = readers.csv_blocks(path, SCHEMA, strict=strict, skips=skips, columnar=columnar)
        out.append((list(rebatch(blocks, 32)), skips))
    return out


def test_plain_csv_converts_column_by_column_to_the_row_parsers_batches(tmp_path, monkeypatch):
    (fast, fast_skips), (slow, slow_skips) = _both_csv(
        tmp_path, _csv_text(_table(400, 6)), monkeypatch
    )
    _same(fast, slow)
    assert fast_skips.counts == slow_skips.counts == {}
    record_batch = pa.RecordBatch.from_pydict(
        {c: [None if v is None else str(v) for v in _table(5, 6)[c]] for c in SCHEMA.columns}
    )
    typed = table_blocks.typed_csv(record_batch, SCHEMA)
    assert typed is not None and columnar_batch(typed, SCHEMA) is not None  # the fast path ran


@pytest.mark.parametrize(
    ("column", "value", "reason"),
    [
        ("y", "1.0", None),  # Python reads it as 1: the row parser's
        ("y", "", "missing_label"),
        ("price", "+3", None),
        ("price", "1_000", None),  # float() takes underscores: so does the row parser
        ("price", "nan", "nan_value"),
        ("price", "1e999", "nan_value"),
        ("price", "abc", "bad_value"),
        ("item", " 12", None),  # a padded id: stripped by the row parser
        ("item", "12.0", None),  # a whole float, as pandas writes ids with nulls
        ("item", "12.5", "bad_id"),
        ("item", "99999999999999999999999", None),  # past an int64: taken modulo its table
        ("city", "", None),  # an empty hashed value: an empty bag
        ("count", "1,2", "wrong_field_count"),
    ],
)
def test_csv_text_not_written_plainly_goes_row_by_row_with_the_same_result(
    tmp_path, monkeypatch, column, value, reason
):
    table = _table(400, 7)
    table[column][150] = value
    (fast, fast_skips), (slow, slow_skips) = _both_csv(tmp_path, _csv_text(table), monkeypatch)
    _same(fast, slow)
    assert fast_skips.counts == slow_skips.counts == ({reason: 1} if reason else {})
    assert fast_skips.first == slow_skips.first
    if reason:
        assert "line 152" in fast_skips.first[reason]  # the header is line 1


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_negative_integer_ids_are_keys_of_hash_tables_and_bad_ids_of_fixed_ones(
    tmp_path, monkeypatch, fmt
):
    """Avazu's C20 holds -1 among its codes: a hash table keys it (its decimal text
    hashed, data/keys.py), column by column as row by row; a fixed table skips the row."""
    from recsync.data.keys import integer_id, key
    from recsync.io import readers

    monkeypatch.setattr(table_blocks, "PARQUET_READ_ROWS", 50)
    monkeypatch.setattr(readers, "CSV_BLOCK_BYTES", 4096)
    table = _table(200, 8)
    table["item"] = [-1 if i % 3 == 0 else v for i, v in enumerate(table["item"])]
    if fmt == "csv":
        path = tmp_path / "t.csv"
        path.write_text(_csv_text(table))
    else:
        path = _write(tmp_path, table)
    read = readers.csv_blocks if fmt == "csv" else table_blocks.parquet_blocks
    keyed = TabularSchema(**{**SCHEMA.__dict__, "keyed": True})
    out = []
    for columnar in (True, False):
        skips = SkipReport()
        blocks = read(path, keyed, strict=False, skips=skips, columnar=columnar)
        out.append(list(rebatch(blocks, 400)))
        assert skips.counts == {}
    _same(*out)
    (batch,) = out[0]
    item_ids = batch.ids[batch.offsets[:200]]  # feature 0's one id a row
    assert item_ids[0] == key(0, integer_id(-1)) and item_ids[1] == key(0, table["item"][1])
    skips = SkipReport()
    fixed = list(rebatch(read(path, SCHEMA, strict=False, skips=skips), 400))
    assert fixed[0].batch_size == 200 - 67 and skips.counts == {"bad_id": 67}
    assert "data.schema.hashed = ['item']" in skips.first["bad_id"]
