"""Keyed mode: readers emit feature-prefixed 64-bit keys (data/keys.py) instead of table
rows, by the documented id rule, the same from the row parsers and the block parsers."""

from __future__ import annotations

import dataclasses
import random

import mmh3
import numpy as np
import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq
import pytest
import torch

from recsync.data.batch import concat, rebatch
from recsync.data.keys import (
    ID_MASK,
    MAX_TABLES,
    hashed_id,
    id_of,
    integer_id,
    integer_ids,
    key,
    make_keys,
    table_of,
)
from recsync.data.skips import SkipReport
from recsync.data.synthetic import SyntheticSpec, SyntheticTask
from recsync.io import readers
from recsync.io.formats.criteo import blocks as criteo_blocks
from recsync.io.formats.criteo.rows import CriteoSchema, criteo_batches
from recsync.io.formats.criteo.scan import scan_block
from recsync.io.formats.libsvm.rows import (
    LibFFMSchema,
    LibSVMSchema,
    libffm_batches,
    libsvm_batches,
)
from recsync.io.formats.tabular import blocks as table_blocks
from recsync.io.formats.tabular.rows import TabularSchema
from recsync.io.line_bytes import block_bytes
from recsync.io.readers import csv_blocks

FIELDS = ("dense", "ids", "offsets", "labels")


def _mmh(text: str, seed: int = 0) -> int:
    return mmh3.hash64(text, seed, signed=False)[0] & ID_MASK


def _same(mine, theirs) -> None:
    assert len(mine) == len(theirs) > 0
    for a, b in zip(mine, theirs, strict=True):
        for name in FIELDS:
            x, y = getattr(a, name), getattr(b, name)
            assert x.dtype == y.dtype and torch.equal(x, y), name


def test_the_id_rule():
    assert [integer_id(v) for v in (0, 7, 2**32 - 1, ID_MASK)] == [0, 7, 2**32 - 1, ID_MASK]
    big = 123456789012345678901234567890
    for value in (2**56, 2**64 + 3, -1, -(2**70), big):
        assert integer_id(value) == _mmh(str(value))
    assert integer_id(int("100000000000000", 16)) == _mmh(str(2**56))  # hex: same rule
    assert hashed_id("paris") == _mmh("paris") == hashed_id(b"paris")
    assert hashed_id("paris", 7) == _mmh("paris", 7) != hashed_id("paris")
    assert hashed_id("paris") == hashed_id("paris") <= ID_MASK  # deterministic
    values = np.array([0, 5, ID_MASK, ID_MASK + 1, 2**63 + 9], dtype=np.uint64)
    assert integer_ids(values).tolist() == [integer_id(int(v)) for v in values.tolist()]
    signed = np.array([-3, 4, 2**62], dtype=np.int64)
    assert integer_ids(signed).tolist() == [integer_id(int(v)) for v in signed.tolist()]


def test_prefixes_separate_features_and_round_trip():
    assert key(0, 5) != key(1, 5)
    keys = torch.tensor([key(f, i) for f, i in [(0, 5), (1, 5), (200, 7), (255, ID_MASK)]])
    assert keys[2] < 0 and keys[3] == -1
    assert table_of(keys).tolist() == [0, 1, 200, 255]
    assert id_of(keys).tolist() == [5, 5, 7, ID_MASK]
    ids = np.array([0, 9, ID_MASK], dtype=np.int64)
    for f in (0, 3, 200):
        made = make_keys(f, ids)
        assert made.dtype == np.int64 and made.tolist() == [key(f, i) for i in ids.tolist()]
    with pytest.raises(ValueError, match="must be in"):
        make_keys(1, np.array([-1]))
    with pytest.raises(ValueError, match="at most 256"):
        CriteoSchema((10,) * (MAX_TABLES + 1), keyed=True)
    CriteoSchema((10,) * (MAX_TABLES + 1))  # fixed mode: no limit


CRITEO = CriteoSchema(table_rows=(7, 1000, 2**31 - 1) * 8 + (50, 3))
KEYED_CRITEO = dataclasses.replace(CRITEO, keyed=True)


def _criteo_line(rng: random.Random) -> str:
    integers = [rng.choice(["", "0", "-3", str(rng.randint(1, 10**4))]) for _ in range(13)]
    hexes = [
        rng.choice(
            ["", f"{rng.getrandbits(32):08x}", f"{rng.getrandbits(40):X}", "0" * 20 + "f"]
            + ["1" * 15, f"{rng.getrandbits(64):016x}"]  # >= 2^56: hashed
        )
        for _ in range(26)
    ]
    return "\t".join([rng.choice("01"), *integers, *hexes]) + "\n"


