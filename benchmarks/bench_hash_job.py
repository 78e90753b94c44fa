"""EPS of the default job (S-EASGD, 2 trainers x 2 workers, 2 embedding servers, 1 sync
server, Ray) with hash tables against the same job with fixed tables of the same rows.

The data: the synthetic task with Criteo Kaggle's 26 per-feature cardinalities scaled down
by `--scale` (each at least 3 rows), Zipf-skewed ids, 13 dense features, so a run touches
rows across the whole range; the same examples for both jobs (the hash job's ids are the
fixed job's as feature-prefixed keys). The two jobs run in turn, paired run by run; the
`ratio` is the median of hash EPS over fixed EPS, each the run's steady rate (`eps_steady`,
docs/simulator.md, "Examples per second"). Prints one JSON object.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
from pathlib import Path

import ray

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout's experiments/

from experiments.repro.embeddings_capacity import CRITEO_CARDINALITIES  # noqa: E402
from recsync.coordinator.spec import ClusterSpec, JobSpec  # noqa: E402
from recsync.data.synthetic import SyntheticSpec  # noqa: E402
from recsync.families import strategy_config  # noqa: E402
from recsync.model.hash_spec import HashTables  # noqa: E402
from recsync.model.spec import ModelSpec, TableSpec  # noqa: E402
from recsync.optim.train_spec import TrainSpec  # noqa: E402
from recsync.runtime.ray.job import connect, run_job  # noqa: E402


def criteo_like(scale: int, num_train: int) -> SyntheticSpec:
    rows = tuple(max(r // scale, 3) for r in CRITEO_CARDINALITIES)
    return SyntheticSpec(num_train=num_train, num_test=10_000, num_dense=13, table_rows=rows)


def jobs(synthetic: SyntheticSpec) -> dict[str, JobSpec]:
    tables = tuple(TableSpec(f"C{f + 1}", r, 16) for f, r in enumerate(synthetic.table_rows))
    fixed = ModelSpec(num_dense=13, tables=tables)
    hashed = dataclasses.replace(fixed, hash_tables=HashTables())
    cluster = ClusterSpec(2, 2, 2, num_dense_servers=1)
    strategy, train = strategy_config("easgd"), TrainSpec()
    keyed = dataclasses.replace(synthetic, keyed=True)
    return {
        "fixed": JobSpec(fixed, train, cluster, strategy, synthetic),
        "hash": JobSpec(hashed, train, cluster, strategy, keyed),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--examples", type=int, default=150_000)
    parser.add_argument("--scale", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    synthetic = criteo_like(args.scale, args.examples)
    specs = jobs(synthetic)
    connect(None, 2)
    eps: dict[str, list[float]] = {name: [] for name in specs}
    rows: list[int] = []
    try:
        for _ in range(args.repeats):
            for name, spec in specs.items():
                summary = run_job(spec)
                eps[name].append(summary["eps_steady"])
                if name == "hash":
                    rows.append(summary["embedding_rows"]["live"])
    finally:
        ray.shutdown()
    ratios = [h / f for h, f in zip(eps["hash"], eps["fixed"], strict=True)]
    print(
        json.dumps(
            {
                "benchmark": "hash_job",
                "examples": args.examples,
                "table_rows": sum(synthetic.table_rows),
                "scale": args.scale,
                "repeats": args.repeats,
                "fixed_eps": [round(e) for e in eps["fixed"]],
                "hash_eps": [round(e) for e in eps["hash"]],
                "hash_rows_live": rows,
                "ratio": round(statistics.median(ratios), 3),
                "ratio_min": round(min(ratios), 3),
                "ratio_max": round(max(ratios), 3),
            }
        )
    )


if __name__ == "__main__":
    main()
