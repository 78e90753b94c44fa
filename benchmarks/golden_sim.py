"""Golden results of a fixed set of small seeded simulator runs (every strategy, faults,
a resumed switch), for checking that a change leaves the simulator's behaviour unchanged.

Runs go through the `recsync simulate` command, so the script works on any version that
accepts the same config keys. Each run's digest is its summary (without paths) and a
SHA-256 of every tensor in its checkpoint.

    python benchmarks/golden_sim.py --out /tmp/new.json
    python benchmarks/golden_sim.py --compare /tmp/old.json /tmp/new.json [--ignore KEY ...]

`--ignore` leaves out every field of that name, at any depth (e.g. measures whose
accounting a change meant to alter).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import torch
from typer.testing import CliRunner

from recsync.app.cli.main import app
from recsync.app.runs.checkpoints import load_checkpoint

BASE = [
    "data.synthetic.num_train=6144",
    "data.synthetic.num_test=1000",
    "data.synthetic.num_dense=4",
    "data.synthetic.table_rows=[50, 50, 50, 50, 50, 50]",
    "model.embedding_dim=8",
    "model.bottom_mlp=[16]",
    "model.top_mlp=[16]",
    "train.batch_size=64",
    "cluster.num_trainers=2",
    "cluster.workers_per_trainer=2",
    "cluster.num_embedding_servers=2",
    "cluster.num_dense_servers=2",  # EASGD's sync servers, a gradient strategy's dense servers
    "cost.speed_spread=0.1",
    "cost.batch_noise=0.1",
]
STRAGGLERS = ["cost.stragglers.fraction=0.5", "cost.stragglers.slowdown=3.0"]
DELAYS = ["cost.faults.delay_fraction=0.1", "cost.faults.delay_s=0.005"]
ONE_RANK_EACH = ["cluster.num_trainers=3", "cluster.workers_per_trainer=1"]


def crash(trainer: int) -> list[str]:
    return [f"cost.faults.crash_trainer={trainer}", "cost.faults.crash_at_s=0.004"]


RUNS: dict[str, list[str]] = {
    "independent": ["strategy.name=independent"],
    "s-easgd": ["strategy.name=easgd"],
    "s-easgd-gap0": ["strategy.name=easgd", "strategy.shadow_min_gap=0"],
    "fr-easgd-3": ["strategy.name=easgd", "strategy.timing=fixed", "strategy.every_iterations=3"],
    "fr-easgd-5ms": [
        "strategy.name=easgd",
        "strategy.timing=fixed",
        "strategy.every_seconds=0.005",
    ],
    "s-ma": ["strategy.name=ma"],
    "fr-ma-2": ["strategy.name=ma", "strategy.timing=fixed", "strategy.every_iterations=2"],
    "s-bmuf-nesterov": [
        "strategy.name=bmuf",
        "strategy.block_lr=0.8",
        "strategy.block_momentum=0.5",
        "strategy.nesterov=true",
    ],
    "fr-bmuf-5ms": ["strategy.name=bmuf", "strategy.timing=fixed", "strategy.every_seconds=0.005"],
    "async": ["strategy.name=async"],
    "async-rho": ["strategy.name=async", "strategy.staleness_norm.mu_prime=1.0"],
    "async-inverse-sigmoid": [
        "strategy.name=async",
        "strategy.staleness_norm.rule=inverse",
        "strategy.staleness_norm.sigmoid_lambda=1.0",
    ],
    "sync": ["strategy.name=sync"],
    "sync-stragglers": ["strategy.name=sync", *STRAGGLERS],
    "bsp-3": ["strategy.name=bsp", "strategy.num_aggregate=3"],
    "hop-bs-1": ["strategy.name=bounded_staleness", "strategy.staleness=1", *STRAGGLERS],
    "hop-bw-1": ["strategy.name=backup_workers", "strategy.num_backup=1", *STRAGGLERS],
    "gba-iota0": [
        "strategy.name=gba",
        "strategy.iota=0",
        "cluster.workers_per_trainer=4",
        "cost.stragglers.fraction=0.25",
        "cost.stragglers.slowdown=8.0",
    ],
    "gba-exponential": [
        "strategy.name=gba",
        "strategy.decay=exponential",
        "strategy.num_aggregate=3",
    ],
    "psp-partial": [
        "strategy.name=psp",
        "strategy.push_count=2",
        "strategy.push_wait_s=0.0005",
        "strategy.pull_fraction=0.5",
        "strategy.pull_wait_s=0.001",
        *DELAYS,
    ],
    "psp-full": ["strategy.name=psp", *DELAYS],
    "allreduce": ["strategy.name=allreduce", *ONE_RANK_EACH],
    "async-crash": [
        "strategy.name=async",
        "cost.faults.crash_trainer=1",
        "cost.faults.crash_at_s=0.004",
    ],
    "easgd-crash": [
        "strategy.name=easgd",
        "cost.faults.crash_trainer=0",
        "cost.faults.crash_at_s=0.004",
    ],
    "async-datanorm-adam-swap": [
        "strategy.name=async",
        "model.data_norm=true",
        "train.dense_optimizer.name=adam",
        "train.sparse_optimizer.swap.decay=0.5",
        "train.sparse_optimizer.swap.period=20",
    ],
}
# (name, first run's overrides, --stop-after, strategy of the resumed run)
SWITCHES = [
    ("sync-then-gba", ["strategy.name=sync"], 3072, "gba"),
    ("easgd-then-async", ["strategy.name=easgd"], 3072, "async"),
    ("async-then-ma", ["strategy.name=async"], 3072, "ma"),
]


def _simulate(runs_dir: Path, name: str, overrides: list[str], options: tuple = ()) -> Path:
    keys = [*BASE, f"run.runs_dir={runs_dir}", *overrides]
    command = ["simulate", "--no-progress", "--name", name, *options]
    command += [x for key in keys for x in ("--set", key)]
    result = CliRunner().invoke(app, command, catch_exceptions=False)
    if result.exit_code != 0:
        raise SystemExit(f"{name}: exit {result.exit_code}\n{result.output}")
    return runs_dir / name


def _tensor_digests(tree: Any, prefix: str, out: dict[str, Any]) -> None:
    if isinstance(tree, torch.Tensor):
        data = tree.detach().contiguous().cpu()
        out[prefix] = hashlib.sha256(data.numpy().tobytes()).hexdigest()[:16]
    elif isinstance(tree, dict):
        for key in sorted(tree, key=str):
            _tensor_digests(tree[key], f"{prefix}.{key}" if prefix else str(key), out)
    elif isinstance(tree, list | tuple):
        for i, item in enumerate(tree):
            _tensor_digests(item, f"{prefix}[{i}]", out)
    else:
        out[prefix] = tree


def digest(run: Path) -> dict[str, Any]:
    summary = json.loads((run / "summary.json").read_text())
    summary.pop("run_dir", None)
    for kept in ("checkpoint", "best"):  # files in this run's directory
        if isinstance(summary.get(kept), dict):
            summary[kept].pop("path", None)
    tensors: dict[str, Any] = {}
    _tensor_digests(load_checkpoint(run).to_dict(), "", tensors)
    return {"summary": summary, "checkpoint": tensors}


def record(out: Path) -> None:
    torch.set_num_threads(1)
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        runs = Path(tmp)
        for name, args in RUNS.items():
            results[name] = digest(_simulate(runs, name, args))
            print(name, results[name]["summary"]["test_auc"], flush=True)
        for name, args, stop, then in SWITCHES:
            first = _simulate(runs, name, args, ("--stop-after", str(stop)))
            resumed = _simulate(runs, f"{name}-2", [], ("--resume", str(first), "--strategy", then))
            results[name] = {"first": digest(first), "resumed": digest(resumed)}
            print(name, results[name]["resumed"]["summary"]["test_auc"], flush=True)
    out.write_text(json.dumps(results, indent=1, sort_keys=True) + "\n")


def _diff(old: Any, new: Any, path: str, rows: list[str], ignore: set[str]) -> None:
    if isinstance(old, dict) and isinstance(new, dict):
        for key in sorted(set(old) | set(new)):
            if key in ignore:
                continue
            if key not in new:
                rows.append(f"{path}.{key}: only in the first")
            elif key not in old:
                rows.append(f"{path}.{key}: only in the second")
            else:
                _diff(old[key], new[key], f"{path}.{key}", rows, ignore)
    elif old != new:
        rows.append(f"{path}: {old!r} != {new!r}")


def compare(old_path: Path, new_path: Path, ignore: set[str]) -> int:
    rows: list[str] = []
    _diff(json.loads(old_path.read_text()), json.loads(new_path.read_text()), "", rows, ignore)
    print("\n".join(rows) if rows else "identical")
    return 1 if rows else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="record the golden results here")
    parser.add_argument("--compare", type=Path, nargs=2, metavar=("OLD", "NEW"))
    parser.add_argument("--ignore", nargs="*", default=[], help="field names left out")
    args = parser.parse_args()
    if args.compare:
        sys.exit(compare(*args.compare, set(args.ignore)))
    record(args.out or Path("golden_sim.json"))


if __name__ == "__main__":
    main()
