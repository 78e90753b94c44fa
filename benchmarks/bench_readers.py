"""Examples/s of reading a data file into batches a block at a time, column by column (what
the reader does), against the row parser on the same blocks (what it did). The file is the
synthetic task: as Parquet (`--format csv`: as CSV) with the columns `recsync data synth`
writes (13 integer dense columns, 26 integer id columns; `--hashed`: the ids as strings,
hashed with mmh3), or as Criteo TSV (`--format criteo`: the 13 counts, the 26 ids in
hexadecimal, a tenth of the fields empty), or libffm (`--format libffm`: 10 fields, 2 dense
with decimal values, 8 categorical) or libSVM (`--format libsvm`: 13 dense indices with
decimal values, 26 categorical indices) lines of random values; `--keyed`: ids as the
feature-prefixed keys of hash tables (data/keys.py), what file data trains on by default.
Repeats alternate between the two; prints one JSON object: examples/s and reader CPU
microseconds per example of each (process time: every thread of the process; medians, and
the columnar runs' lowest and highest, after a first read, reported apart, that loads
compiled code once a process), `ratio` = columnar / rows (examples/s). Torch runs one
thread, as in the reader's process (io/background.py).

`--all FILE`: every format (Parquet and CSV also with hashed string ids), fixed and keyed,
written to FILE as JSON with the machine's load average before and after (the CPU time of
a loaded machine runs higher), and as a Markdown table beside it (FILE with .md:
reports/readers/results.md; the docs site renders it from the JSON).

`--store [--format parquet criteo] [--mbit 1000] [--delay-ms 2]`: readers on hosts of the
box reading from an object store on another host against local files (store_readers.py;
needs root and iproute2)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq
import torch

from recsync.app.cli.data import Split, write_synthetic_parquet
from recsync.data.batch import Batch, rebatch
from recsync.data.skips import SkipReport
from recsync.data.synthetic import SyntheticSpec, SyntheticTask
from recsync.io.formats.criteo.blocks import criteo_blocks
from recsync.io.formats.criteo.rows import CriteoSchema
from recsync.io.formats.libsvm.blocks import libsvm_blocks
from recsync.io.formats.libsvm.rows import LibFFMSchema, LibSVMSchema
from recsync.io.formats.tabular.blocks import parquet_blocks
from recsync.io.formats.tabular.rows import TabularSchema
from recsync.io.readers import csv_blocks, open_text

Schema = TabularSchema | CriteoSchema | LibSVMSchema | LibFFMSchema
FFM_FIELDS, FFM_DENSE, SVM_DENSE, SVM_CATEGORICAL = 10, (0, 5), 13, 26


def blocks(path: Path, schema: Schema, columnar: bool) -> Iterator[Batch]:
    if isinstance(schema, LibSVMSchema | LibFFMSchema):
        with open_text(path) as lines:
            yield from libsvm_blocks(
                enumerate(lines, start=1),
                schema,
                source=str(path),
                strict=False,
                skips=SkipReport(),
                bulk=columnar,
            )
        return
    if isinstance(schema, CriteoSchema):
        with open_text(path) as lines:
            numbered = enumerate(lines, start=1)
            skips = SkipReport()
            yield from criteo_blocks(
                numbered, schema, source=str(path), strict=False, skips=skips, columnar=columnar
            )
        return
    read = csv_blocks if path.suffix == ".csv" else parquet_blocks
    yield from read(path, schema, strict=False, skips=SkipReport(), columnar=columnar)


def examples_per_second(path: Path, schema: Schema, columnar: bool) -> tuple[float, float]:
    """Examples/s and reader CPU microseconds per example of one read of the file."""
    start, cpu, examples = time.perf_counter(), time.process_time(), 0
    for batch in rebatch(blocks(path, schema, columnar), 256):
        examples += batch.batch_size
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    return examples / seconds, 1e6 * cpu / examples


def write_libffm(count: int, path: Path) -> LibFFMSchema:
    """`count` libffm lines of FFM_FIELDS fields: FFM_DENSE dense, the others one id each."""
    rng = random.Random(0)
    with open(path, "w") as out:
        for _ in range(count):
            tokens = [rng.choice(("0", "1"))]
            for field in range(FFM_FIELDS):
                if field in FFM_DENSE:
                    tokens.append(f"{field}:{field}:{rng.random() * 10:.4f}")
                else:
                    tokens.append(f"{field}:{rng.randrange(10**6)}:1")
            out.write(" ".join(tokens) + "\n")
    rows = (10**5,) * (FFM_FIELDS - len(FFM_DENSE))
    return LibFFMSchema(table_rows=rows, dense_fields=FFM_DENSE)


def write_libsvm(count: int, path: Path) -> LibSVMSchema:
    """`count` libSVM lines: SVM_DENSE dense indices (a tenth absent), SVM_CATEGORICAL ids."""
    rng = random.Random(0)
    with open(path, "w") as out:
        for _ in range(count):
            tokens = [rng.choice(("-1", "+1"))]
            tokens += [f"{i}:{rng.random():.6g}" for i in range(SVM_DENSE) if rng.random() >= 0.1]
            ids = rng.sample(range(SVM_DENSE, 10**7), SVM_CATEGORICAL)
            tokens += [f"{i}:1" for i in sorted(ids)]
            out.write(" ".join(tokens) + "\n")
    return LibSVMSchema(table_rows=10**6, dense_indices=tuple(range(SVM_DENSE)))


def write_criteo(spec: SyntheticSpec, path: Path) -> None:
    """The synthetic task as Criteo lines (a tenth of the fields empty, at random)."""
    rng = random.Random(0)
    with open(path, "w") as out:
        for batch in SyntheticTask(spec).train_batches(4096):
            counts = batch.dense.double().expm1().round().long().tolist()
            ids = batch.ids.reshape(batch.num_features, batch.batch_size).t().tolist()
            for label, row_counts, row_ids in zip(batch.labels.tolist(), counts, ids, strict=True):
                fields = [str(int(label))]
                fields += ["" if rng.random() < 0.1 else str(c) for c in row_counts]
                fields += ["" if rng.random() < 0.1 else f"{i * 2654435761:08x}" for i in row_ids]
                out.write("\t".join(fields) + "\n")


@dataclasses.dataclass(frozen=True)
class Case:
    """One file to read: its format, and whether its ids are hashed strings or keys."""

    format: str
    hashed: bool = False
    keyed: bool = False


ALL_CASES = tuple(
    Case(fmt, hashed, keyed)
    for keyed in (False, True)
    for fmt, hashed in (
        ("parquet", False),
        ("parquet", True),
        ("csv", False),
        ("csv", True),
        ("criteo", False),
        ("libsvm", False),
        ("libffm", False),
    )
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--examples", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--rows-repeats", type=int, help="row-parser runs (default: --repeats)")
    parser.add_argument("--hashed", action="store_true")
    parser.add_argument("--keyed", action="store_true")
    formats = ("parquet", "csv", "criteo", "libsvm", "libffm")
    parser.add_argument("--format", choices=formats, default="parquet")
    parser.add_argument("--all", type=Path, metavar="FILE", help="every case, as JSON to FILE")
    parser.add_argument("--render", type=Path, metavar="FILE", help="only the .md of a --all FILE")
    args = parser.parse_args()
    if args.render:
        results = json.loads(args.render.read_text())["results"]
        args.render.with_suffix(".md").write_text(markdown_table(results))
        return
    torch.set_num_threads(1)
    rows_repeats = args.repeats if args.rows_repeats is None else args.rows_repeats
    cases = ALL_CASES if args.all else (Case(args.format, args.hashed, args.keyed),)
    load_before = os.getloadavg()
    results = []
    for case in cases:
        result = measure(case, args.examples, args.repeats, rows_repeats)
        print(json.dumps(result), flush=True)
        results.append(result)
    if args.all:
        machine = {"cores": os.cpu_count(), "load_before": load_before}
        machine["load_after"] = os.getloadavg()
        run = {"examples": args.examples, "repeats": args.repeats, "rows_repeats": rows_repeats}
        args.all.write_text(json.dumps({**run, **machine, "results": results}, indent=1) + "\n")
        args.all.with_suffix(".md").write_text(markdown_table(results))


def markdown_table(results: list[dict[str, object]]) -> str:
    """The results as a Markdown table (written beside the JSON, and rendered on the docs site)."""
    lines = [
        "| format | ids | examples/s | reader CPU us/example (median, lowest-highest) "
        "| row parser: examples/s, CPU us/example | ratio |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for r in results:
        ids = ("hashed strings, " if r["hashed"] else "") + ("keys" if r["keyed"] else "table rows")
        spread = f"{r['columnar_cpu_us_per_example_min']}-{r['columnar_cpu_us_per_example_max']}"
        cpu = f"**{r['columnar_cpu_us_per_example_median']}** ({spread})"
        rows = "-"
        if "rows_eps_median" in r:
            rows = f"{r['rows_eps_median']:,}, {r['rows_cpu_us_per_example_median']}"
        row = [r["format"], ids, f"{r['columnar_eps_median']:,}", cpu, rows, r.get("ratio", "-")]
        lines.append("| " + " | ".join(str(cell) for cell in row) + " |")
    return "\n".join(lines) + "\n"


def measure(case: Case, examples: int, repeats: int, rows_repeats: int) -> dict[str, object]:
    """Read one case's file `repeats` times a block at a time (and `rows_repeats` times by
    the row parser, alternating); the report of `_report`."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"synthetic.{case.format}"
        schema = write_case(case, examples, path)
        # the first read of a process loads compiled code (numba's cache) and tables once
        first = examples_per_second(path, schema, True)
        columnar, rows = [], []
        for repeat in range(max(repeats, rows_repeats)):
            if repeat < repeats:
                columnar.append(examples_per_second(path, schema, True))
            if repeat < rows_repeats:
                rows.append(examples_per_second(path, schema, False))
    return {
        **_report(case, examples, columnar, rows),
        "first_read_cpu_us_per_example": round(first[1], 2),
    }


