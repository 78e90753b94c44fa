"""libSVM and libffm lines read a block at a time (io/formats/libsvm/blocks.py) give the very
batches, skips, messages, line numbers and errors of the row parser, in fixed and keyed
mode, on clean blocks and on blocks with every kind of bad line."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from recsync.data.batch import rebatch
from recsync.data.skips import SkipReport
from recsync.errors import DataError
from recsync.io.formats.libsvm import blocks as libsvm_blocks
from recsync.io.formats.libsvm.rows import (
    LibFFMSchema,
    LibSVMSchema,
    libffm_batches,
    libsvm_batches,
)
from recsync.io.formats.libsvm.scan import scan_block
from recsync.io.readers import open_dataset

SVM = LibSVMSchema(table_rows=1000, dense_indices=(3, 1))
FFM = LibFFMSchema(table_rows=(10, 2**31 - 1, 30), dense_fields=(1,))
SCHEMAS = {
    "svm": SVM,
    "svm_keyed": LibSVMSchema(table_rows=1, dense_indices=(3, 1), keyed=True),
    "ffm": FFM,
    "ffm_keyed": LibFFMSchema(table_rows=(1, 1, 1), dense_fields=(1,), keyed=True),
}
FIELDS = ("dense", "ids", "offsets", "labels")
VALUES = ["1", "0", "0.5", "-2.25", "1e-3", "3E+2", "-0", "0.1234567890123456789", "7.5e-320"]
INDICES = ["0", "1", "3", "17", "0042", str(2**56 + 5), "123456789012345678"]
# every reason of io/formats/libsvm/rows.py, and odd lines the row parser accepts
BAD_SVM = [
    "",
    "   \t",
    "# only a comment",
    "5:1 7:1",
    "2 5:1",
    "yes 5:1",
    "1 5",
    "1 5:1:2",
    "1 -5:1",
    "1 x:1",
    "1 5:abc",
    "1 5:nan",
    "1 5:inf",
    "1 5:1e999",
    "1 5:1 5:2",
    "1 3:1 3:0",
    "1.0 5:1",
    "-0 5:1",
    "1 5:1 # comment",
    "1 5:+1.5",
    "1 5:.5",
    "1\u00a05:1",
    "1 5:1\x0b9:1",
    "1 5:\ufffd",
    "1 " + "9" * 30 + ":1",
]
BAD_FFM = [
    "",
    "# comment",
    "0:1:1",
    "3 0:1:1",
    "1 0:1",
    "1 0:1:1:1",
    "1 4:1:1",
    "1 9999999999:1:1",
    "1 x:1:1",
    "1 0:-1:1",
    "1 0:1:nan",
    "1 0:1:-inf",
    "1 0:1:1 0:1:2",
    "1 1:0:1 1:2:1",
    "+1.0 0:1:1",
    "1 0:1:1 #",
    "1 0:1:1_0",
    "1 0:" + "1" * 25 + ":1",
]


def _clean_line(rng: random.Random, ffm: bool) -> str:
    label = rng.choice(["0", "1", "-1", "+1"])
    tokens, used = [], set()
    for _ in range(rng.randint(0, 12)):
        field = rng.randrange(4)
        index = rng.choice(INDICES + [str(rng.randrange(10**6))])
        where = (field, int(index) if not ffm or field != 1 else -1) if ffm else int(index)
        if where in used:
            continue
        used.add(where)
        value = rng.choice(VALUES)
        tokens.append(f"{field}:{index}:{value}" if ffm else f"{index}:{value}")
    space = rng.choice([" ", "  ", "\t", " \t "])
    return space.join([label, *tokens]) + rng.choice(["\n", "\r\n", " \n"])


def _lines(count: int, seed: int, ffm: bool, bad_share: float) -> list[str]:
    rng = random.Random(seed)
    bad = BAD_FFM if ffm else BAD_SVM
    return [
        rng.choice(bad) + "\n" if rng.random() < bad_share else _clean_line(rng, ffm)
        for _ in range(count)
    ]


def _read(lines, schema, bulk, strict=False):
    skips = SkipReport()
    blocks = libsvm_blocks.libsvm_blocks(
        enumerate(lines, start=1), schema, source="a", strict=strict, skips=skips, bulk=bulk
    )
    return list(rebatch(blocks, 10)), skips


def _rows(lines, schema, strict=False, source="a"):
    skips = SkipReport()
    read = libffm_batches if isinstance(schema, LibFFMSchema) else libsvm_batches
    batches = read(lines, schema, source=source, batch_size=10, strict=strict, skips=skips)
    return list(batches), skips


def _same(mine, theirs) -> None:
    assert len(mine) == len(theirs)
    for a, b in zip(mine, theirs, strict=True):
        for name in FIELDS:
            x, y = getattr(a, name), getattr(b, name)
            assert x.dtype == y.dtype and x.shape == y.shape and torch.equal(x, y), name


@pytest.mark.parametrize("name", sorted(SCHEMAS))
@pytest.mark.parametrize("bad_share", [0.0, 0.3])
def test_blocks_give_the_row_parsers_batches_and_skips(monkeypatch, name, bad_share):
    monkeypatch.setattr(libsvm_blocks, "BLOCK_LINES", 16)
    schema = SCHEMAS[name]
    lines = _lines(400, 7, name.startswith("ffm"), bad_share)
    (fast, fast_skips), (slow, slow_skips) = _read(lines, schema, True), _rows(lines, schema)
    _same(fast, slow)
    assert sum(b.batch_size for b in fast) > 100
    assert fast_skips.counts == slow_skips.counts and fast_skips.first == slow_skips.first
    assert (fast_skips.total > 0) == (bad_share > 0)
    _same(_read(lines, schema, False)[0], slow)


@pytest.mark.parametrize("ffm", [False, True])
def test_clean_lines_are_all_plain_to_the_scanner(ffm):
    lines = _lines(200, 3, ffm, 0.0)
    parser = libsvm_blocks.BlockParser(FFM if ffm else SVM)
    buf = np.frombuffer("".join(lines).encode(), dtype=np.uint8)
    ends = np.cumsum([len(line) for line in lines])
    plain = scan_block(buf, ends, parser.num_fields, parser.is_dense_field)[0]
    assert plain.all()


@pytest.mark.parametrize("ffm", [False, True])
def test_every_bad_line_alone_gives_the_row_parsers_skip_or_example(ffm):
    schema = FFM if ffm else SVM
    for bad in BAD_FFM if ffm else BAD_SVM:
        lines = ["1 0:5:1\n" if ffm else "1 5:1\n", bad + "\n", "0 2:3:1" if ffm else "0 3:2"]
        (fast, fast_skips), (slow, slow_skips) = _read(lines, schema, True), _rows(lines, schema)
        _same(fast, slow)
        assert fast_skips.counts == slow_skips.counts and fast_skips.first == slow_skips.first
        if fast_skips.total:
            assert "line 2" in next(iter(fast_skips.first.values()))
        if slow_skips.total:
            with pytest.raises(DataError) as fast_error:
                _read(lines, schema, True, strict=True)
            with pytest.raises(DataError) as slow_error:
                _rows(lines, schema, strict=True)
            assert str(fast_error.value) == str(slow_error.value)
            assert fast_error.value.line == 2
        else:
            _same(_read(lines, schema, True, strict=True)[0], _rows(lines, schema, strict=True)[0])


def test_a_file_through_open_dataset_reads_every_line_once(tmp_path):
    lines = _lines(3000, 5, True, 0.05)
    path = tmp_path / "day.ffm"
    path.write_text("".join(lines))
    skips = SkipReport()
    batches = list(open_dataset(path, "libffm", FFM, batch_size=64, skips=skips))
    expected, expected_skips = _rows(lines, FFM, source=str(path))
    assert sum(b.batch_size for b in batches) == sum(b.batch_size for b in expected)
    assert torch.equal(
        torch.cat([b.labels for b in batches]), torch.cat([b.labels for b in expected])
    )
    assert skips.counts == expected_skips.counts and skips.first == expected_skips.first


_TOKEN = st.one_of(
    st.sampled_from(VALUES + INDICES + ["", ":", "#", "nan", "1:1", "0:0:0", "\t", "\r"]),
    st.text(alphabet="0123456789:-.eE+# x", max_size=8),
)


@settings(max_examples=150, deadline=None)
@given(
    ffm=st.booleans(),
    keyed=st.booleans(),
    lines=st.lists(st.lists(_TOKEN, max_size=6).map(" ".join), min_size=1, max_size=12),
)
def test_property_any_lines_read_the_same_both_ways(ffm, keyed, lines):
    schema = SCHEMAS[("ffm" if ffm else "svm") + ("_keyed" if keyed else "")]
    lines = [line + "\n" for line in lines]
    (fast, fast_skips), (slow, slow_skips) = _read(lines, schema, True), _rows(lines, schema)
    _same(fast, slow)
    assert fast_skips.counts == slow_skips.counts and fast_skips.first == slow_skips.first


@given(value=st.floats(allow_nan=False, allow_infinity=False).map(repr))
@settings(max_examples=200, deadline=None)
def test_property_values_round_as_pythons_float(value):
    lines = [f"1 3:{value} 7:1\n"]
    (fast, _), (slow, _) = _read(lines, SVM, True), _rows(lines, SVM)
    _same(fast, slow)
