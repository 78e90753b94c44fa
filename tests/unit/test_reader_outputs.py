"""Every format's reader gives, bit for bit, the batches, skip counts and first messages it
gave before its block parsers were compiled (the digests below were taken at 7392764, the
commit before), on realistic files: Zipf-like ids, counts of every size, empty fields, and
a few bad lines of every kind among 12,000 lines (more than one block), in fixed and in
keyed mode."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import random
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq
import pytest

from recsync.data.skips import SkipReport
from recsync.io.formats.criteo.rows import CriteoSchema
from recsync.io.formats.libsvm.rows import LibFFMSchema, LibSVMSchema
from recsync.io.formats.tabular.rows import TabularSchema
from recsync.io.readers import open_dataset

LINES = 12_000
BAD_EVERY = 97  # about one line in a hundred is odd or bad


def _zipf(rng: random.Random, n: int) -> int:
    return min(int(rng.paretovariate(1.1)), n) - 1


def _criteo_line(rng: random.Random, number: int) -> str:
    counts = [
        rng.choice(["", "0", "-1", str(_zipf(rng, 10**6)), str(rng.randrange(10**9))])
        for _ in range(13)
    ]
    ids = ["" if rng.random() < 0.08 else f"{_zipf(rng, 10**7) * 2654435761 % 2**32:08x}"]
    ids += [f"{_zipf(rng, 10**5) * 40503:x}" for _ in range(25)]
    line = "\t".join([rng.choice("01"), *counts, *ids])
    if number % BAD_EVERY == 0:
        line = rng.choice(
            [
                "",  # empty_line
                "2" + line[1:],  # bad_label
                "\t" + line[2:],  # missing_label
                line.replace("\t", "\t1.5\t", 1),  # too_many_fields... or bad_integer
                line.rsplit("\t", 1)[0] + "\tzz",  # bad_hex
                line + "\textra",  # too_many_fields
                line.rsplit("\t", 5)[0],  # trailing fields stripped: valid
                line.rsplit("\t", 1)[0] + "\t" + "0" * 18 + "abc",  # a long hex: valid
                line.replace("\t", "\t" + "9" * 25 + "\t", 1).rsplit("\t", 1)[0],  # big count
                line + "\r",  # \r\n line end: valid
                line.replace("\t", "\t\u00e9\t", 1).rsplit("\t", 1)[0],  # non-ASCII: bad
            ]
        )
    return line + "\n"


def _svm_line(rng: random.Random, number: int, ffm: bool) -> str:
    tokens = [rng.choice(["0", "1", "-1", "+1"])]
    if ffm:
        tokens += [f"{f}:{f}:{rng.random() * 10:.4f}" for f in range(2)]
        tokens += [f"{f}:{_zipf(rng, 10**6)}:1" for f in range(2, 10) if rng.random() > 0.05]
    else:
        tokens += [f"{i}:{rng.random():.6g}" for i in range(13) if rng.random() >= 0.1]
        ids = sorted({13 + _zipf(rng, 10**7) for _ in range(26)})
        tokens += [f"{i}:1" for i in ids]
    line = " ".join(tokens)
    if number % BAD_EVERY == 0:
        line = rng.choice(
            [
                "",
                "# a comment",
                "x " + line.split(" ", 1)[1],  # bad_label
                line + " 5:nan",
                line + " 7:1e999",
                line + " 3:abc",
                line + " :1",
                line + (" 99:1:1" if ffm else " 1:2"),  # a bad field / a duplicate index
                line + "\t",
                line.replace(" ", "  "),
            ]
        )
    return line + "\n"


def _table(rng: random.Random, hashed: bool) -> dict[str, list]:
    columns: dict[str, list] = {"label": [rng.choice([0, 1]) for _ in range(LINES)]}
    for j in range(4):
        columns[f"I{j}"] = [
            None if rng.random() < 0.05 else float(_zipf(rng, 10**4)) for _ in range(LINES)
        ]
    for f in range(6):
        values = [_zipf(rng, 10**6) * 7919 for _ in range(LINES)]
        columns[f"C{f}"] = (
            [f"v{v}\u00e9" if f % 2 else str(v) for v in values] if hashed else values
        )
    return columns


def _spoil(columns: dict[str, list], rng: random.Random) -> None:
    """A few bad values: null labels, infinite dense values, empty hashed strings."""
    for row in range(0, LINES, BAD_EVERY * 7):
        kind = rng.randrange(3)
        if kind == 0:
            columns["label"][row] = None
        elif kind == 1:
            columns["I1"][row] = float("inf")
        elif isinstance(columns["C1"][row], str):
            columns["C1"][row] = ""


def _write(kind: str, tmp: Path) -> tuple[Path, str, object]:
    rng = random.Random(kind)
    if kind == "criteo":
        path = tmp / "day.tsv"
        path.write_text("".join(_criteo_line(rng, n) for n in range(1, LINES + 1)))
        return path, "criteo", CriteoSchema(table_rows=(10**6,) * 26)
    if kind in ("libsvm", "libffm"):
        ffm = kind == "libffm"
        path = tmp / f"data.{kind}"
        path.write_text("".join(_svm_line(rng, n, ffm) for n in range(1, LINES + 1)))
        if ffm:
            return path, kind, LibFFMSchema(table_rows=(10**5,) * 8, dense_fields=(0, 1))
        return path, kind, LibSVMSchema(table_rows=1000, dense_indices=tuple(range(13)))
    fmt, hashed = kind.split("_")[0], kind.endswith("hashed")
    columns = _table(rng, hashed)
    _spoil(columns, rng)
    table = pa.table(columns)
    path = tmp / f"data.{fmt}"
    if fmt == "csv":
        pa_csv.write_csv(table, path)
        lines = path.read_text().splitlines(keepends=True)
        for row in range(BAD_EVERY, LINES, BAD_EVERY * 5):
            fields = lines[row].split(",")
            spoilt = [fields[:-1] + ["x", fields[-1]], [fields[0], "abc", *fields[2:]]]
            lines[row] = ",".join(rng.choice(spoilt))  # wrong_field_count or bad_value
        path.write_text("".join(lines))
    else:
        pq.write_table(table, path, row_group_size=5000)
    categorical = tuple(f"C{f}" for f in range(6))
    schema = TabularSchema(
        "label",
        tuple(f"I{j}" for j in range(4)),
        categorical,
        (1000, 10**6, 50, 10**5, 7, 2**31 - 1),
        hashed=categorical if hashed else (),
        hash_seed=17,
    )
    return path, fmt, schema


def _digest(path: Path, fmt: str, schema: object) -> str:
    skips = SkipReport()
    digest = hashlib.sha256()
    examples = 0
    for batch in open_dataset(path, fmt, schema, batch_size=256, skips=skips):  # type: ignore[arg-type]
        examples += batch.batch_size
        for name in ("dense", "ids", "offsets", "labels"):
            tensor = getattr(batch, name)
            digest.update(str(tensor.dtype).encode() + tensor.numpy().tobytes())
    first = {reason: text.replace(str(path), path.name) for reason, text in skips.first.items()}
    digest.update(json.dumps([skips.counts, first], sort_keys=True).encode())
    return f"{examples} {digest.hexdigest()[:16]}"


BEFORE = {
    ("criteo", False): "11926 b173fd5bf1e424a8",
    ("criteo", True): "11926 3ccf42454167d43d",
    ("csv", False): "11960 096a0e99cad025fa",
    ("csv", True): "11960 4197b9ff12e68c37",
    ("csv_hashed", False): "11963 f9d094a56478a119",
    ("csv_hashed", True): "11963 9db86490e47fd9b3",
    ("libffm", False): "11904 48d17ede7141ba7c",  # bad_field says what to set
    ("libffm", True): "11904 fc32692cabd109ed",
    ("libsvm", False): "11906 f46bdd6edd1b6892",
    ("libsvm", True): "11906 087c555e5025e045",
    ("parquet", False): "11991 0900151aba1e7ec8",
    ("parquet", True): "11991 f6fddfd9b0ecc024",
    ("parquet_hashed", False): "11986 5f5726fcb23c4178",
    ("parquet_hashed", True): "11986 5774bbe57b1725d1",
}


@pytest.mark.parametrize(("kind", "keyed"), sorted(BEFORE))
def test_every_reader_reads_a_realistic_file_as_it_did_before(tmp_path, kind, keyed):
    path, fmt, schema = _write(kind, tmp_path)
    schema = dataclasses.replace(schema, keyed=keyed)  # type: ignore[type-var]
    assert _digest(path, fmt, schema) == BEFORE[kind, keyed]