def write_case(case: Case, examples: int, path: Path) -> Schema:
    """Write the case's file of `examples` examples at `path`; its schema."""
    spec = SyntheticSpec(num_train=examples)
    schema: Schema
    if case.format == "criteo":
        write_criteo(spec, path)
        schema = CriteoSchema(table_rows=tuple(spec.table_rows))
    elif case.format == "libffm":
        schema = write_libffm(examples, path)
    elif case.format == "libsvm":
        schema = write_libsvm(examples, path)
    else:
        schema = write_table(spec, path, case)
    return dataclasses.replace(schema, keyed=case.keyed)


def write_table(spec: SyntheticSpec, path: Path, case: Case) -> TabularSchema:
    """The synthetic task as Parquet or CSV at `path` (hashed: ids as strings)."""
    table = synthetic_table(spec)
    columns = table.schema.names
    dense = tuple(c for c in columns if c.startswith("I"))
    categorical = tuple(c for c in columns if c.startswith("C"))
    if case.hashed:
        for name in categorical:
            index = table.schema.get_field_index(name)
            table = table.set_column(index, name, table[name].cast(pa.string()))
    if case.format == "csv":
        pa_csv.write_csv(table, path)
    else:
        pq.write_table(table, path)
    hashed = categorical if case.hashed else ()
    return TabularSchema("label", dense, categorical, tuple(spec.table_rows), hashed=hashed)


