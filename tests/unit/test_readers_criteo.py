"""Criteo TSV: parsing (recsync.io.formats.criteo.rows) and file opening (recsync.io.readers)."""

from __future__ import annotations

import gzip
import math

import pytest
import torch

from recsync.data.skips import SkipReport
from recsync.errors import DataError
from recsync.io.formats.criteo.rows import CriteoSchema, criteo_batches
from recsync.io.readers import open_dataset

ROWS = (1000,) * 26
SCHEMA = CriteoSchema(ROWS)


def criteo_line(label: str, ints: list[str], cats: list[str]) -> str:
    ints = ints + [""] * (13 - len(ints))
    cats = cats + [""] * (26 - len(cats))
    return "\t".join([label, *ints, *cats]) + "\n"


def log1p32(values: list[float]) -> torch.Tensor:
    return torch.tensor([math.log1p(v) for v in values], dtype=torch.float32)


FULL = criteo_line("1", [str(i) for i in range(13)], [f"{i:08x}" for i in range(1, 27)])
EMPTY_FIELDS = criteo_line("0", ["", "5", "-3"], ["", "ff"])  # empty int, negative, empty cat
# trailing empty fields stripped: 16 fields instead of 40
STRIPPED = criteo_line("1", ["7", "", "2"], ["a1b2", "FF"]).rstrip("\n").rstrip("\t") + "\n"


def read(lines, batch_size=8, strict=False, skips=None):
    return list(
        criteo_batches(
            lines, SCHEMA, source="day_0.tsv", batch_size=batch_size, strict=strict, skips=skips
        )
    )


def test_good_lines_dense_ids_offsets_labels():
    (batch,) = read([FULL, EMPTY_FIELDS, STRIPPED.replace("\n", "\r\n")])
    assert batch.labels.tolist() == [1.0, 0.0, 1.0]
    assert batch.dense.dtype == torch.float32 and batch.dense.shape == (3, 13)
    assert torch.equal(batch.dense[0], log1p32(list(range(13))))
    assert torch.equal(batch.dense[1], log1p32([0, 5, 0] + [0] * 10))  # empty -> 0, -3 -> 0
    assert torch.equal(batch.dense[2], log1p32([7, 0, 2] + [0] * 10))
    # feature-major bags: feature f of example b is bag f*3+b
    lengths = batch.bag_lengths().reshape(26, 3)
    assert lengths[:, 0].tolist() == [1] * 26
    assert lengths[:, 1].tolist() == [0, 1] + [0] * 24  # empty categorical -> empty bag
    assert lengths[:, 2].tolist() == [1, 1] + [0] * 24  # stripped trailing fields -> empty
    assert batch.offsets[0] == 0 and batch.offsets[-1] == batch.ids.numel() == 26 + 1 + 2
    ids_f0 = batch.ids[batch.offsets[0] : batch.offsets[3]].tolist()
    assert ids_f0 == [1 % 1000, 0xA1B2 % 1000]
    ids_f1 = batch.ids[batch.offsets[3] : batch.offsets[6]].tolist()
    assert ids_f1 == [2, 0xFF % 1000, 0xFF % 1000]
    batch.validate(list(ROWS))


def test_stripped_line_has_16_fields():
    assert STRIPPED.count("\t") == 15


def test_label_only_line_is_all_empty():
    (batch,) = read(["0\n"])
    assert batch.labels.tolist() == [0.0]
    assert batch.dense.abs().sum() == 0 and batch.ids.numel() == 0
    assert batch.offsets.tolist() == [0] * 27


def test_modulo_into_small_tables():
    schema = CriteoSchema([7] * 26)
    line = criteo_line("1", [], ["ffffffff"] * 26)
    (batch,) = list(criteo_batches([line], schema, batch_size=4))
    assert batch.ids.tolist() == [0xFFFFFFFF % 7] * 26


def test_batches_keep_every_line_in_order_last_smaller():
    lines = [criteo_line(str(i % 2), [str(i)], []) for i in range(7)]
    batches = read(lines, batch_size=3)
    assert [b.batch_size for b in batches] == [3, 3, 1]
    firsts = torch.cat([b.dense[:, 0] for b in batches])
    assert torch.equal(firsts, log1p32(list(range(7))))


BAD_LINES = {
    "empty_line": ("\n", ""),
    "missing_label": (criteo_line("", ["1"], []), "label"),
    "bad_label": (criteo_line("2", ["1"], []), "label"),
    "too_many_fields": (FULL.rstrip("\n") + "\textra\n", ""),
    "bad_integer": (criteo_line("1", ["1", "x3"], []), "I2"),
    "bad_hex": (criteo_line("1", [], ["abc", "zz"]), "C2"),
}


