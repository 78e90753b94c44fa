"""Multi-valued categorical columns: text split at a declared separator, and Parquet list
columns, read as multi-hot bags, the same column by column as row by row; bad elements
skipped with a reason naming the line and the column."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq
import pytest
import torch

from recsync.data.batch import Batch, rebatch
from recsync.data.keys import table_of
from recsync.data.skips import Rejected, SkipReport
from recsync.errors import DataError
from recsync.io.columns import infer_columns
from recsync.io.formats.tabular import blocks as table_blocks
from recsync.io.formats.tabular.blocks import columnar_batch, typed_csv
from recsync.io.formats.tabular.rows import TabularRowParser, TabularSchema
from recsync.io.readers import csv_blocks, open_dataset

SCHEMA = TabularSchema(
    label="clk",
    dense=("price",),
    categorical=("userid", "click_sequence", "tags"),
    table_rows=(1000, 500, 64),
    hashed=("tags",),
    multi_valued={"click_sequence": "^", "tags": "|"},
)


def _rows(count: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    lines = []
    for _ in range(count):
        clicks = "^".join(str(v) for v in rng.integers(0, 10**6, rng.integers(0, 5)))
        tags = "|".join(rng.choice(["red", "sale", "kids", "new"], rng.integers(1, 3)))
        lines.append(f"{rng.integers(0, 2)},{rng.random() * 90:.2f},{rng.integers(0, 10**5)},")
        lines[-1] += f"{clicks},{tags}"
    return lines


def _csv(tmp_path, lines: list[str], name: str = "ads.csv"):
    path = tmp_path / name
    path.write_text("clk,price,userid,click_sequence,tags\n" + "\n".join(lines) + "\n")
    return path


def _same(mine: list[Batch], theirs: list[Batch]) -> None:
    assert len(mine) == len(theirs)
    for a, b in zip(mine, theirs, strict=True):
        for name in ("dense", "ids", "offsets", "labels"):
            assert torch.equal(getattr(a, name), getattr(b, name)), name


def _csv_both(path, schema=SCHEMA, strict=False):
    out = []
    for columnar in (True, False):
        skips = SkipReport()
        blocks = csv_blocks(path, schema, strict=strict, skips=skips, columnar=columnar)
        out.append((list(rebatch(blocks, 16)), skips))
    return out


def test_the_row_parser_splits_declared_columns_and_takes_list_values():
    parser = TabularRowParser(SCHEMA)
    dense, bags, label = parser(("1", "2.5", "7", "12^13^12", "a|b"))
    assert dense == [2.5] and label == 1.0 and bags[0] == [7]
    assert bags[1] == [12, 13, 12]  # a repeated element counts twice
    assert len(bags[2]) == 2
    assert parser((1, 2.5, 7, [12, 513], ["a", "b"]))[1] == [[7], [12, 13], bags[2]]
    assert parser(("1", "2.5", "7", None, []))[1] == [[7], [], []]  # null, empty: no ids


@pytest.mark.parametrize(
    ("row", "column", "words"),
    [
        (("1", "2", "7", "12^^13", "a"), "click_sequence", "empty element"),
        (("1", "2", "7", "12^", "a"), "click_sequence", "empty element"),
        (("1", "2", "7^8", "1", "a"), "userid", 'multi_valued = {userid = "^"}'),
        ((1, 2.0, 7, [1, None], ["a"]), "click_sequence", "null element"),
        ((1, 2.0, 7, [1, float("nan")], ["a"]), "click_sequence", "NaN"),
        (("1", "2", "7", "1^x", "a"), "click_sequence", "not a non-negative integer"),
    ],
)
def test_a_bad_element_is_rejected_naming_the_column(row, column, words):
    with pytest.raises(Rejected) as caught:
        TabularRowParser(SCHEMA)(row)
    assert caught.value.field == column and words in str(caught.value)


def test_keyed_bags_hold_keys_of_their_feature():
    schema = TabularSchema(**{**_fields(SCHEMA), "keyed": True})
    _, bags, _ = TabularRowParser(schema)(("1", "2", "7", "12^13", "a|b"))
    assert [table_of(torch.tensor(bag)).tolist() for bag in bags] == [[0], [1, 1], [2, 2]]


def _fields(schema: TabularSchema) -> dict[str, object]:
    names = ("label", "dense", "categorical", "table_rows", "hashed", "multi_valued")
    return {name: getattr(schema, name) for name in names}


def test_a_multi_valued_column_must_be_categorical_and_split_by_a_sign():
    with pytest.raises(ValueError, match="not a categorical column"):
        TabularSchema("y", ("a",), ("b",), (5,), multi_valued={"a": "^"})
    with pytest.raises(ValueError, match="one character"):
        TabularSchema("y", (), ("b",), (5,), multi_valued={"b": "x"})


@pytest.mark.parametrize("keyed", [False, True])
def test_csv_bags_column_by_column_equal_the_row_parsers(tmp_path, keyed):
    schema = TabularSchema(**{**_fields(SCHEMA), "keyed": keyed})
    path = _csv(tmp_path, _rows(300, seed=1))
    (mine, skips), (theirs, _) = _csv_both(path, schema)
    _same(mine, theirs)
    assert skips.total == 0 and sum(b.batch_size for b in mine) == 300
    lengths = torch.cat([b.bag_lengths() for b in mine])
    assert int(lengths.max()) > 1  # several ids in some bags
    # the clean file really converts column by column
    text = pa_csv.read_csv(path, convert_options=pa_csv.ConvertOptions(
        column_types=dict.fromkeys(schema.columns, pa.string()), strings_can_be_null=True
    )).to_batches()[0]  # fmt: skip
    typed = typed_csv(text, schema)
    assert typed is not None and columnar_batch(typed, schema) is not None


def test_csv_bad_elements_are_skipped_with_the_line_and_the_column(tmp_path):
    lines = _rows(40, seed=2)
    lines[9] = "1,3.5,17,44^^45,red"  # line 11 of the file (the header is line 1)
    lines[20] = "0,3.5,17^18,44,red"  # a list in a column not declared multi-valued
    path = _csv(tmp_path, lines)
    (mine, skips), (theirs, row_skips) = _csv_both(path)
    _same(mine, theirs)
    assert skips.counts == row_skips.counts == {"bad_id": 2}
    first = skips.first["bad_id"]
    assert "line 11" in first and "click_sequence" in first and "empty element" in first
    with pytest.raises(DataError, match=r"line 11.*click_sequence"):
        list(open_dataset(path, "csv", SCHEMA, batch_size=8, strict=True))


def _parquet(tmp_path, rows: int, seed: int, nulls: bool = False):
    rng = np.random.default_rng(seed)
    history = [[int(v) for v in rng.integers(0, 10**6, rng.integers(0, 5))] for _ in range(rows)]
    tags = [list(rng.choice(["red", "sale", "kids"], rng.integers(1, 3))) for _ in range(rows)]
    if nulls:
        history[3], tags[5] = None, None
    table = pa.table(
        {
            "clk": rng.integers(0, 2, rows),
            "price": rng.random(rows),
            "userid": rng.integers(0, 10**5, rows),
            "click_sequence": pa.array(history, pa.list_(pa.int64())),
            "tags": pa.array(tags, pa.list_(pa.string())),
        }
    )
    path = tmp_path / "lists.parquet"
    pq.write_table(table, path, row_group_size=64)
    return path, table


def _parquet_both(path, monkeypatch, schema=SCHEMA):
    monkeypatch.setattr(table_blocks, "PARQUET_READ_ROWS", 50)
    out = []
    for columnar in (True, False):
        skips = SkipReport()
        blocks = table_blocks.parquet_blocks(
            path, schema, strict=False, skips=skips, columnar=columnar
        )
        out.append((list(rebatch(blocks, 32)), skips))
    return out


@pytest.mark.parametrize("nulls", [False, True])
def test_parquet_list_columns_are_bags_column_by_column_as_row_by_row(tmp_path, monkeypatch, nulls):
    schema = TabularSchema(**{**_fields(SCHEMA), "multi_valued": {}})  # lists need no separator
    path, table = _parquet(tmp_path, 200, seed=3, nulls=nulls)
    (mine, skips), (theirs, _) = _parquet_both(path, monkeypatch, schema)
    _same(mine, theirs)
    assert skips.total == 0
    first = mine[0]
    history = table.column("click_sequence").to_pylist()
    lengths = first.bag_lengths().reshape(3, first.batch_size)[1]
    assert lengths.tolist() == [len(h or []) for h in history[:32]]
    assert columnar_batch(table.to_batches()[0], schema) is not None


def test_a_null_inside_a_parquet_list_is_skipped(tmp_path, monkeypatch):
    path, table = _parquet(tmp_path, 60, seed=4)
    history = table.column("click_sequence").to_pylist()
    history[7] = [1, None]
    table = table.set_column(3, "click_sequence", pa.array(history, pa.list_(pa.int64())))
    pq.write_table(table, path)
    (mine, skips), (theirs, _) = _parquet_both(path, monkeypatch)
    _same(mine, theirs)
    assert skips.counts == {"bad_id": 1}
    assert "line 8" in skips.first["bad_id"] and "null element" in skips.first["bad_id"]


def test_a_pandas_category_column_is_inferred_hashed_and_read_column_by_column():
    cities = pa.array(["berlin", "paris", "berlin", None]).dictionary_encode()
    table = pa.table({"clk": [0, 1, 1, 0], "city": cities})
    found = infer_columns(table, "clk", "t")
    assert found.categorical == found.hashed == ("city",)
    schema = TabularSchema("clk", (), ("city",), (97,), hashed=("city",))
    clean = table.slice(0, 3).to_batches()[0]
    mine = columnar_batch(clean, schema)
    rows = TabularRowParser(schema)
    assert mine is not None
    assert mine.ids.tolist() == [rows((0, c))[1][0][0] for c in ("berlin", "paris", "berlin")]