def synthetic_table(spec: SyntheticSpec) -> pa.Table:
    """The synthetic task's training split as `recsync data synth` writes it."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "synthetic.parquet"
        write_synthetic_parquet(spec, path, Split.train)
        return pq.read_table(path)


Runs = list[tuple[float, float]]


def _report(case: Case, examples: int, columnar: Runs, rows: Runs) -> dict[str, object]:
    report: dict[str, object] = {
        "benchmark": "read",
        **dataclasses.asdict(case),
        "examples": examples,
        "columnar_eps_median": round(statistics.median(e for e, _ in columnar)),
        "columnar_cpu_us_per_example_median": _median_us(columnar),
        "columnar_cpu_us_per_example_min": round(min(us for _, us in columnar), 2),
        "columnar_cpu_us_per_example_max": round(max(us for _, us in columnar), 2),
    }
    if rows:
        rows_eps = statistics.median(e for e, _ in rows)
        report["rows_eps_median"] = round(rows_eps)
        report["rows_cpu_us_per_example_median"] = _median_us(rows)
        report["ratio"] = round(statistics.median(e for e, _ in columnar) / rows_eps, 2)
    return report


def _median_us(runs: Runs) -> float:
    return round(statistics.median(us for _, us in runs), 2)


if __name__ == "__main__":
    if "--store" in sys.argv:  # readers on the box: a store on another host against local files
        from store_readers import main as store_main

        store_main([a for a in sys.argv[1:] if a != "--store"])
    else:
        main()
