"""EPS of the Ray engine against the single-process reference trainer, same data, same run.
The engine's EPS is its steady rate (`eps_steady`, docs/simulator.md, "Examples per
second"); the reference's, its loop's examples over its seconds.

1. `ratio`: the Ray job with 1 trainer x 2 workers (the default: processes of their own, as
   the 2 CPUs give each worker one)
   and 1 embedding server (independent strategy) over the reference trainer's EPS (both on
   the default model and synthetic task, median of repeats, paired run by run); the
   reference trains on batches made before its clock starts. `ratio_threads`: the same job
   with its 2 workers as threads of one process. `ratio_inline`: over the reference timed
   with making its batches (as `recsync train` runs it; the engine's reader makes them too).
2. S-EASGD vs FR-EASGD-1 (every worker syncs after every iteration) at 2 trainers x 2
   threads, 2 embedding servers, 1 sync server.
3. `servers_ratio`: S-EASGD at 2 trainers x 2 threads with 8 embedding servers over the same
   with 2 (the cost of more, smaller messages per batch), paired run by run.
Prints one JSON object.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import time

import ray

from recsync.coordinator.spec import ClusterSpec, JobSpec
from recsync.data.synthetic import SyntheticSpec, SyntheticTask
from recsync.families import strategy_config
from recsync.model.spec import ModelSpec
from recsync.optim.train_spec import TrainSpec
from recsync.runtime.ray.job import connect, run_job
from recsync.strategy.timing import Timing
from recsync.trainer.reference import ReferenceTrainer


def reference_eps(
    synthetic: SyntheticSpec, model: ModelSpec, train: TrainSpec, inline: bool = False
) -> float:
    """Examples/s of the single-process trainer (`inline`: making its batches as it goes)."""
    trainer = ReferenceTrainer(model, train)
    start = time.perf_counter()
    batches = SyntheticTask(synthetic).train_batches(train.batch_size)
    if not inline:
        batches = list(batches)
        start = time.perf_counter()
    for batch in batches:
        trainer.train_step(batch)
    return synthetic.num_train / (time.perf_counter() - start)


def engine_eps(spec: JobSpec) -> dict:
    summary = run_job(spec)
    return {"eps": summary["eps_steady"], "sync_gap": summary["average_sync_gap"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--examples", type=int, default=200_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    synthetic = dataclasses.replace(SyntheticSpec(), num_train=args.examples, num_test=2_000)
    model, train = ModelSpec(), TrainSpec()
    connect(None, 2)
    single = JobSpec(model, train, ClusterSpec(1, 2, 1), strategy_config("independent"), synthetic)
    threads = dataclasses.replace(single, cluster=ClusterSpec(1, 2, 1, worker_processes=False))
    shadow = JobSpec(model, train, ClusterSpec(2, 2, 2), strategy_config("easgd"), synthetic)
    fixed = dataclasses.replace(
        shadow,
        strategy=strategy_config("easgd", timing=Timing("fixed", every_iterations=1)),
    )
    many_servers = dataclasses.replace(shadow, cluster=ClusterSpec(2, 2, 8))
    ratios, ours, refs, s_easgd, fr_easgd, s_easgd_8 = [], [], [], [], [], []
    inline_refs, inline_ratios, ours_threads, threads_ratios = [], [], [], []
    for _ in range(args.repeats):
        refs.append(reference_eps(synthetic, model, train))
        inline_refs.append(reference_eps(synthetic, model, train, inline=True))
        ours.append(engine_eps(single)["eps"])
        ours_threads.append(engine_eps(threads)["eps"])
        ratios.append(ours[-1] / refs[-1])
        inline_ratios.append(ours[-1] / inline_refs[-1])
        threads_ratios.append(ours_threads[-1] / refs[-1])
        s_easgd.append(engine_eps(shadow))
        fr_easgd.append(engine_eps(fixed))
        s_easgd_8.append(engine_eps(many_servers))
    ray.shutdown()
    median = statistics.median
    print(
        json.dumps(
            {
                "benchmark": "engine",
                "examples": args.examples,
                "repeats": args.repeats,
                "reference_eps_median": round(median(refs)),
                "reference_inline_eps_median": round(median(inline_refs)),
                "ray_1x2_independent_eps_median": round(median(ours)),
                "ray_1x2_threads_independent_eps_median": round(median(ours_threads)),
                "ratio": round(median(ratios), 3),
                "ratio_min": round(min(ratios), 3),
                "ratio_max": round(max(ratios), 3),
                "ratio_threads": round(median(threads_ratios), 3),
                "ratio_inline": round(median(inline_ratios), 3),
                "s_easgd_2x2_eps_median": round(median(r["eps"] for r in s_easgd)),
                "s_easgd_sync_gap_median": round(median(r["sync_gap"] for r in s_easgd), 2),
                "fr_easgd_1_2x2_eps_median": round(median(r["eps"] for r in fr_easgd)),
                "fr_easgd_1_sync_gap_median": round(median(r["sync_gap"] for r in fr_easgd), 2),
                "s_easgd_2x2_8_servers_eps_median": round(median(r["eps"] for r in s_easgd_8)),
                "servers_ratio": round(
                    median(m["eps"] / s["eps"] for m, s in zip(s_easgd_8, s_easgd, strict=True)), 3
                ),
                "s_over_fr_ratio": round(
                    median(s["eps"] / f["eps"] for s, f in zip(s_easgd, fr_easgd, strict=True)), 3
                ),
            }
        )
    )


if __name__ == "__main__":
    main()
