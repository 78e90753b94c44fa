"""Schema-driven rows (io/formats/tabular) and CSV/Parquet files (recsync.io.readers)."""

from __future__ import annotations

import gzip
import math

import mmh3
import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq
import pytest

from recsync.data.skips import SkipReport
from recsync.errors import ConfigError, DataError
from recsync.io.formats.tabular import blocks as table_blocks
from recsync.io.formats.tabular.rows import TabularSchema, rows_from_dicts, tabular_batches
from recsync.io.readers import open_dataset

SCHEMA = TabularSchema(
    label="click",
    dense=("price", "age"),
    categorical=("item", "city"),
    table_rows=(10, 1000),
    hashed=("city",),
)


def city(name: str) -> int:
    return mmh3.hash(name, 0, signed=False) % 1000


def read(rows, schema=SCHEMA, strict=False, skips=None, batch_size=8):
    return list(
        tabular_batches(rows, schema, source="t", batch_size=batch_size, strict=strict, skips=skips)
    )


def test_rows_dense_ids_offsets_labels():
    rows = [
        (1, 2.5, 3, 17, "paris"),
        (0.0, None, "4", None, None),  # null dense -> 0, null categorical -> empty bag
        (True, "1e1", 0, "7", 42),  # text values; an int in a hashed column hashes as "42"
    ]
    (batch,) = read(rows)
    assert batch.labels.tolist() == [1.0, 0.0, 1.0]
    assert batch.dense.tolist() == [[2.5, 3.0], [0.0, 4.0], [10.0, 0.0]]
    assert batch.bag_lengths().tolist() == [1, 0, 1, 1, 0, 1]
    assert batch.ids.tolist() == [7, 7, city("paris"), city("42")]
    assert batch.offsets.tolist() == [0, 1, 1, 2, 3, 3, 4]


def test_rows_from_dicts_and_configurable_null_fill():
    schema = TabularSchema("y", ("x",), (), (), null_dense=-1.0)
    (batch,) = read(rows_from_dicts([{"y": 1, "x": None}, {"y": 0}], schema), schema=schema)
    assert batch.dense.tolist() == [[-1.0], [-1.0]] and batch.num_features == 0


NO_FILL = TabularSchema("click", ("price",), ("item",), (10,), null_dense=None)
BAD_ROWS = {
    "empty_line": ((None, None, None, None, None), SCHEMA, ""),
    "missing_label": ((None, 1.0, 1.0, 1, "a"), SCHEMA, "click"),
    "bad_label": ((2, 1.0, 1.0, 1, "a"), SCHEMA, "click"),
    "bad_value": ((1, "cheap", 1.0, 1, "a"), SCHEMA, "price"),
    "nan_value": ((1, 1.0, math.inf, 1, "a"), SCHEMA, "age"),
    "missing_value": ((1, None, 3), NO_FILL, "price"),
    "bad_id": ((1, 1.0, 1.0, -3, "a"), SCHEMA, "item"),
}


@pytest.mark.parametrize("reason", sorted(BAD_ROWS))
def test_malformed_row_lenient_and_strict(reason):
    bad, schema, field = BAD_ROWS[reason]
    good = (1, 1.0, 2) if schema is NO_FILL else (1, 1.0, 2.0, 3, "x")
    skips = SkipReport()
    (batch,) = read([good, bad, good], schema=schema, skips=skips)
    assert batch.batch_size == 2 and skips.counts == {reason: 1}
    with pytest.raises(DataError) as info:
        read([good, bad], schema=schema, strict=True)
    assert (info.value.source, info.value.line, info.value.field) == ("t", 2, field)


def test_schema_validation():
    with pytest.raises(ValueError):
        TabularSchema("y", (), ("a",), ())
    with pytest.raises(ValueError):
        TabularSchema("y", ("a",), ("a",), (3,))
    with pytest.raises(ValueError):
        TabularSchema("y", (), ("a",), (3,), hashed=("b",))


TABLE = pa.table(
    {
        "click": [1, 0, 1, None, 0],
        "price": [1.5, None, float("nan"), 2.0, 4.0],
        "age": [30.0, 40.0, 50.0, 60.0, 70.0],
        "item": [3, 12, 5, 6, None],
        "city": ["paris", "rome", "oslo", "lima", ""],
        "unused": ["u"] * 5,
    }
)


