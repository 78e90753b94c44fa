"""Every id of Criteo Kaggle's 26 features (33.76M distinct) inserted into hash tables:
whether they fit this machine's memory and at what rate (app/repro/embeddings_capacity.py;
`recsync reproduce embeddings` reports it too). `--fraction` inserts that share of the ids
(a quicker run). Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json

from recsync.app.repro.embeddings_capacity import insert_all


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
