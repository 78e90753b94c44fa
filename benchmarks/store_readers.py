"""Readers reading from an object store on another host against the same readers reading
local files (`python benchmarks/bench_readers.py --store`; root and iproute2 needed).

A box of 3 network-namespace hosts (`recsync box`, no Ray): an S3-compatible store (moto's
server) on host 2, whose link is shaped to `--mbit` Mbit/s with `--delay-ms` added each
way; one reader on host 0 and one on host 1, each built as the job builds it (the job's
reader node specs, a background producer parsing its share) and run as a process in its
host's namespace, built after a common start (its start, the same either way, is timed:
a reader built before would read ahead untimed) and handing out its share as fast as it
can. Their combined examples/s over the data as local files (every host holding a copy: the page
cache of one disk here) and over the same files on the store, alternated `--repeats`
times; `ratio` = store / local (medians). On this project's 2-core machine the store's
server and the kernel's networking share the readers' cores, so each reader's CPU
(its process and its producer's) is measured too: the busiest reader's gives the rate the
readers reach with a core each and the store elsewhere (`cpu_bound_examples_per_s`, and
its `cpu_bound_ratio`). Also the bytes the store's host sent (its link's
kernel counters) against the data's size. Prints one JSON object (`--out FILE`: also to
FILE).

Formats: `parquet` (synthetic clicks, 13 dense and 26 categorical columns, row groups of
65,536 rows, shared by row group) and `criteo` (the same examples as Criteo TSV lines,
shared on the store by byte ranges of 4 MiB, locally by line blocks).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import pickle
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

BOX = "rsbr"
SUBNET = "10.215.0.0/24"
STORE_HOST = 2
READER_HOSTS = (0, 1)
SUPPORT = Path(__file__).resolve().parent.parent / "tests" / "support"
START_WAIT_S = 300


def _write_files(where: Path, fmt: str, files: int, rows: int) -> list[Path]:
    import pyarrow.parquet as pq

    from recsync.app.cli.data import Split, write_synthetic_parquet
    from recsync.data.synthetic import SyntheticSpec

    paths = []
    for day in range(files):
        spec = SyntheticSpec(num_train=rows, seed=day, num_dense=13, table_rows=(1_000,) * 26)
        path = where / f"part-{day}.parquet"
        write_synthetic_parquet(spec, path, Split.train)
        if fmt == "criteo":  # label, 13 counts, 26 ids in hexadecimal, tab-separated
            table = pq.read_table(path)
            columns = [table.column(0)] + [table.column(i) for i in range(1, 14)]
            ids = [[format(v, "x") for v in table.column(i).to_pylist()] for i in range(14, 40)]
            text = where / f"part-{day}.txt"
            with text.open("w") as out:
                dense = [c.to_pylist() for c in columns]
                for r in range(table.num_rows):
                    out.write(
                        "\t".join([str(c[r]) for c in dense] + [col[r] for col in ids]) + "\n"
                    )
            path.unlink()
            path = text
        paths.append(path)
    return paths


def _overrides(fmt: str, path: str, endpoint: str | None) -> dict[str, Any]:
    common: dict[str, Any] = {
        "data.path": path,
        "data.test_fraction": 0.01,
        "data.test_max_examples": 1_000,
        "model.table_rows": 1_000,
        "cluster.num_trainers": 2,
        "cluster.num_readers": len(READER_HOSTS),
        "train.batch_size": 256,
    }
    if endpoint is not None:
        common["data.storage.endpoint"] = endpoint
    if fmt == "parquet":
        return common | {
            "data.source": "parquet",
            "data.schema.dense": [f"I{i}" for i in range(1, 14)],
            "data.schema.categorical": [f"C{i}" for i in range(1, 27)],
        }
    return common | {"data.source": "criteo", "model.num_dense": 13, "model.num_tables": 26}


def _reader_specs(overrides: dict[str, Any]) -> list[tuple[Any, int]]:
    """Each reader's node spec and a trainer it serves, as the job builds them."""
    from recsync.app.config.load import load_config
    from recsync.app.runs.distributed import job_spec
    from recsync.coordinator.spec import plan_for
    from recsync.coordinator.topology import build_topology
    from recsync.protocol.address import Role

    spec = job_spec(load_config(None, overrides))
    topology = build_topology(spec, plan_for(spec))
    readers = []
    for node in topology.of_role(Role.READER):
        index = node.address.index
        trainer = next(
            t for t in range(spec.cluster.num_trainers) if spec.cluster.reader_of(t) == index
        )
        readers.append((node, trainer))
    return readers