def test_parquet_round_trip_small_reads(tmp_path, monkeypatch):
    path = tmp_path / "part-0.parquet"
    pq.write_table(TABLE, path, row_group_size=2)
    monkeypatch.setattr(table_blocks, "PARQUET_READ_ROWS", 2)
    reader = open_dataset(path, "auto", SCHEMA, batch_size=2)
    batches = list(reader)
    assert [b.batch_size for b in batches] == [2, 1]
    assert [b.labels.tolist() for b in batches] == [[1.0, 0.0], [0.0]]
    assert [b.dense.tolist() for b in batches] == [[[1.5, 30.0], [0.0, 40.0]], [[4.0, 70.0]]]
    assert batches[0].ids.tolist() == [3, 2, city("paris"), city("rome")]
    assert batches[1].bag_lengths().tolist() == [0, 0]  # null item, empty city
    assert reader.skips.counts == {"nan_value": 1, "missing_label": 1}
    assert "line 3, field price" in reader.skips.first["nan_value"]
    with pytest.raises(DataError, match=r"part-0\.parquet, line 3, field price"):
        list(open_dataset(path, "parquet", SCHEMA, batch_size=2, strict=True))


def test_parquet_missing_column(tmp_path):
    path = tmp_path / "x.parquet"
    pq.write_table(TABLE.drop_columns(["age"]), path)
    with pytest.raises(DataError, match="field age"):
        list(open_dataset(path, "parquet", SCHEMA, batch_size=2))


def test_csv_round_trip_written_with_pyarrow(tmp_path):
    path = tmp_path / "train.csv"
    pa_csv.write_csv(TABLE, path)
    reader = open_dataset(path, "auto", SCHEMA, batch_size=10)
    (batch,) = list(reader)
    assert batch.labels.tolist() == [1.0, 0.0, 0.0]
    assert batch.dense.tolist() == [[1.5, 30.0], [0.0, 40.0], [4.0, 70.0]]
    assert batch.ids.tolist() == [3, 2, city("paris"), city("rome")]
    assert reader.skips.counts == {"nan_value": 1, "missing_label": 1}


CSV_TEXT = (
    "click,price,age,item,city\n"  # line 1
    "1,1.5,30,3,paris\n"  # 2: good
    "0,1,2,3,4,5\n"  # 3: too many columns
    "\n"  # 4: empty
    "1,nan,1,1,x\n"  # 5: NaN is rejected, not read as null
    "0,,,,\n"  # 6: good, all features null
    "1,2\n"  # 7: too few columns
    "0,2,2,007,lima\n"  # 8: good
)


def test_csv_malformed_lines_counted_with_physical_line_numbers(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text(CSV_TEXT)
    reader = open_dataset(path, "csv", SCHEMA, batch_size=10)
    (batch,) = list(reader)
    assert batch.labels.tolist() == [1.0, 0.0, 0.0]
    assert batch.dense.tolist() == [[1.5, 30.0], [0.0, 0.0], [2.0, 2.0]]
    assert batch.ids.tolist() == [3, 7, city("paris"), city("lima")]
    assert reader.skips.counts == {"wrong_field_count": 2, "empty_line": 1, "nan_value": 1}
    assert "line 3" in reader.skips.first["wrong_field_count"]
    assert "line 4" in reader.skips.first["empty_line"]
    assert "line 5, field price" in reader.skips.first["nan_value"]


@pytest.mark.parametrize(
    ("bad", "field"),
    [("0,1,2,3,4,5\n", ""), ("\n", ""), ("1,nan,1,1,x\n", "price"), ("1,2\n", "")],
)
def test_csv_gzip_strict_names_file_line_field(tmp_path, bad, field):
    path = tmp_path / "t.csv.gz"
    with gzip.open(path, "wt") as f:
        f.write("click,price,age,item,city\n1,1.5,30,3,paris\n" + bad + "0,1,1,1,x\n")
    with pytest.raises(DataError) as info:
        list(open_dataset(path, "csv", SCHEMA, batch_size=4, strict=True))
    assert (info.value.source, info.value.line, info.value.field) == (str(path), 3, field)
    (batch,) = list(open_dataset(path, "csv", SCHEMA, batch_size=4))
    assert batch.labels.tolist() == [1.0, 0.0]


def test_csv_missing_column_and_format_mismatch(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("click,price\n1,2\n")
    with pytest.raises(DataError, match="cannot read CSV"):
        list(open_dataset(path, "csv", SCHEMA, batch_size=4))
    with pytest.raises(ConfigError):
        open_dataset(path, "criteo", SCHEMA, batch_size=4)
    data = tmp_path / "t.data"
    data.write_text("")
    with pytest.raises(ConfigError):
        open_dataset(data, "auto", SCHEMA, batch_size=4)
