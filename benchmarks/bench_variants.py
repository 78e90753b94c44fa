"""Quality and speed of every ShadowSync-family variant on the Ray engine, default task.

Trains the default model on the default synthetic task with 2 trainers x 2 worker threads,
2 embedding servers and 1 sync server, once per variant: independent, S-/FR-EASGD,
S-/FR-MA, S-/FR-BMUF (FR = every k iterations of each worker thread, k=5 by default).
Prints one JSON object: per variant test AUC, its gap to the teacher's AUC, steady EPS
(`eps_steady`, docs/simulator.md, "Examples per second"), sync gap.
"""

from __future__ import annotations

import argparse
import dataclasses
import json

import ray

from recsync.coordinator.spec import ClusterSpec, JobSpec
from recsync.data.synthetic import SyntheticSpec
from recsync.families import strategy_config
from recsync.model.spec import ModelSpec
from recsync.optim.train_spec import TrainSpec
from recsync.runtime.ray.job import connect, run_job
from recsync.strategy.timing import Timing


def variants(k: int) -> list[tuple[str, dict]]:
    fixed = {"timing": Timing("fixed", every_iterations=k)}
    out: list[tuple[str, dict]] = [("independent", {})]
    for name in ("easgd", "ma", "bmuf"):
        out += [(name, {}), (name, fixed)]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--examples", type=int, default=SyntheticSpec().num_train)
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--only", default="", help="comma-separated strategy names to run")
    args = parser.parse_args()
    synthetic = dataclasses.replace(SyntheticSpec(), num_train=args.examples)
    connect(None, 2)
    results = []
    for name, fields in variants(args.k):
        if args.only and name not in args.only.split(","):
            continue
        spec = JobSpec(
            ModelSpec(),
            TrainSpec(),
            ClusterSpec(2, 2, 2),
            strategy_config(name, **fields),
            synthetic,
        )
        summary = run_job(spec)
        results.append(
            {
                "variant": summary["strategy"],
                "test_auc": round(summary["test_auc"], 4),
                "teacher_auc": round(summary["teacher_auc"], 4),
                "gap_to_teacher": round(summary["teacher_auc"] - summary["test_auc"], 4),
                "eps_steady": round(summary["eps_steady"]),
                "average_sync_gap": summary["average_sync_gap"]
                and round(summary["average_sync_gap"], 2),
            }
        )
        print(json.dumps(results[-1]), flush=True)
    ray.shutdown()
    print(json.dumps({"benchmark": "variants", "examples": args.examples, "results": results}))


if __name__ == "__main__":
    main()
