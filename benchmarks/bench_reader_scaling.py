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

`--data libffm`: the default job's readers over a libffm file of `--examples` lines shaped
as Frappe's (10 fields), 2% held out (`--data parquet`: the synthetic task's Parquet file,
row groups of 65,536 rows, shared by row group): one reader parses the whole file, several share it
by line blocks (io/shared_text.py), each parsing only its blocks; `ratio` is over one
reader reading by line blocks too (`1-lines`: the job's first reader given the whole
deal), and `1` (a job of one reader: the whole file parsed as one stream) is reported
beside it. The files' line index
(one newline scan, made when the job is assembled) and reader 0's read of the held-out
lines happen before the common start and are not timed; `index_s` reports the scan.

    python benchmarks/bench_reader_scaling.py [--examples 400000] [--repeats 3]
    python benchmarks/bench_reader_scaling.py --data libffm --examples 200000
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import multiprocessing as mp
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from bench_sim_vs_engine import HELD_OUT, write_frappe_like
from recsync.app.cli.data import Split, write_synthetic_parquet
from recsync.app.config.load import load_config
from recsync.app.runs.distributed import job_spec
from recsync.coordinator.node_specs import BuildContext, ReaderSpec
from recsync.coordinator.reader import ReaderNode
from recsync.coordinator.spec import ClusterSpec, JobSpec, plan_for
from recsync.coordinator.topology import build_topology
from recsync.data.shares import Deal
from recsync.data.synthetic import SyntheticSpec
from recsync.families import strategy_config
from recsync.model.spec import ModelSpec, TableSpec
from recsync.optim.train_spec import TrainSpec
from recsync.protocol.address import Role
from recsync.protocol.reading import NextBatch

TABLES = 26
BATCH = 256


def job(readers: int, examples: int, path: Path | None = None) -> JobSpec:
    if path is not None:
        overrides: dict[str, Any] = {
            "data.path": str(path),
            "data.test_fraction": HELD_OUT,
            "cluster.num_trainers": 4,
            "cluster.num_readers": readers,
            "train.batch_size": BATCH,
        }
        if path.suffix == ".parquet":
            overrides["data.source"] = "parquet"
        else:
            overrides |= {"data.source": "libffm", "model.num_tables": 10}
        return job_spec(load_config(None, overrides))
    synthetic = SyntheticSpec(
        num_train=examples, num_test=1_000, num_dense=13, table_rows=(1_000,) * TABLES
    )
    model = ModelSpec(
        num_dense=13,
        tables=tuple(TableSpec(f"C{i}", 1_000, 8) for i in range(TABLES)),
        bottom_mlp=(16,),
        top_mlp=(16,),
    )
    cluster = ClusterSpec(4, 1, 1, num_readers=readers)
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


def rate(readers: str, examples: int, path: Path | None) -> tuple[float, float, float]:
    """Examples/s of `readers` readers handing out one stream of `examples` examples, by
    the wall clock and by the busiest reader's CPU time (the rate with a core a reader),
    and the seconds assembling the job took (a file's line index)."""
    by_lines = readers == "1-lines"
    spec = job(2 if by_lines else int(readers), examples, path)
    began = time.perf_counter()
    topology = build_topology(spec, plan_for(spec))
    assembled = time.perf_counter() - began
    nodes = topology.of_role(Role.READER)
    if by_lines:  # the first reader, dealt the whole stream
        first = nodes[0]
        assert isinstance(first, ReaderSpec) and isinstance(first.deal, Deal)
        nodes = [dataclasses.replace(first, deal=Deal(1, first.deal.block, examples=False))]
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
    if path is None:
        assert handed == examples, (handed, examples)
    wall = max(t for _, t, _ in results) - began
    return handed / wall, handed / max(c for _, _, c in results), assembled


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=400_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--readers", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--data", choices=("synthetic", "libffm", "parquet"), default="synthetic")
    args = parser.parse_args()
    counts = [str(r) for r in args.readers]
    if args.data != "synthetic":
        counts = ["1-lines", *counts]
    runs: dict[str, list[float]] = {r: [] for r in counts}
    cpu_runs: dict[str, list[float]] = {r: [] for r in counts}
    assembly: dict[str, list[float]] = {r: [] for r in counts}
    with tempfile.TemporaryDirectory() as where:
        path = None
        if args.data == "libffm":
            path = Path(where) / "frappe.libffm"
            write_frappe_like(args.examples, path)
        elif args.data == "parquet":  # row groups of 65,536 rows (`recsync data synth`'s)
            path = Path(where) / "train.parquet"
            write_synthetic_parquet(SyntheticSpec(num_train=args.examples), path, Split.train)
        for _ in range(args.repeats):  # counts interleaved: a change in load hits all
            for readers in counts:
                wall, cpu, assembled = rate(readers, args.examples, path)
                runs[readers].append(wall)
                cpu_runs[readers].append(cpu)
                assembly[readers].append(assembled)
    medians = {r: statistics.median(v) for r, v in runs.items()}
    cpu_medians = {r: statistics.median(v) for r, v in cpu_runs.items()}
    base, cpu_base = medians[counts[0]], cpu_medians[counts[0]]
    print(
        json.dumps(
            {
                "data": args.data,
                "examples": args.examples,
                "batch_size": BATCH,
                "cpus": os.cpu_count(),
                "load_average": os.getloadavg(),
                "examples_per_s": {r: round(m) for r, m in medians.items()},
                "runs": {r: [round(x) for x in v] for r, v in runs.items()},
                "ratio": {r: round(m / base, 2) for r, m in medians.items()},
                "cpu_bound_examples_per_s": {r: round(m) for r, m in cpu_medians.items()},
                "cpu_bound_ratio": {r: round(m / cpu_base, 2) for r, m in cpu_medians.items()},
                "assembly_s": {r: round(statistics.median(v), 3) for r, v in assembly.items()},
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
