"""A range of lines parsed in bulk (io/line_examples.py): a file read in pieces, by any
number of readers, gives the examples, lines, skips and held-out rows of one read of it."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from recsync.data.batch import concat
from recsync.data.line_coin import HeldCutoff, held_cutoff, held_lines
from recsync.data.skips import SkipReport
from recsync.io.formats.criteo.rows import CriteoSchema
from recsync.io.formats.libsvm.rows import LibFFMSchema
from recsync.io.line_blocks import line_index
from recsync.io.line_examples import (
    LineSkips,
    ShareSkips,
    parse_lines,
    parse_share_piece,
    split_held,
)
from recsync.io.readers import open_dataset

FFM = LibFFMSchema(table_rows=(10, 1000, 30), dense_fields=(1,))
CRITEO = CriteoSchema(table_rows=(7, 1000) * 13)
BAD_FFM = ["", "# comment", "3 0:1:1", "1 0:1", "1 4:1:1", "1 0:1:nan", "1 0:1:1 0:1:2"]
BAD_CRITEO = ["", "2\t1", "1\tx", "1" + "\t" * 40, "1\t1\t\t\t\t\t\t\t\t\t\t\t\tzz"]
FIELDS = ("dense", "ids", "offsets", "labels")


def _ffm_line(rng: random.Random) -> str:
    label, dense = rng.choice("01"), f"{rng.random():.3f}"
    return f"{label} 0:{rng.randrange(99)}:1 1:5:{dense} 2:{rng.randrange(9)}:1"


def _criteo_line(rng: random.Random) -> str:
    counts = [str(rng.randrange(50)) if rng.random() > 0.1 else "" for _ in range(13)]
    ids = [f"{rng.getrandbits(32):08x}" if rng.random() > 0.1 else "" for _ in range(26)]
    return "\t".join([rng.choice("01"), *counts, *ids])


def _file(tmp_path, fmt: str, count: int = 700, seed: int = 0):
    rng = random.Random(seed)
    good, bad = (_ffm_line, BAD_FFM) if fmt == "libffm" else (_criteo_line, BAD_CRITEO)
    lines = [rng.choice(bad) if rng.random() < 0.1 else good(rng) for _ in range(count)]
    path = tmp_path / f"a.{fmt}"
    path.write_text("\n".join(lines) + "\n")
    return path, FFM if fmt == "libffm" else CRITEO


def _same(a, b) -> None:
    for name in FIELDS:
        assert torch.equal(getattr(a, name), getattr(b, name)), name


def _one_read(path, schema):
    skips = SkipReport()
    fmt = "libffm" if isinstance(schema, LibFFMSchema) else "criteo"
    batches = list(open_dataset(path, fmt, schema, batch_size=10**6, skips=skips))
    return concat(batches), skips


@pytest.mark.parametrize("fmt", ["libffm", "criteo"])
def test_the_whole_file_parsed_as_one_read_of_it(tmp_path, fmt):
    path, schema = _file(tmp_path, fmt)
    expected, expected_skips = _one_read(path, schema)
    index = line_index(path, 64)
    skips = LineSkips()
    parsed = parse_lines(index, schema, 0, index.num_lines, strict=False, skips=skips)
    assert parsed.batch is not None
    _same(parsed.batch, expected)
    assert (skips.counts, skips.first) == (expected_skips.counts, expected_skips.first)
    good = sorted(set(range(1, index.num_lines + 1)) - set(skips.lines))
    assert parsed.lines.tolist() == good and expected_skips.total > 0


@pytest.mark.parametrize("fmt", ["libffm", "criteo"])
@pytest.mark.parametrize("readers", [2, 3])
def test_readers_dealt_blocks_of_lines_give_one_reads_examples_and_skips(tmp_path, fmt, readers):
    path, schema = _file(tmp_path, fmt)
    expected, expected_skips = _one_read(path, schema)
    index = line_index(path, 50)
    reports = [ShareSkips() for _ in range(readers)]
    pieces = []  # (first line, parsed) of every block, whoever parsed it
    for block in range(index.num_blocks):
        reader = block % readers
        start, stop = block * 50, min(index.num_lines, block * 50 + 50)
        skips = reports[reader]
        pieces.append(parse_share_piece(index, 0, schema, start, stop, strict=False, skips=skips))
    batches = [p.batch for p in pieces if p.batch is not None]
    _same(concat(batches), expected)
    merged = reports[-1].merged(reports[:-1])
    assert merged.counts == expected_skips.counts
    assert merged.first == expected_skips.first


def test_the_held_out_rows_are_the_same_whatever_the_pieces(tmp_path):
    path, schema = _file(tmp_path, "libffm", count=900)
    index = line_index(path, 64)
    cutoff = held_cutoff(3, 0.2, 60, [index.num_lines])
    whole = parse_lines(index, schema, 0, index.num_lines, strict=False, skips=LineSkips())
    train, held = split_held(whole, 3, 0, 0.2, cutoff)
    assert train is not None and held is not None
    coin = held_lines(3, 0, 0, index.num_lines, 0.2, cutoff)
    assert held.batch_size == int(coin[whole.lines - 1].sum())  # held lines that are good
    assert train.batch_size + held.batch_size == whole.lines.size
    assert 45 <= held.batch_size <= 60  # the cap, less the bad lines among its candidates
    parts = []
    for a in range(0, index.num_lines, 37):
        stop = min(a + 37, index.num_lines)
        piece = parse_lines(index, schema, a, stop, strict=False, skips=LineSkips())
        parts.append(split_held(piece, 3, 0, 0.2, cutoff))
    _same(concat([t for t, _ in parts if t is not None]), train)
    _same(concat([h for _, h in parts if h is not None]), held)
    none_held = split_held(whole, 3, 0, 0.0, HeldCutoff(None, None))
    assert none_held[1] is None and none_held[0] is whole.batch
    assert np.array_equal(whole.lines, np.sort(whole.lines))
