"""The readers' combined hand-out rate (examples/s) at 1, 2 and 4 readers, the readers alone.

Each reader is built as the job builds it (topology.py: `cluster.num_readers` readers, each
its share of the stream, data/shares.py) and runs in a process of its own (as a reader
node does), with one torch thread; it answers `NextBatch` requests as fast as it can for
its trainer until its share of the synthetic stream is handed out. The combined rate is
every example handed out over the time from the common start to the last reader's end;
`--repeats` runs of each count, their median, and `ratio` = that median over one reader's.
On this project's 2-core machine the rate can at most double (the readers share 2 cores
with whatever else runs), so each reader's CPU time is measured too: the busiest reader's
gives the rate the readers reach with a core each (`cpu_bound_examples_per_s`, and its
`cpu_bound_ratio`). Prints one JSON object.

    python benchmarks/bench_reader_scaling.py [--examples 400000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import statistics
import time
from typing import Any

import torch

from recsync.coordinator.node_specs import BuildContext, ReaderSpec
from recsync.coordinator.reader import ReaderNode
from recsync.coordinator.spec import ClusterSpec, JobSpec, plan_for
from recsync.coordinator.topology import build_topology
from recsync.data.synthetic import SyntheticSpec
from recsync.families import strategy_config
from recsync.model.spec import ModelSpec, TableSpec
from recsync.optim.train_spec import TrainSpec
from recsync.protocol.address import Role
from recsync.protocol.reading import NextBatch

TABLES = 26
BATCH = 256


def job(readers: int, examples: int) -> JobSpec:
    synthetic = SyntheticSpec(
        num_train=examples, num_test=1_000, num_dense=13, table_rows=(1_000,) * TABLES
    )
    model = ModelSpec(
        num_dense=13,
        tables=tuple(TableSpec(f"C{i}", 1_000, 8) for i in range(TABLES)),
        bottom_mlp=(16,),
        top_mlp=(16,),
    )
    cluster = ClusterSpec(4, 1, 1, 0, num_readers=readers)
    return JobSpec(
        model, TrainSpec(batch_size=BATCH), cluster, strategy_config("independent"), synthetic
    )


def hand_out(node_spec: ReaderSpec, trainer: int, start: Any, done: Any) -> None:
    """One reader's process: build it, wait for the common start, hand out its share."""
    torch.set_num_threads(1)
    node = node_spec.build(BuildContext(one_at_a_time=True))
    assert isinstance(node, ReaderNode)
    start.wait()
    cpu = time.process_time()
    examples = 0
    while (handed := node.handle(NextBatch(trainer))).batch is not None:
        examples += handed.batch.batch_size
    done.put((examples, time.perf_counter(), time.process_time() - cpu))


def rate(readers: int, examples: int) -> tuple[float, float]:
    """Examples/s of `readers` readers handing out one stream of `examples` examples, by
    the wall clock and by the busiest reader's CPU time (the rate with a core a reader)."""
    spec = job(readers, examples)
    topology = build_topology(spec, plan_for(spec))
    nodes = topology.of_role(Role.READER)
    ctx = mp.get_context("fork")
    start, done = ctx.Barrier(len(nodes) + 1), ctx.Queue()
    procs = []
    for node in nodes:
        assert isinstance(node, ReaderSpec)
        trainer = next(t for t in range(4) if spec.cluster.reader_of(t) == node.address.index)
        procs.append(ctx.Process(target=hand_out, args=(node, trainer, start, done)))
    for proc in procs:
        proc.start()
    start.wait()
    began = time.perf_counter()
    results = [done.get() for _ in procs]
    for proc in procs:
        proc.join()
    handed = sum(n for n, _, _ in results)
    assert handed == examples, (handed, examples)
    wall = max(t for _, t, _ in results) - began
    return handed / wall, handed / max(c for _, _, c in results)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=400_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--readers", type=int, nargs="+", default=[1, 2, 4])
    args = parser.parse_args()
    runs: dict[int, list[float]] = {r: [] for r in args.readers}
    cpu_runs: dict[int, list[float]] = {r: [] for r in args.readers}
    for _ in range(args.repeats):  # counts interleaved: a change in the machine's load hits all
        for readers in args.readers:
            wall, cpu = rate(readers, args.examples)
            runs[readers].append(wall)
            cpu_runs[readers].append(cpu)
    medians = {r: statistics.median(v) for r, v in runs.items()}
    cpu_medians = {r: statistics.median(v) for r, v in cpu_runs.items()}
    base, cpu_base = medians[args.readers[0]], cpu_medians[args.readers[0]]
    print(
        json.dumps(
            {
                "examples": args.examples,
                "batch_size": BATCH,
                "cpus": os.cpu_count(),
                "load_average": os.getloadavg(),
                "examples_per_s": {str(r): round(m) for r, m in medians.items()},
                "runs": {str(r): [round(x) for x in v] for r, v in runs.items()},
                "ratio": {str(r): round(m / base, 2) for r, m in medians.items()},
                "cpu_bound_examples_per_s": {str(r): round(m) for r, m in cpu_medians.items()},
                "cpu_bound_ratio": {str(r): round(m / cpu_base, 2) for r, m in cpu_medians.items()},
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
