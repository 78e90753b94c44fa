"""Is scanning every line in every reader cheap enough to split text files among readers
by blocks of lines (docs/design-file-shares.md)? On a libffm file (bench_readers.py's: 10
fields, 2 dense) and a Criteo TSV file (the synthetic task's, a tenth of the fields empty),
this times, in CPU seconds of this process (the file in the page cache: no disk time):

- `scan`: the newline scan that indexes the file (io/line_blocks.py `line_index`), per line;
- `coin`: the per-line held-out coin of every line (data/line_coin.py `candidates`), per line;
- `parse`: the reader's bulk parser today (bench_readers.py `examples_per_second`:
  criteo_blocks / libsvm_blocks over `open_text`), per example;
- `parse_lines`: the same file through io/line_examples.py `parse_lines` a block of
  `--block-lines` lines at a time (reading by line ranges, finding each example's line),
  per example;
- `share_of_R`: one reader's share, every R-th block (R = `--readers`), as a fraction of
  the whole file's `parse_lines`; `share_expected`: its blocks over all blocks.

Each the median of `--repeats` runs after a first one (which loads compiled code); prints
one JSON object per format, with `scan_over_parse` = scan per line / parse per example.
Run with `nice -n 19`."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch

from bench_readers import Case, examples_per_second, write_case
from recsync.data.line_coin import candidates
from recsync.io.line_blocks import line_index
from recsync.io.line_examples import LineSkips, TextSchema, parse_lines


def cpu_seconds(work: Callable[[], object], repeats: int) -> tuple[float, list[float]]:
    """The median CPU seconds of `repeats` runs of `work` after a first, and all of them."""
    work()
    runs = []
    for _ in range(repeats):
        start = time.process_time()
        work()
        runs.append(time.process_time() - start)
    return statistics.median(runs), runs


def measure(
    fmt: str, lines: int, block_lines: int, readers: int, repeats: int
) -> dict[str, object]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"bench.{fmt}"
        schema = write_case(Case(fmt, keyed=True), lines, path)
        index = line_index(path, block_lines)
        n, size = index.num_lines, index.num_bytes
        scan, scan_runs = cpu_seconds(lambda: line_index(path, block_lines), repeats)
        coin, _ = cpu_seconds(lambda: candidates(0, 0, 0, n, 0.02), repeats)
        examples_per_second(path, schema, True)  # loads compiled code
        parse_runs = [examples_per_second(path, schema, True)[1] for _ in range(repeats)]
        text_schema: TextSchema = schema  # type: ignore[assignment]

        def blocks(every: int) -> int:
            """Reader 0's share of `every` readers, a block at a time (1: the whole file)."""
            examples = 0
            for block in range(0, index.num_blocks, every):
                start = block * block_lines
                stop = min(n, start + block_lines)
                skips = LineSkips()
                parsed = parse_lines(index, text_schema, start, stop, strict=False, skips=skips)
                examples += parsed.lines.size
            return examples

        examples = blocks(1)
        by_lines, _ = cpu_seconds(lambda: blocks(1), repeats)
        one_share, _ = cpu_seconds(lambda: blocks(readers), repeats)
    parse_us = statistics.median(parse_runs)
    scan_us = 1e6 * scan / n
    return {
        "benchmark": "line_blocks",
        "format": fmt,
        "lines": n,
        "bytes_per_line": round(size / n, 1),
        "examples": examples,
        "block_lines": block_lines,
        "scan_us_per_line": round(scan_us, 4),
        "scan_us_per_line_runs": [round(1e6 * s / n, 4) for s in scan_runs],
        "scan_mb_per_s": round(size / scan / 1e6) if scan else None,
        "coin_us_per_line": round(1e6 * coin / n, 4),
        "parse_us_per_example": round(parse_us, 2),
        "parse_us_per_example_runs": [round(us, 2) for us in parse_runs],
        "parse_lines_us_per_example": round(1e6 * by_lines / examples, 2),
        "readers": readers,
        "share_of_R": round(one_share / by_lines, 3),
        "share_expected": round(len(range(0, index.num_blocks, readers)) / index.num_blocks, 3),
        "scan_over_parse": round(scan_us / parse_us, 4),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--lines", type=int, default=200_000)
    parser.add_argument("--block-lines", type=int, default=4096)
    parser.add_argument("--readers", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--format", choices=("libffm", "criteo"), action="append")
    args = parser.parse_args()
    torch.set_num_threads(1)
    load = os.getloadavg()
    for fmt in args.format or ("libffm", "criteo"):
        result = measure(fmt, args.lines, args.block_lines, args.readers, args.repeats)
        print(json.dumps({**result, "load_before": [round(x, 2) for x in load]}), flush=True)


if __name__ == "__main__":
    main()
