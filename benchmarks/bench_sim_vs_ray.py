"""Simulator vs Ray engine: test AUC of every strategy at 2 trainers on the default task.

For each strategy (the replica strategies in both timings' default, and every gradient
strategy), the same JobSpec (default model, default synthetic task of 1,000,000 examples,
2 trainers x 2 worker threads = 4 workers, 2 embedding servers, 1 sync/dense server; for
`allreduce`, whose ranks are single workers, 4 trainers x 1) runs once on the Ray engine and
once in the simulator with this machine's calibrated cost profile. Prints one JSON line per
strategy (both AUCs, their difference, the Ray run's gap to the teacher's AUC, both steady
EPS, `eps_steady`)
and a last JSON object: `max_abs_auc_diff` (the target is <= 0.01) and `max_teacher_gap`
(the target is <= 0.02).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import time

import ray
import torch

from recsync.app.runs.calibrate import calibrate
from recsync.coordinator.spec import ClusterSpec, JobSpec, plan_for
from recsync.data.synthetic import SyntheticSpec
from recsync.families import STRATEGIES, strategy_config
from recsync.families.allreduce.strategy import AllReduceStrategy
from recsync.model.spec import ModelSpec
from recsync.optim.train_spec import TrainSpec
from recsync.runtime.ray.job import connect, run_job
from recsync.runtime.sim.job import SimJob


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--examples", type=int, default=1_000_000)
    parser.add_argument("--strategies", default=",".join(STRATEGIES))
    parser.add_argument("--calibration-examples", type=int, default=50_000)
    args = parser.parse_args()
    torch.set_num_threads(1)
    cost, _, _ = calibrate(args.calibration_examples, with_check=False)
    synthetic = dataclasses.replace(SyntheticSpec(), num_train=args.examples)
    rows = []
    for name in args.strategies.split(","):
        strategy = strategy_config(name)
        cluster = (
            ClusterSpec(4, 1, 2)
            if isinstance(strategy, AllReduceStrategy)
            else ClusterSpec(2, 2, 2, num_dense_servers=1)
        )
        spec = JobSpec(ModelSpec(), TrainSpec(), cluster, strategy, synthetic)
        started = time.perf_counter()
        ray_summary = run_job(spec, num_cpus=os.cpu_count())
        ray_s = time.perf_counter() - started
        connect(None, os.cpu_count())
        started = time.perf_counter()
        sim_summary = SimJob(spec, plan_for(spec), cost).run()
        sim_s = time.perf_counter() - started
        row = {
            "strategy": ray_summary["strategy"],
            "ray_auc": ray_summary["test_auc"],
            "sim_auc": sim_summary["test_auc"],
            "auc_diff": sim_summary["test_auc"] - ray_summary["test_auc"],
            "ray_eps_steady": ray_summary["eps_steady"],
            "sim_eps_steady": sim_summary["eps_steady"],
            "teacher_auc": ray_summary["teacher_auc"],
            "ray_teacher_gap": ray_summary["teacher_auc"] - ray_summary["test_auc"],
            "trainers_x_workers": f"{cluster.num_trainers}x{cluster.workers_per_trainer}",
            "ray_wall_s": ray_s,
            "sim_wall_s": sim_s,
        }
        rows.append(row)
        print(json.dumps(row), flush=True)
    if ray.is_initialized():
        ray.shutdown()
    print(
        json.dumps(
            {
                "benchmark": "bench_sim_vs_ray",
                "examples": args.examples,
                "rows": rows,
                "max_abs_auc_diff": max(abs(r["auc_diff"]) for r in rows),
                "max_teacher_gap": max(r["ray_teacher_gap"] for r in rows),
            }
        )
    )


if __name__ == "__main__":
    main()
