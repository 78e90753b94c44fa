"""Every id of Criteo Kaggle's 26 features (33.76M distinct) inserted into hash tables:
whether they fit this machine's memory and at what rate (experiments/repro/embeddings_capacity.py;
`recsync reproduce embeddings` reports it too). `--fraction` inserts that share of the ids
(a quicker run). Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout's experiments/

from experiments.repro.embeddings_capacity import insert_all  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--shards", type=int, default=8)
    parser.add_argument("--batch", type=int, default=65_536)
    parser.add_argument("--dim", type=int, default=16)
    parser.add_argument("--fraction", type=float, default=1.0)
    args = parser.parse_args()
    result = insert_all(args.shards, args.batch, args.dim, args.fraction)
    print(json.dumps({"benchmark": "hash_capacity", **result}))


if __name__ == "__main__":
    main()