def reader_main(spec_file: Path, go: Path, out: Path) -> None:
    """One reader (a child, in its host's namespace): wait for `go`, build, hand out. It is
    built after the common start: its producer starts reading (and reading ahead) as it is
    built, so a reader built before would have read part of its share untimed."""
    import torch

    from recsync.coordinator.node_specs import BuildContext
    from recsync.protocol.reading import NextBatch

    torch.set_num_threads(1)
    node_spec, trainer = pickle.loads(spec_file.read_bytes())
    out.with_suffix(".ready").touch()
    deadline = time.monotonic() + START_WAIT_S
    while not go.exists():
        assert time.monotonic() < deadline, "no common start"
        time.sleep(0.01)
    cpu = time.process_time()
    node = node_spec.build(BuildContext(one_at_a_time=False, background_reading=True))
    examples = 0
    while (handed := node.handle(NextBatch(trainer))).batch is not None:
        examples += handed.batch.batch_size
    end = time.time()
    spent = time.process_time() - cpu + node.helper_cpu_seconds()  # and its producer's
    node.close()
    out.write_text(json.dumps({"examples": examples, "end": end, "cpu_s": spent}))


def _one_run(box: Any, readers: list[tuple[Any, int]], work: Path) -> tuple[float, int, float]:
    """(combined examples/s, examples, examples/s at the busiest reader's CPU: the rate
    with a core a reader and the store's work elsewhere) of the readers on their hosts
    from a common start."""
    from recsync.tools.box import ops

    for stale in work.glob("r*"):
        stale.unlink()
    go = work / "go"
    go.unlink(missing_ok=True)
    procs = []
    for (node, trainer), host in zip(readers, READER_HOSTS, strict=True):
        spec_file, out = work / f"r{host}.spec", work / f"r{host}.json"
        spec_file.write_bytes(pickle.dumps((node, trainer)))
        argv = [sys.executable, __file__, "--reader", str(spec_file), str(go), str(out)]
        procs.append(subprocess.Popen(ops.in_host(box.plan, host, argv)))
    deadline = time.monotonic() + START_WAIT_S
    while not all((work / f"r{h}.ready").exists() for h in READER_HOSTS):
        if any(p.poll() not in (None, 0) for p in procs) or time.monotonic() > deadline:
            raise RuntimeError("a reader failed to start")
        time.sleep(0.05)
    began = time.time()
    go.touch()
    for proc in procs:
        if proc.wait(timeout=3600) != 0:
            raise RuntimeError(f"a reader exited with {proc.returncode}")
    results = [json.loads((work / f"r{h}.json").read_text()) for h in READER_HOSTS]
    examples = sum(r["examples"] for r in results)
    cpu_bound = examples / max(r["cpu_s"] for r in results)
    return examples / (max(r["end"] for r in results) - began), examples, cpu_bound


@contextlib.contextmanager
def _box(mbit: float, delay_ms: float) -> Iterator[Any]:
    from recsync.tools.box import ops
    from recsync.tools.box.plan import BoxPlan, Link

    ops.down(BOX)
    state = ops.up(BoxPlan(3, name=BOX, subnet=SUBNET), Link(None), start_ray=False)
    try:
        delay = delay_ms if ops.netem_available(state.plan) else 0.0
        yield ops.shape(BOX, STORE_HOST, Link(mbit, delay_ms=delay)), delay
    finally:
        ops.down(BOX)


