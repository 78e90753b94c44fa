"""Examples/s of reading a Parquet file into batches: a record batch at a time, column by
column (what the reader does), against the row parser on the same record batches (what it
did). The file is the synthetic task written as `recsync data synth` writes it (13 integer
dense columns, 26 integer id columns); `--hashed` makes its ids strings, hashed with mmh3.
Repeats alternate between the two; prints one JSON object, `ratio` = columnar / rows."""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from recsync.app.cli.data import Split, write_synthetic_parquet
from recsync.data.batch import rebatch
from recsync.data.skips import SkipReport
from recsync.data.synthetic import SyntheticSpec
from recsync.data.tabular import TabularSchema
from recsync.io.parquet_blocks import parquet_blocks


def examples_per_second(path: Path, schema: TabularSchema, columnar: bool) -> float:
    start, examples = time.perf_counter(), 0
    blocks = parquet_blocks(path, schema, strict=False, skips=SkipReport(), columnar=columnar)
    for batch in rebatch(blocks, 256):
        examples += batch.batch_size
    return examples / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--examples", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--hashed", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "synthetic.parquet"
        spec = SyntheticSpec(num_train=args.examples)
        write_synthetic_parquet(spec, path, Split.train)
        columns = pq.read_schema(path).names
        dense = tuple(c for c in columns if c.startswith("I"))
        categorical = tuple(c for c in columns if c.startswith("C"))
        hashed: tuple[str, ...] = ()
        if args.hashed:
            table = pq.read_table(path)
            for name in categorical:
                index = table.schema.get_field_index(name)
                table = table.set_column(index, name, table[name].cast(pa.string()))
            pq.write_table(table, path)
            hashed = categorical
        schema = TabularSchema("label", dense, categorical, tuple(spec.table_rows), hashed=hashed)
        columnar, rows, ratios = [], [], []
        for _ in range(args.repeats):
            columnar.append(examples_per_second(path, schema, True))
            rows.append(examples_per_second(path, schema, False))
            ratios.append(columnar[-1] / rows[-1])
    print(
        json.dumps(
            {
                "benchmark": "parquet_read",
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
