"""Examples/s of reading a data file into batches a block at a time, column by column (what
the reader does), against the row parser on the same blocks (what it did). The file is the
synthetic task: as Parquet (`--format csv`: as CSV) with the columns `recsync data synth`
writes (13 integer dense columns, 26 integer id columns; `--hashed`: the ids as strings,
hashed with mmh3), or as Criteo TSV (`--format criteo`: the 13 counts, the 26 ids in
hexadecimal, a tenth of the fields empty), or libffm (`--format libffm`: 10 fields, 2 dense
with decimal values, 8 categorical) or libSVM (`--format libsvm`: 13 dense indices with
decimal values, 26 categorical indices) lines of random values. Repeats alternate between the
two; prints one JSON object: examples/s and reader CPU microseconds per example (process
time) of each, `ratio` = columnar / rows (examples/s)."""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq

from recsync.app.cli.data import Split, write_synthetic_parquet
from recsync.data.batch import Batch, rebatch
from recsync.data.criteo import CriteoSchema
from recsync.data.libsvm import LibFFMSchema, LibSVMSchema
from recsync.data.skips import SkipReport
from recsync.data.synthetic import SyntheticSpec, SyntheticTask
from recsync.data.tabular import TabularSchema
from recsync.io.criteo_blocks import criteo_blocks
from recsync.io.libsvm_blocks import libsvm_blocks
from recsync.io.readers import csv_blocks, open_text
from recsync.io.table_blocks import parquet_blocks

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--examples", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--hashed", action="store_true")
    formats = ("parquet", "csv", "criteo", "libsvm", "libffm")
    parser.add_argument("--format", choices=formats, default="parquet")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"synthetic.{args.format}"
        spec = SyntheticSpec(num_train=args.examples)
        schema: Schema
        if args.format in ("criteo", "libsvm", "libffm"):
            if args.format == "criteo":
                write_criteo(spec, path)
                schema = CriteoSchema(table_rows=tuple(spec.table_rows))
            elif args.format == "libffm":
                schema = write_libffm(args.examples, path)
            else:
                schema = write_libsvm(args.examples, path)
            _report(args, *_alternate(path, schema, args.repeats))
            return
        write_synthetic_parquet(spec, path.with_suffix(".parquet"), Split.train)
        if args.format == "csv":
            pa_csv.write_csv(pq.read_table(path.with_suffix(".parquet")), path)
        columns = pq.read_schema(path.with_suffix(".parquet")).names
        dense = tuple(c for c in columns if c.startswith("I"))
        categorical = tuple(c for c in columns if c.startswith("C"))
        hashed: tuple[str, ...] = ()
        if args.hashed:
            table = pq.read_table(path.with_suffix(".parquet"))
            for name in categorical:
                index = table.schema.get_field_index(name)
                table = table.set_column(index, name, table[name].cast(pa.string()))
            if args.format == "csv":
                pa_csv.write_csv(table, path)
            else:
                pq.write_table(table, path)
            hashed = categorical
        schema = TabularSchema("label", dense, categorical, tuple(spec.table_rows), hashed=hashed)
        measured = _alternate(path, schema, args.repeats)
    _report(args, *measured)


Runs = list[tuple[float, float]]


def _alternate(path: Path, schema: Schema, repeats: int) -> tuple[Runs, Runs]:
    columnar, rows = [], []
    for _ in range(repeats):
        columnar.append(examples_per_second(path, schema, True))
        rows.append(examples_per_second(path, schema, False))
    return columnar, rows


def _report(args: argparse.Namespace, columnar: Runs, rows: Runs) -> None:
    print(
        json.dumps(
            {
                "benchmark": "read",
                "format": args.format,
                "examples": args.examples,
                "hashed": args.hashed,
                "columnar_eps_median": round(statistics.median(e for e, _ in columnar)),
                "rows_eps_median": round(statistics.median(e for e, _ in rows)),
                "columnar_cpu_us_per_example_median": _median_us(columnar),
                "rows_cpu_us_per_example_median": _median_us(rows),
                "ratio": round(
                    statistics.median(c[0] / r[0] for c, r in zip(columnar, rows, strict=True)), 2
                ),
            }
        )
    )


def _median_us(runs: Runs) -> float:
    return round(statistics.median(us for _, us in runs), 2)


if __name__ == "__main__":
    main()
