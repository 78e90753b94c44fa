"""The default job on three data files, on the Ray engine and in the simulator side by side:
does the simulator, calibrated on this machine and on each file's reader, predict the
engine's examples/s (the target: within 20%)?

The files (written to a temporary directory): a Frappe-shaped libffm file (10 fields, every
one categorical, ~5,400 features over them, a third of the labels positive), the synthetic
task as Criteo TSV lines, and the synthetic task as Parquet (its columns inferred); each
`--examples` lines. The job is the default config (S-EASGD, 2 trainers x 2 workers, 2
embedding servers; file data on hash tables) with `data.path` the file and 2% held out.

One run: the machine is calibrated first (`recsync calibrate`'s engine jobs, `--fit-examples`
each), then for each file the reader is timed on it (`recsync calibrate --data`), the job
runs `--repeats` times on the engine (the median EPS kept; every EPS here the steady rate,
`eps_steady`, docs/simulator.md, "Examples per second") and once in the simulator with
the file's price of an example, and once with the synthetic stream's price of a batch
(`reader_batch_s`, what the simulator charged before): the reader term's share. Prints a
JSON line per file and writes them all to `--out` (reports/reader_cost/results.json), whose
figures docs/readers.md quotes (`--render FILE` rewrites that section from a results file,
benchmarks/reader_sizing_doc.py; `--no-render` leaves it). Start Ray under the machine's lock:
`flock /tmp/ray.lock`.

Each row also gives the cores each run kept busy (EPS x CPU an example: on a machine other
work loads the engine gets fewer than the simulator's `shared_cpus`) and `cpu_ratio`, the
engine's CPU an example over the simulator's (what the prices miss, whatever the load).
`--figures FILE` measures calibration once and reuses it (runs compared on one profile).
The engine loads a hash server's compiled kernels when it builds the node
(runtime/ray/kernels.py), outside the run the simulator prices.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import tempfile
import time
from pathlib import Path
from typing import Any

import ray
import torch

from bench_readers import write_criteo
from reader_sizing_doc import DOC, write_section
from recsync.app.cli.data import Split, write_synthetic_parquet
from recsync.app.config.load import load_config
from recsync.app.runs.calibrate import cost_from, engine_figures
from recsync.app.runs.cost_profile import profile_text
from recsync.app.runs.distributed import job_spec
from recsync.app.runs.reader_cost import measure_reader, with_reader_cost
from recsync.coordinator.outcome import HELPER_PROCESSES
from recsync.coordinator.spec import JobSpec, plan_for
from recsync.data.synthetic import SyntheticSpec
from recsync.runtime.ray.job import connect, run_job
from recsync.runtime.sim.cost import CostModel
from recsync.runtime.sim.job import SimJob

FRAPPE_FIELDS = (957, 4082, 7, 7, 2, 3, 3, 80, 233, 8)  # Frappe's features per field (5,382)
HELD_OUT = 0.02
FIT_KEYS = ("config", "measured_eps", "predicted_eps", "error")


def write_frappe_like(count: int, path: Path) -> None:
    """`count` libffm lines shaped as Frappe's: 10 categorical fields, each line one feature
    of each (Zipf-like within the field; feature numbers global), 1 label in 3 positive."""
    rng = random.Random(0)
    offsets = [sum(FRAPPE_FIELDS[:i]) for i in range(len(FRAPPE_FIELDS))]
    weights = [[1.0 / (rank + 1) for rank in range(size)] for size in FRAPPE_FIELDS]
    drawn = [
        rng.choices(range(size), weights=w, k=count)
        for size, w in zip(FRAPPE_FIELDS, weights, strict=True)
    ]
    with open(path, "w") as out:
        for line in range(count):
            tokens = ["1" if rng.random() < 1 / 3 else "0"]
            tokens += [
                f"{field}:{offsets[field] + drawn[field][line]}:1"
                for field in range(len(FRAPPE_FIELDS))
            ]
            out.write(" ".join(tokens) + "\n")


def write_files(examples: int, where: Path) -> dict[str, tuple[Path, dict[str, Any]]]:
    """The three files, each with the --set keys its job needs beyond data.path."""
    frappe, criteo, table = where / "frappe.libffm", where / "criteo.tsv", where / "train.parquet"
    write_frappe_like(examples, frappe)
    spec = SyntheticSpec(num_train=examples)
    write_criteo(spec, criteo)
    write_synthetic_parquet(spec, table, Split.train)
    return {
        "libffm (Frappe-shaped)": (
            frappe,
            {"data.source": "libffm", "model.num_tables": len(FRAPPE_FIELDS)},
        ),
        "criteo TSV": (criteo, {"data.source": "criteo"}),
        "parquet": (table, {"data.source": "parquet"}),
    }


def default_job(path: Path, keys: dict[str, Any]) -> JobSpec:
    """The default config's job on the file at `path`."""
    overrides = {"data.path": str(path), "data.test_fraction": HELD_OUT, **keys}
    return job_spec(load_config(None, overrides))


def producer_us(run: dict[str, Any]) -> float | None:
    """CPU microseconds the engine's reader producer spent an example trained."""
    spent = run.get("thread_cpu_seconds", {}).get("reader", {}).get(HELPER_PROCESSES)
    return round(spent / run["examples_trained"] * 1e6, 2) if spent else None


