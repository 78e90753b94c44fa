"""Trains every example job (examples/<shape>.toml) on a small file of its shape and records
what each reached: examples/results.json, and the results table of docs/example-jobs.md.

    python examples/run_examples.py

The files come from tests/support/example_data.py (seeded: the same file on every run),
each job runs as `recsync simulate` does (in this process), and its runs are left in a
temporary folder. `--keep DIR` writes the files and runs into DIR instead.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "support"))

from example_data import (  # noqa: E402
    SHAPES,
    TABLE_END,
    TABLE_START,
    results_table,
    run_example,
)

RESULTS = ROOT / "examples" / "results.json"
PAGE = ROOT / "docs" / "example-jobs.md"


def with_table(page: str, results: list[dict[str, object]]) -> str:
    """The page with its results table replaced by the one of `results`."""
    start, end = page.index(TABLE_START), page.index(TABLE_END) + len(TABLE_END)
    return page[:start] + results_table(results) + page[end:]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keep", type=Path, help="write the files and runs here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as temporary:
        folder = args.keep or Path(temporary)
        results = []
        for shape in SHAPES:
            (folder / shape).mkdir(parents=True, exist_ok=True)
            entry = run_example(shape, folder / shape)
            if entry["exit_code"] != 0:
                print(entry["output"], file=sys.stderr)
                print(f"{shape}: the job failed", file=sys.stderr)
                return 1
            del entry["exit_code"], entry["output"]
            print(f"{shape}: test AUC {entry['test_auc']:.4f}, logloss {entry['test_logloss']:.4f}")
            results.append(entry)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    PAGE.write_text(with_table(PAGE.read_text(), results))
    print(f"wrote {RESULTS.relative_to(ROOT)} and the table of {PAGE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
