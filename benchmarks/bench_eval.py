"""What evaluating while training costs the Ray engine: the default job (S-EASGD, 2 trainers
x 2 workers, default model and synthetic task) with evaluations every `--eval-every`
examples handed out (each mark on `--eval-examples` held-out examples, the config's
default; the end on all) over the same job with none, paired run by run (the order within
a pair alternates). Prints one JSON object: examples/s of each over its whole run (not the
steady rate: the job's end waits for the evaluator, which is part of what evaluating
costs), `ratio` (median of the paired ratios, with evaluations / without), and how many
metrics records the evaluating runs wrote: one per mark and the end's (marks that come
while a record is being scored queue up; on a saturated machine the evaluator, at a low
priority, gets little CPU, and the job's end waits for it).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics

from recsync.app.config.run import RunSection
from recsync.coordinator.spec import ClusterSpec, JobSpec
from recsync.data.synthetic import SyntheticSpec
from recsync.families import strategy_config
from recsync.model.spec import ModelSpec
from recsync.optim.train_spec import TrainSpec
from recsync.runtime.ray.job import connect, run_job


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--examples", type=int, default=300_000)
    parser.add_argument("--eval-every", type=int, default=50_000)
    parser.add_argument("--eval-examples", type=int, default=RunSection().eval_examples)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    connect(None, 2)
    synthetic = dataclasses.replace(SyntheticSpec(), num_train=args.examples)
    spec = JobSpec(ModelSpec(), TrainSpec(), ClusterSpec(), strategy_config("easgd"), synthetic)
    plain, evaluating, ratios, records = [], [], [], []
    for repeat in range(args.repeats):
        seen: list[dict] = []

        def evaluating_run(seen: list[dict] = seen) -> float:
            return float(
                run_job(
                    spec,
                    eval_every=args.eval_every,
                    on_eval=seen.append,
                    eval_examples=args.eval_examples,
                )["eps"]
            )

        # the order alternates: a pair's first job runs in node processes fresh from the
        # last job's, its second in warm ones; neither side always gets the same
        if repeat % 2 == 0:
            with_eval, without = evaluating_run(), run_job(spec)["eps"]
        else:
            without, with_eval = run_job(spec)["eps"], evaluating_run()
        evaluating.append(with_eval)
        plain.append(without)
        ratios.append(with_eval / without)
        records.append(len(seen) + 1)  # and the run's last record
    print(
        json.dumps(
            {
                "examples": args.examples,
                "eval_every": args.eval_every,
                "eval_examples": args.eval_examples,
                "whole_run_eps_evaluating": [round(e) for e in evaluating],
                "whole_run_eps_plain": [round(e) for e in plain],
                "records": records,
                "records_due": -(-args.examples // args.eval_every),  # the end's included
                "ratio": round(statistics.median(ratios), 3),
            }
        )
    )


if __name__ == "__main__":
    main()