def _criteo_both(lines, schema, monkeypatch):
    monkeypatch.setattr(criteo_blocks, "BLOCK_LINES", 16)
    out = []
    for columnar in (True, False):
        skips = SkipReport()
        options = {"source": "d.tsv", "strict": False, "skips": skips, "columnar": columnar}
        blocks = criteo_blocks.criteo_blocks(enumerate(lines, start=1), schema, **options)
        out.append((list(rebatch(blocks, 10)), skips))
    return out


def test_criteo_keys_and_block_parser_agrees(monkeypatch):
    line = "1\t5" + "\t" * 13 + "\t".join(["ff", "", "1" * 15, "0" * 20 + "a"] + ["1"] * 22)
    (batch,) = criteo_batches([line], KEYED_CRITEO, batch_size=4)
    expected = [key(0, 255), key(2, _mmh(str(int("1" * 15, 16)))), key(3, 10)]
    assert batch.ids.tolist() == expected + [key(f, 1) for f in range(4, 26)]
    batch.validate(list(CRITEO.table_rows), keyed=True)
    rng = random.Random(1)
    lines = [_criteo_line(rng) for _ in range(100)]
    (fast, _), (slow, _) = _criteo_both(lines, KEYED_CRITEO, monkeypatch)
    _same(fast, slow)
    buf, ends = block_bytes(lines)
    assert scan_block(buf, ends, 13, 26)[0].all()  # every line took the fast path
    fixed = _criteo_both(lines, CRITEO, monkeypatch)[0][0]
    no_ids = [[dataclasses.replace(b, ids=b.ids * 0) for b in run] for run in (fast, fixed)]
    _same(*no_ids)  # keyed and fixed differ by their ids only


def test_keyed_skips_bad_lines_as_fixed_mode_does(monkeypatch):
    rng = random.Random(2)
    lines = [_criteo_line(rng) for _ in range(60)]
    lines[3] = "2" + lines[3][1:]
    lines[20] = "1\txyz" + lines[20][lines[20].index("\t", 2) :]
    lines[40] = "\n"
    reports = [
        skips
        for schema in (CRITEO, KEYED_CRITEO)
        for _, skips in _criteo_both(lines, schema, monkeypatch)
    ]
    assert reports[0].counts == {"bad_label": 1, "bad_integer": 1, "empty_line": 1}
    assert all(r.counts == reports[0].counts and r.first == reports[0].first for r in reports)


def test_libsvm_and_libffm_keys():
    big = "9" * 30
    lines = ["1 3:1 7:0 5:2.5 2:1", f"0 {big}:1 4:1", "x 1:1"]
    skips = SkipReport()
    (batch,) = libsvm_batches(lines, LibSVMSchema(4, (2,), keyed=True), batch_size=8, skips=skips)
    assert batch.ids.tolist() == [key(0, 3), key(0, 5), key(0, _mmh(big)), key(0, 4)]
    assert batch.dense.tolist() == [[1.0], [0.0]]
    fixed_skips = SkipReport()
    list(libsvm_batches(lines, LibSVMSchema(4, (2,)), batch_size=8, skips=fixed_skips))
    assert skips.counts == fixed_skips.counts == {"bad_label": 1}
    schema = LibFFMSchema((10, 10), dense_fields=(1,), keyed=True)
    ffm = ["1 0:3:1 2:3:1 1:0:0.5 0:12:1", f"0 2:{big}:1"]
    (batch,) = libffm_batches(ffm, schema, batch_size=8)
    assert batch.ids.tolist() == [key(0, 3), key(0, 12), key(1, 3), key(1, _mmh(big))]
    assert batch.bag_lengths().tolist() == [2, 0, 1, 1]
    batch.validate([10, 10], keyed=True)


TABLE = TabularSchema("y", ("price",), ("item", "city", "user"), (50, 7, 1000), ("city",))
TABLE = dataclasses.replace(TABLE, hash_seed=3, keyed=True)


def _columns(rows: int, seed: int) -> dict[str, list]:
    rng = np.random.default_rng(seed)
    return {
        "y": rng.integers(0, 2, rows).tolist(),
        "price": rng.normal(3, 2, rows).tolist(),
        "item": rng.integers(0, 10**6, rows).tolist(),
        "city": [f"city-{v}" for v in rng.integers(0, 40, rows)],
        "user": [int(v) for v in rng.integers(0, 2**63 - 1, rows, dtype=np.int64)],
    }