def measure(fmt: str, files: int, rows: int, repeats: int, mbit: float, delay_ms: float) -> dict:
    sys.path.insert(0, str(SUPPORT))
    from object_store import ACCESS_KEY, SECRET_KEY, ObjectStore

    from recsync.tools.box.counters import counters

    os.environ.update(
        AWS_ACCESS_KEY_ID=ACCESS_KEY,
        AWS_SECRET_ACCESS_KEY=SECRET_KEY,
        AWS_DEFAULT_REGION="us-east-1",
        AWS_EC2_METADATA_DISABLED="true",
    )
    with tempfile.TemporaryDirectory() as where, _box(mbit, delay_ms) as (box, delay):
        data, work = Path(where) / "data", Path(where) / "work"
        data.mkdir()
        work.mkdir()
        paths = _write_files(data, fmt, files, rows)
        size = sum(p.stat().st_size for p in paths)
        namespace = box.plan.namespace(STORE_HOST)
        store = ObjectStore(box.plan.ip(STORE_HOST), prefix=["ip", "netns", "exec", namespace])
        store.start()
        try:
            for path in paths:
                store.put(path, f"bench/{path.name}")
            local = _reader_specs(_overrides(fmt, str(data) + "/", None))
            remote = _reader_specs(_overrides(fmt, "s3://clicks/bench/", store.endpoint))
            rates: dict[str, list[float]] = {"local": [], "store": []}
            cpu_rates: dict[str, list[float]] = {"local": [], "store": []}
            sent: list[int] = []
            examples = 0
            for _ in range(repeats):
                rate, _, cpu_bound = _one_run(box, local, work)
                rates["local"].append(rate)
                cpu_rates["local"].append(cpu_bound)
                before = counters(box)[STORE_HOST]["tx_bytes"]
                rate, examples, cpu_bound = _one_run(box, remote, work)
                rates["store"].append(rate)
                cpu_rates["store"].append(cpu_bound)
                sent.append(counters(box)[STORE_HOST]["tx_bytes"] - before)
        finally:
            store.stop()
    medians = {k: statistics.median(v) for k, v in rates.items()}
    cpu_medians = {k: statistics.median(v) for k, v in cpu_rates.items()}
    return {
        "format": fmt,
        "files": files,
        "examples": examples,
        "data_bytes": size,
        "store_link": {"mbit": mbit, "delay_ms_each_way": delay},
        "readers": len(READER_HOSTS),
        "cpus": os.cpu_count(),
        "repeats": repeats,
        "examples_per_s": {k: round(m) for k, m in medians.items()},
        "runs": {k: [round(x) for x in v] for k, v in rates.items()},
        "ratio": round(medians["store"] / medians["local"], 3),
        "cpu_bound_examples_per_s": {k: round(m) for k, m in cpu_medians.items()},
        "cpu_bound_ratio": round(cpu_medians["store"] / cpu_medians["local"], 3),
        "store_sent_bytes_per_run": sent,
        "sent_over_data": round(statistics.median(sent) / size, 3),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--format", choices=("parquet", "criteo"), nargs="+")
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--rows", type=int, default=250_000, help="examples a file")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--mbit", type=float, default=1000.0, help="the store host's link")
    parser.add_argument("--delay-ms", type=float, default=2.0, help="added each way")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    results = [
        measure(fmt, args.files, args.rows, args.repeats, args.mbit, args.delay_ms)
        for fmt in args.format or ("parquet", "criteo")
    ]
    for result in results:
        print(json.dumps(result), flush=True)
    if args.out:
        args.out.write_text(json.dumps({"results": results}, indent=1) + "\n")


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--reader":
        reader_main(Path(sys.argv[2]), Path(sys.argv[3]), Path(sys.argv[4]))
    else:
        main()