def case_row(
    name: str, spec: JobSpec, cost: CostModel, repeats: int, sample: int
) -> dict[str, Any]:
    """One file: the reader timed on it, the engine's runs, the simulator's two runs."""
    assert spec.files is not None
    reader = measure_reader(spec.files, spec.train, examples=sample)
    priced = with_reader_cost(cost, reader)
    runs = []
    for _ in range(repeats):
        started = time.perf_counter()
        run = run_job(spec, num_cpus=os.cpu_count())
        run["wall_s"] = time.perf_counter() - started
        runs.append(run)
    engine = sorted(runs, key=lambda r: r["eps_steady"])[len(runs) // 2]
    plan = plan_for(spec)
    simulated = SimJob(spec, plan, priced).run()
    unpriced = SimJob(spec, plan, cost).run()
    return {
        "file": name,
        "format": spec.files.fmt,
        "examples": engine["examples_trained"],
        "batch_size": spec.train.batch_size,
        "tables": len(spec.model.tables),
        "dense_features": spec.model.num_dense,
        "reader_us_per_example": round(reader.example_s * 1e6, 2),
        "reader_us_per_example_passes": [round(s * 1e6, 2) for s in reader.passes],
        "engine_producer_us_per_example": producer_us(engine),
        "engine_eps_steady": round(engine["eps_steady"]),
        "engine_eps_steady_each": [round(r["eps_steady"]) for r in runs],
        "engine_wall_s_each": [round(r["wall_s"], 1) for r in runs],
        "sim_eps_steady": round(simulated["eps_steady"]),
        "ratio": round(simulated["eps_steady"] / engine["eps_steady"], 3),
        "sim_eps_steady_synthetic_batch_price": round(unpriced["eps_steady"]),
        "ratio_synthetic_batch_price": round(unpriced["eps_steady"] / engine["eps_steady"], 3),
        "engine_cpu_us_per_example": cpu_us(engine),
        "sim_cpu_us_per_example": cpu_us(simulated),
        "engine_cpu_us_per_example_each": [cpu_us(r) for r in runs],
        "engine_cores": cores_used(engine),
        "sim_cores": cores_used(simulated),
        "cpu_ratio": round(total_cpu_us(engine) / total_cpu_us(simulated), 3),
    }


def total_cpu_us(summary: dict[str, Any]) -> float:
    """CPU microseconds an example trained, all roles together."""
    return sum(summary["cpu_seconds"].values()) / summary["examples_trained"] * 1e6


def cores_used(summary: dict[str, Any]) -> float:
    """Cores the run's processes kept busy while training (examples/s over the whole run x
    CPU an example, both over the whole run): on a machine that other work loads, the
    engine gets fewer than the simulator's shared_cpus."""
    return round(summary["eps"] * total_cpu_us(summary) / 1e6, 2)


def cpu_us(summary: dict[str, Any]) -> dict[str, float]:
    examples = summary["examples_trained"]
    return {
        role: round(seconds / examples * 1e6, 1)
        for role, seconds in summary.get("cpu_seconds", {}).items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--examples", type=int, default=60_000, help="lines of each file")
    parser.add_argument("--fit-examples", type=int, default=60_000)
    parser.add_argument(
        "--fit-repeats", type=int, default=1, help="engine runs of each fit job (the median)"
    )
    parser.add_argument(
        "--figures",
        type=Path,
        metavar="FILE",
        help="calibration's figures (engine_figures' JSON): read from FILE where it exists, "
        "else measured and written there (runs compared on one profile)",
    )
    parser.add_argument("--repeats", type=int, default=3, help="engine runs of each file")
    parser.add_argument("--sample", type=int, default=50_000, help="examples a reader pass")
    parser.add_argument("--out", type=Path, default=Path("reports/reader_cost/results.json"))
    parser.add_argument("--render", type=Path, metavar="FILE", help=f"only rewrite {DOC}")
    parser.add_argument("--no-render", action="store_true", help=f"leave {DOC} as it is")
    args = parser.parse_args()
    if args.render:
        write_section(json.loads(args.render.read_text()))
        return
    torch.set_num_threads(1)
    cpus = os.cpu_count() or 1
    load_before = os.getloadavg()
    started = time.perf_counter()
    connect(None, cpus)
    if args.figures is not None and args.figures.exists():
        figures = json.loads(args.figures.read_text())
    else:
        figures = engine_figures(args.fit_examples, repeats=args.fit_repeats)
        if args.figures is not None:
            args.figures.write_text(json.dumps(figures) + "\n")
    cost, measured, fit_rows = cost_from(figures, cpus)
    fit_checks = [{key: r[key] for key in FIT_KEYS} for r in fit_rows]
    print(json.dumps({"fit_checks": fit_checks}), flush=True)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, (path, keys) in write_files(args.examples, Path(tmp)).items():
            row = case_row(name, default_job(path, keys), cost, args.repeats, args.sample)
            print(json.dumps(row), flush=True)
            rows.append(row)
    if ray.is_initialized():
        ray.shutdown()
    results = results_of(args, cost, measured, fit_checks, rows)
    results["load_before"] = load_before
    results["wall_s"] = round(time.perf_counter() - started)
    results["figures"] = None if args.figures is None else str(args.figures)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1) + "\n")
    if not args.no_render:
        write_section(results)
    print(json.dumps({k: results[k] for k in ("max_abs_error", "wall_s")}))


def results_of(
    args: argparse.Namespace,
    cost: CostModel,
    measured: dict[str, float],
    fit_checks: list[dict[str, Any]],
    rows: list[dict[str, Any]],
) -> dict[str, Any]:
    return {
        "benchmark": "bench_sim_vs_engine",
        "examples": args.examples,
        "fit_examples": args.fit_examples,
        "repeats": args.repeats,
        "cores": os.cpu_count(),
        "load_after": os.getloadavg(),
        "profile": {
            "reader_batch_s": cost.reader_batch_s,
            "job_reader_batch_s": measured.get("job_reader_batch_s"),
        },
        "cost_profile": profile_text(cost),
        "fit_checks": fit_checks,
        "rows": rows,
        "max_abs_error": max(abs(r["ratio"] - 1) for r in rows),
    }


if __name__ == "__main__":
    main()
