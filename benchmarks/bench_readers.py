"""Examples/s of reading a data file into batches a block at a time, column by column (what
the reader does), against the row parser on the same blocks (what it did). The file is the
synthetic task: as Parquet (`--format csv`: as CSV) with the columns `recsync data synth`
writes (13 integer dense columns, 26 integer id columns; `--hashed`: the ids as strings,
hashed with mmh3), or as Criteo TSV (`--format criteo`: the 13 counts, the 26 ids in
hexadecimal, a tenth of the fields empty). Repeats alternate between the two; prints one
JSON object, `ratio` = columnar / rows."""

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
from recsync.data.skips import SkipReport
from recsync.data.synthetic import SyntheticSpec, SyntheticTask
from recsync.data.tabular import TabularSchema
from recsync.io.criteo_blocks import criteo_blocks
from recsync.io.readers import csv_blocks, open_text
from recsync.io.table_blocks import parquet_blocks

Schema = TabularSchema | CriteoSchema


def blocks(path: Path, schema: Schema, columnar: bool) -> Iterator[Batch]:
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


def examples_per_second(path: Path, schema: Schema, columnar: bool) -> float:
    start, examples = time.perf_counter(), 0
    for batch in rebatch(blocks(path, schema, columnar), 256):
        examples += batch.batch_size
    return examples / (time.perf_counter() - start)


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
    parser.add_argument("--format", choices=("parquet", "csv", "criteo"), default="parquet")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"synthetic.{args.format}"
        spec = SyntheticSpec(num_train=args.examples)
        schema: Schema
        if args.format == "criteo":
            write_criteo(spec, path)
            schema = CriteoSchema(table_rows=tuple(spec.table_rows))
            columnar, rows, ratios = _alternate(path, schema, args.repeats)
            _report(args, columnar, rows, ratios)
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
        columnar, rows, ratios = _alternate(path, schema, args.repeats)
    _report(args, columnar, rows, ratios)


def _alternate(
    path: Path, schema: Schema, repeats: int
) -> tuple[list[float], list[float], list[float]]:
    columnar, rows, ratios = [], [], []
    for _ in range(repeats):
        columnar.append(examples_per_second(path, schema, True))
        rows.append(examples_per_second(path, schema, False))
        ratios.append(columnar[-1] / rows[-1])
    return columnar, rows, ratios


def _report(
    args: argparse.Namespace, columnar: list[float], rows: list[float], ratios: list[float]
) -> None:
    print(
        json.dumps(
            {
                "benchmark": "read",
                "format": args.format,
                "examples": args.examples,
                "hashed": args.hashed,
                "columnar_eps_median": round(statistics.median(columnar)),
                "rows_eps_median": round(statistics.median(rows)),
                "ratio": round(statistics.median(ratios), 2),
            }
        )
    )


if __name__ == "__main__":
    main()
