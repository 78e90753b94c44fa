"""What checkpointing while training costs the Ray engine: the default job (S-EASGD, 2
trainers x 2 workers, default model and synthetic task) cut every `--every-seconds` (far
more often than the default 60 s, so that the cost shows above the noise), each cut's state
written to disk by the run's background writer, over the same job with no cut, paired run
by run. Prints one JSON object: examples/s of each over its whole run (not the steady
rate: a cut's cost is spread over the whole run's time), `ratio` (median of the paired
ratios, cut / not cut), the cuts taken and the seconds the reader was paused per cut, and
`ratio_at_default`: the EPS ratio at the default interval, from the measured pause and
write costs per cut (1 - cost per cut / 60 s).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import tempfile
from pathlib import Path

from recsync.app.runs.checkpoints import CheckpointWriter
from recsync.coordinator.cuts import CheckpointEvery
from recsync.coordinator.spec import ClusterSpec, JobSpec
from recsync.data.synthetic import SyntheticSpec
from recsync.families import strategy_config
from recsync.model.spec import ModelSpec
from recsync.optim.train_spec import TrainSpec
from recsync.runtime.ray.job import connect, run_job

DEFAULT_INTERVAL_S = 60.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--examples", type=int, default=400_000)
    parser.add_argument("--every-seconds", type=float, default=4.0)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    connect(None, 2)
    synthetic = dataclasses.replace(SyntheticSpec(), num_train=args.examples)
    spec = JobSpec(ModelSpec(), TrainSpec(), ClusterSpec(), strategy_config("easgd"), synthetic)
    plain, cut, ratios, cuts, paused, written = [], [], [], [], [], []
    for _ in range(args.repeats):
        with tempfile.TemporaryDirectory() as run_dir:
            writer = CheckpointWriter(Path(run_dir))
            summary = run_job(
                spec,
                checkpoint_every=CheckpointEvery(seconds=args.every_seconds),
                on_checkpoint=writer.write,
            )
            writer.wait()
            written.append(writer.written)
        # over the whole run, not the steady rate: the cost of its cuts is spread over the
        # run's whole time (cost_per_cut_s below)
        without = run_job(spec)["eps"]
        cut.append(summary["eps"])
        plain.append(without)
        ratios.append(summary["eps"] / without)
        cuts.append(summary["cuts"]["taken"])
        paused.append(summary["cuts"]["paused_seconds"] / max(summary["cuts"]["taken"], 1))
    ratio = statistics.median(ratios)
    # the cost of one cut in training time: what the ratio lost, spread over the cuts
    seconds = args.examples / statistics.median(plain)
    cost_per_cut = max(0.0, (1 - ratio) * seconds / max(statistics.median(cuts), 1))
    print(
        json.dumps(
            {
                "examples": args.examples,
                "every_seconds": args.every_seconds,
                "whole_run_eps_cut": [round(e) for e in cut],
                "whole_run_eps_plain": [round(e) for e in plain],
                "cuts": cuts,
                "written": written,
                "paused_seconds_per_cut": [round(p, 3) for p in paused],
                "ratio": round(ratio, 3),
                "cost_per_cut_s": round(cost_per_cut, 3),
                "ratio_at_default": round(1 - cost_per_cut / DEFAULT_INTERVAL_S, 4),
            }
        )
    )


if __name__ == "__main__":
    main()
