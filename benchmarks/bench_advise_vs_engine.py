"""Does `recsync advise`'s ranking hold on the real engine? The advice for the default
job on this machine (a `shared` cluster file of its cores at the dev-2core prices, every
strategy at 1 and 2 trainers and 1 and 2 embedding servers, speed only), then its fastest
and slowest candidates trained on Ray on the same `--examples` of the data, `--repeats`
times each: whether the engine ranks them as the advice did, and predicted over measured
examples/s (the engine's median run; steady examples/s on both sides). Prints JSON;
writes --out and, unless --no-render, docs/advise.md's section and the README's sentence
on it (benchmarks/advise_check_doc.py).

    .venv/bin/python benchmarks/bench_advise_vs_engine.py --repeats 3

With `--address` and `--cluster FILE`, the check runs on that Ray cluster (start it from
one of its machines) against the advice for that cluster file: on the multi-host box, a
`shared` file of its hosts whose profile `recsync calibrate --network` measured
(benchmarks/bench_box.py --advise does it all); the docs are then left as they are.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import ray
import torch

from advise_check_doc import RESULTS, write_sections
from recsync.app.advise.advice import AdviseOptions, advise
from recsync.app.advise.candidates import JobSource
from recsync.app.advise.cluster import load_cluster, parse_cluster
from recsync.app.advise.engine_check import engine_check
from recsync.app.config.load import read_toml_file
from recsync.runtime.ray.job import connect, run_job


def one_machine(cores: int, preset: str) -> dict[str, Any]:
    """The cluster file of this machine: every node on its `cores`, a loopback network."""
    machines = {"count": 1, "cores": cores, "shared": True, "latency_us": 0.0}
    machines |= {"nic_gbps": 8000.0, "preset": preset}
    return {"machines": machines, "grid": {"trainers": [1, 2], "embedding_servers": [1, 2]}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--examples", type=int, default=60_000, help="examples an engine run")
    parser.add_argument("--repeats", type=int, default=3, help="engine runs a candidate")
    parser.add_argument("--preset", default="dev-2core", help="the machine's prices")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--render", type=Path, metavar="FILE", help="only rewrite the docs")
    parser.add_argument("--no-render", action="store_true", help="leave the docs as they are")
    parser.add_argument("--address", help="check on this Ray cluster (run from one of it)")
    parser.add_argument("--cluster", type=Path, help="with --address: its cluster file")
    args = parser.parse_args()
    if (args.address is None) != (args.cluster is None):
        parser.error("--address and --cluster go together")
    if args.render:
        write_sections(json.loads(args.render.read_text()))
        return
    torch.set_num_threads(1)
    cores = os.cpu_count() or 1
    load_before = os.getloadavg()
    started = time.perf_counter()
    job = JobSource(None, {})
    if args.cluster is not None:
        cluster = read_toml_file(args.cluster, "cluster file")
        parsed = load_cluster(args.cluster)
        base_dir = args.cluster.parent
    else:
        cluster = one_machine(cores, args.preset)
        parsed, base_dir = parse_cluster(cluster, "this machine"), None
    advice = advise(job, parsed, AdviseOptions(quality=False), cluster_dir=base_dir)
    advise_s = time.perf_counter() - started
    connect(args.address, None if args.address else cores)
    try:
        check = engine_check(
            advice,
            job,
            args.examples,
            args.repeats,
            lambda spec: run_job(spec, address=args.address, num_cpus=cores),
        )
    finally:
        ray.shutdown()
    results = {
        "benchmark": "bench_advise_vs_engine",
        "command": " ".join(["python", "benchmarks/bench_advise_vs_engine.py", *sys.argv[1:]]),
        "cores": cores,
        "repeats": args.repeats,
        "cluster": cluster,
        "ranked": len([r for r in advice.ranked if r.eps is not None]),
        "advise_s": round(advise_s, 1),
        "check": check.as_dict(),
        "load_before": load_before,
        "load_after": os.getloadavg(),
        "wall_s": round(time.perf_counter() - started),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1) + "\n")
    if not args.no_render and args.address is None:
        write_sections(results)
    print(json.dumps(results))


if __name__ == "__main__":
    main()