def _expected(columns: dict[str, list]) -> list[int]:
    item = [key(0, v) for v in columns["item"]]
    city = [key(1, _mmh(v, 3)) for v in columns["city"]]
    return item + city + [key(2, integer_id(v)) for v in columns["user"]]


def test_parquet_keys_and_column_parser_agrees(tmp_path, monkeypatch):
    columns = _columns(120, 1)
    columns["user"][5] = 2**64 - 1  # a uint64 column, past an int64
    path = tmp_path / "t.parquet"
    arrays = {**columns, "user": pa.array(columns["user"], type=pa.uint64())}
    pq.write_table(pa.table(arrays), path, row_group_size=64)
    monkeypatch.setattr(table_blocks, "PARQUET_READ_ROWS", 200)
    out = []
    for columnar in (True, False):
        blocks = table_blocks.parquet_blocks(
            path, TABLE, strict=False, skips=SkipReport(), columnar=columnar
        )
        out.append(list(blocks))
    _same(*out)
    assert len(out[0]) == 2  # a row group at a time: 64 rows, then 56
    assert concat(out[0]).ids.tolist() == _expected(columns)
    assert table_blocks.columnar_batch(pq.read_table(path).to_batches()[0], TABLE) is not None


def test_csv_keys_row_and_column_parsers_agree_and_skip_alike(tmp_path, monkeypatch):
    columns = _columns(50, 2)
    columns["user"][3] = 10**30  # past an int64: the row parser hashes its text
    path = tmp_path / "t.csv"
    table = pa.table({**columns, "user": [str(v) for v in columns["user"]]})
    pa_csv.write_csv(table, path, pa_csv.WriteOptions(quoting_style="none"))
    monkeypatch.setattr(readers, "CSV_BLOCK_BYTES", 1000)  # several record batches
    runs = [
        list(csv_blocks(path, TABLE, strict=False, skips=SkipReport(), columnar=columnar))
        for columnar in (True, False)
    ]
    _same(runs[0], runs[1])
    assert len(runs[0]) > 1 and concat(runs[0]).ids.tolist() == _expected(columns)
    clean = pa.RecordBatch.from_pydict({n: [str(v) for v in c] for n, c in columns.items()})
    clean = clean.slice(4)  # without the 30-digit id, converted column by column
    typed = table_blocks.typed_csv(clean, TABLE)
    assert typed is not None
    batch = table_blocks.columnar_batch(typed, TABLE)
    assert batch is not None
    assert batch.ids.tolist() == _expected({n: c[4:] for n, c in columns.items()})
    text = path.read_text().splitlines()
    text[4] = text[4].replace(",city-", ",x,city-", 1)  # wrong field count
    text[9] = "1,2.0,-4,a,5"  # a negative id: a key (hashed), a fixed table's bad_id
    path.write_text("\n".join(text) + "\n")
    reports = []
    for schema in (TABLE, dataclasses.replace(TABLE, keyed=False)):
        for columnar in (True, False):
            skips = SkipReport()
            list(csv_blocks(path, schema, strict=False, skips=skips, columnar=columnar))
            reports.append(skips)
    assert reports[0].counts == {"wrong_field_count": 1}
    assert reports[2].counts == {"wrong_field_count": 1, "bad_id": 1}
    for a, b in (reports[:2], reports[2:]):  # column by column as row by row
        assert a.counts == b.counts and a.first == b.first


def test_synthetic_keyed_prefixes_the_same_ids():
    spec = SyntheticSpec(num_train=300, num_test=50, table_rows=(5, 9, 20))
    fixed = next(SyntheticTask(spec).train_batches(100))
    keyed = next(SyntheticTask(dataclasses.replace(spec, keyed=True)).train_batches(100))
    assert torch.equal(keyed.labels, fixed.labels) and torch.equal(keyed.offsets, fixed.offsets)
    assert torch.equal(id_of(keyed.ids), fixed.ids)
    assert table_of(keyed.ids).tolist() == [f for f in range(3) for _ in range(100)]
    keyed.validate([5, 9, 20], keyed=True)
    fixed.validate([5, 9, 20])
    shuffled = dataclasses.replace(keyed, ids=keyed.ids.flip(0))
    with pytest.raises(ValueError, match=r"feature 0: keys of other tables \[2\]"):
        shuffled.validate([5, 9, 20], keyed=True)
    with pytest.raises(ValueError, match="out of range"):
        keyed.validate([5, 9, 20])  # the default is fixed mode's range check
