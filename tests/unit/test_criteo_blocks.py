"""Criteo lines read a block at a time, column by column, give the very batches, skips and
errors of the line parser, on plain blocks and on blocks that need the line parser."""

from __future__ import annotations

import random

import pytest
import torch

from recsync.data.batch import rebatch
from recsync.data.skips import SkipReport
from recsync.errors import DataError
from recsync.io.formats.criteo import blocks as criteo_blocks
from recsync.io.formats.criteo.rows import CriteoSchema
from recsync.io.formats.criteo.scan import scan_block
from recsync.io.line_bytes import block_bytes
from recsync.io.readers import open_dataset

SCHEMA = CriteoSchema(table_rows=(7, 1000, 2**31 - 1) * 8 + (50, 3))
FIELDS = ("dense", "ids", "offsets", "labels")


def _line(rng: random.Random) -> str:
    label = rng.choice("01")
    integers = [
        rng.choice(["", "0", "-3", str(rng.randint(1, 10**4)), str(2**60 + rng.randint(0, 99))])
        for _ in range(13)
    ]
    hexes = [
        rng.choice(["", f"{rng.getrandbits(32):08x}", f"{rng.getrandbits(40):X}", "0" * 20 + "f"])
        for _ in range(26)
    ]
    return "\t".join([label, *integers, *hexes]) + rng.choice(["\n", "\r\n"])


def all_plain(lines: list[str], schema: CriteoSchema) -> bool:
    """Whether the block scanner reads every line itself (none goes to the row parser)."""
    plain = scan_block(*block_bytes(lines), schema.num_integer, len(schema.table_rows))[0]
    return bool(plain.all())


def _lines(count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [_line(rng) for _ in range(count)]


def _both(lines, monkeypatch, strict=False):
    monkeypatch.setattr(criteo_blocks, "BLOCK_LINES", 16)
    out = []
    for columnar in (True, False):
        skips = SkipReport()
        blocks = criteo_blocks.criteo_blocks(
            enumerate(lines, start=1),
            SCHEMA,
            source="day_0.tsv",
            strict=strict,
            skips=skips,
            columnar=columnar,
        )
        out.append((list(rebatch(blocks, 10)), skips))
    return out


def _same(mine, theirs) -> None:
    assert len(mine) == len(theirs) > 0
    for a, b in zip(mine, theirs, strict=True):
        for name in FIELDS:
            x, y = getattr(a, name), getattr(b, name)
            assert x.dtype == y.dtype and torch.equal(x, y), name


def test_plain_blocks_convert_column_by_column_to_the_line_parsers_batches(monkeypatch):
    lines = _lines(200, 1)
    (fast, fast_skips), (slow, slow_skips) = _both(lines, monkeypatch)
    _same(fast, slow)
    assert fast_skips.counts == slow_skips.counts == {}
    assert all_plain(lines, SCHEMA)  # the scanner took every line: the fast path ran


@pytest.mark.parametrize(
    ("edit", "reason", "field"),
    [
        (lambda fields: ["", *fields[1:]], "missing_label", "label"),
        (lambda fields: ["2", *fields[1:]], "bad_label", "label"),
        (lambda fields: [*fields[:3], "1.5", *fields[4:]], "bad_integer", "I3"),
        (lambda fields: [*fields[:20], "xyz", *fields[21:]], "bad_hex", "C7"),
        (lambda fields: [*fields, "extra"], "too_many_fields", None),
        (lambda fields: [], "empty_line", None),
        (lambda fields: fields[:30], None, None),  # trailing empty fields stripped: valid
        (lambda fields: ["1"], None, None),  # the label alone
        (lambda fields: ["0", ""], None, None),
        (lambda fields: [*fields[:5], "-", *fields[6:]], "bad_integer", "I5"),
        (lambda fields: [*fields[:5], "-0", *fields[6:]], None, None),
        (lambda fields: [*fields[:2], "9" * 19, *fields[3:]], None, None),  # a uint64
        (lambda fields: [*fields[:2], "9" * 20, *fields[3:]], None, None),  # past it
        (lambda fields: [*fields[:2], "0" * 30 + "7", *fields[3:]], None, None),
        (lambda fields: [*fields[:2], "1\r2", *fields[3:]], "bad_integer", "I2"),
        (lambda fields: [*fields[:2], "\u0663", *fields[3:]], "bad_integer", "I2"),  # Arabic 3
        (lambda fields: [*fields[:20], "f" * 17, *fields[21:]], None, None),  # past a uint64
        (lambda fields: [*fields[:20], "0" * 40 + "f", *fields[21:]], None, None),
        (lambda fields: [*fields[:20], "\u00e9", *fields[21:]], "bad_hex", "C7"),
        (lambda fields: [*fields[:20], "0x1f", *fields[21:]], "bad_hex", "C7"),
        (lambda fields: [*fields[:39], fields[39] + "\r\r"], None, None),  # cut as \r\n is
        (lambda fields: [" 1", *fields[1:]], "bad_label", "label"),
    ],
)
def test_a_block_with_an_odd_line_goes_line_by_line_with_the_same_result(
    monkeypatch, edit, reason, field
):
    lines = _lines(100, 2)
    fields = lines[37].rstrip("\r\n").split("\t")
    lines[37] = "\t".join(edit(fields)) + "\n"
    (fast, fast_skips), (slow, slow_skips) = _both(lines, monkeypatch)
    _same(fast, slow)
    assert fast_skips.counts == slow_skips.counts == ({reason: 1} if reason else {})
    assert fast_skips.first == slow_skips.first
    if reason:
        where = f"line 38, field {field}" if field else "line 38"
        assert where in fast_skips.first[reason]
        with pytest.raises(DataError, match=where):
            _both(lines, monkeypatch, strict=True)


def test_a_gzip_file_through_open_dataset_reads_every_line_once(tmp_path):
    import gzip

    lines = _lines(300, 3)
    path = tmp_path / "day_0.gz"
    with gzip.open(path, "wt", newline="") as f:
        f.writelines(lines)
    batches = list(open_dataset(path, "criteo", SCHEMA, batch_size=64))
    assert [b.batch_size for b in batches] == [64, 64, 64, 64, 44]
    labels = torch.cat([b.labels for b in batches]).tolist()
    assert labels == [float(line[0]) for line in lines]