@pytest.mark.parametrize("reason", sorted(BAD_LINES))
def test_malformed_line_lenient_skips_and_counts(reason):
    bad, _ = BAD_LINES[reason]
    skips = SkipReport()
    (batch,) = read([FULL, bad, EMPTY_FIELDS, bad], skips=skips)
    assert batch.labels.tolist() == [1.0, 0.0]  # both good lines, in order
    assert skips.counts == {reason: 2}
    assert "day_0.tsv" in skips.first[reason] and "line 2" in skips.first[reason]
    assert skips.as_dict()["total"] == 2 and reason in skips.summary()


@pytest.mark.parametrize("reason", sorted(BAD_LINES))
def test_malformed_line_strict_raises_naming_file_line_field(reason):
    bad, field = BAD_LINES[reason]
    with pytest.raises(DataError) as info:
        read([FULL, FULL, bad], strict=True)
    error = info.value
    assert (error.source, error.line, error.field) == ("day_0.tsv", 3, field)
    assert "file day_0.tsv" in str(error) and "line 3" in str(error) and reason in str(error)
    if field:
        assert f"field {field}" in str(error)


def test_open_dataset_plain_and_gzip_files_batch_across_files(tmp_path):
    plain = tmp_path / "day_0.tsv"
    plain.write_text(FULL + "bad\n" + EMPTY_FIELDS)
    packed = tmp_path / "day_1.tsv.gz"
    with gzip.open(packed, "wt") as f:
        f.write(STRIPPED + FULL)
    reader = open_dataset([plain, packed], "auto", SCHEMA, batch_size=3)
    batches = list(reader)
    assert [b.batch_size for b in batches] == [3, 1]
    assert torch.cat([b.labels for b in batches]).tolist() == [1.0, 0.0, 1.0, 1.0]
    assert reader.skips.counts == {"bad_label": 1}
    assert str(plain) in reader.skips.first["bad_label"]


def test_open_dataset_strict_names_the_gzip_file(tmp_path):
    packed = tmp_path / "day_2.gz"
    with gzip.open(packed, "wt") as f:
        f.write(FULL + criteo_line("1", [], ["nothex"]))
    with pytest.raises(DataError, match=r"day_2\.gz, line 2, field C1"):
        list(open_dataset(packed, "criteo", SCHEMA, batch_size=4, strict=True))


def test_schema_validation():
    with pytest.raises(ValueError):
        CriteoSchema([10, 0])
    with pytest.raises(ValueError):
        read([FULL], batch_size=0)


@pytest.mark.parametrize("damage", ["truncated", "corrupt"])
def test_a_damaged_gzip_file_is_an_error_naming_it_and_the_last_good_line(tmp_path, damage):
    packed = tmp_path / "day_3.tsv.gz"
    with gzip.open(packed, "wt") as f:
        f.write("".join(FULL for _ in range(4000)))
    data = packed.read_bytes()
    half = len(data) // 2
    if damage == "truncated":
        packed.write_bytes(data[:half])
    else:
        packed.write_bytes(data[:half] + bytes(64) + data[half + 64 :])
    with pytest.raises(DataError, match=r"day_3\.tsv\.gz: cannot read past line \d+") as error:
        list(open_dataset(packed, "criteo", SCHEMA, batch_size=64))
    assert "gzip" in str(error.value)


def test_a_stray_carriage_return_stays_in_its_line_and_keeps_the_line_numbers(tmp_path):
    plain = tmp_path / "day_4.tsv"
    stray = criteo_line("1", ["3", "4\r5"], ["ab"])  # a \r inside an integer field
    plain.write_bytes((FULL + stray + FULL + criteo_line("x", [], []) + FULL).encode())
    reader = open_dataset(plain, "criteo", SCHEMA, batch_size=8)
    assert sum(b.batch_size for b in reader) == 3
    assert reader.skips.counts == {"bad_integer": 1, "bad_label": 1}
    assert "line 2" in reader.skips.first["bad_integer"]
    assert "line 4" in reader.skips.first["bad_label"]
    crlf = tmp_path / "day_5.tsv"
    crlf.write_bytes((FULL + FULL).replace("\n", "\r\n").encode())  # Windows line ends
    assert sum(b.batch_size for b in open_dataset(crlf, "criteo", SCHEMA, batch_size=8)) == 2
