"""Examples/s of recsync's reference train step vs a plain PyTorch DLRM, same shapes.

Both train the default model (Criteo-Kaggle DLRM shape) with Adagrad on the same synthetic
batches of 256; repeats alternate between the two and the median of each is reported.
Prints one JSON object; `ratio` = recsync / baseline.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))

from plain_dlrm import PlainDLRM, PlainTrainer  # noqa: E402
from recsync.data.synthetic import SyntheticSpec, SyntheticTask  # noqa: E402
from recsync.model.dlrm import build_dense  # noqa: E402
from recsync.model.spec import ModelSpec, default_tables  # noqa: E402
from recsync.optim.dense import DenseOptimizerSpec  # noqa: E402
from recsync.optim.rowwise import RowOptimizerSpec  # noqa: E402
from recsync.optim.train_spec import TrainSpec  # noqa: E402
from recsync.trainer.reference import ReferenceTrainer


def examples_per_second(step, batches) -> float:
    start = time.perf_counter()
    for batch in batches:
        step(batch)
    return sum(b.batch_size for b in batches) / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--table-rows", type=int, default=100_000)
    args = parser.parse_args()

    tables = default_tables(num_rows=args.table_rows)
    spec = ModelSpec(tables=tables)
    task = SyntheticTask(
        SyntheticSpec(num_train=args.batch_size * args.steps, table_rows=(args.table_rows,) * 26)
    )
    batches = list(task.train_batches(args.batch_size))
    dense_lr, sparse_lr = 0.01, 0.05
    recsync = ReferenceTrainer(
        spec,
        TrainSpec(
            batch_size=args.batch_size,
            dense_optimizer=DenseOptimizerSpec("adagrad", lr=dense_lr),
            sparse_optimizer=RowOptimizerSpec("adagrad", lr=sparse_lr),
        ),
    )
    baseline = PlainTrainer(PlainDLRM(spec, build_dense(spec, 0)), sparse_lr, dense_lr)

    examples_per_second(recsync.train_step, batches[:10])
    examples_per_second(baseline.train_step, batches[:10])
    ours, theirs, ratios = [], [], []
    for _ in range(args.repeats):
        ours.append(examples_per_second(recsync.train_step, batches))
        theirs.append(examples_per_second(baseline.train_step, batches))
        ratios.append(ours[-1] / theirs[-1])
    print(
        json.dumps(
            {
                "benchmark": "train_step",
                "batch_size": args.batch_size,
                "table_rows": args.table_rows,
                "num_tables": len(tables),
                "torch_threads": torch.get_num_threads(),
                "repeats": args.repeats,
                "recsync_eps_median": round(statistics.median(ours), 1),
                "baseline_eps_median": round(statistics.median(theirs), 1),
                "ratio": round(statistics.median(ratios), 3),
                "ratio_min": round(min(ratios), 3),
                "ratio_max": round(max(ratios), 3),
            }
        )
    )


if __name__ == "__main__":
    main()
