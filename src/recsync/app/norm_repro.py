"""Staleness normalization for async SGD at 1,000 workers, in the simulator (Liu & Zhao,
AAAI 2021, Fig. 5: no normalization vs the 1/tau rule of Zhang et al. 2016 vs rho(tau) with
kappa = 2 and mu' = the mean staleness of a 100-worker cluster).

Uses the cluster and small model of the staleness reproduction (async_staleness); mu' is
measured here first, with 100 workers. Each variant trains the same examples; the test AUC
is recorded every EVAL_EVERY examples (virtual time, no cost).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt

from recsync.app.staleness_repro import CLUSTER_COST, small_model
from recsync.coordinator.job import ClusterSpec
from recsync.coordinator.planning import JobSpec, plan_for
from recsync.data.synthetic import SyntheticSpec
from recsync.runtime.sim.job import SimJob
from recsync.sync.asynchronous import AsyncConfig
from recsync.sync.staleness_norm import StalenessNorm
from recsync.trainer.reference import TrainSpec

WORKERS = 1000
BASE_WORKERS = 100
STEPS_PER_WORKER = 20
BATCH_SIZE = 32
EVAL_EVERY = 64_000
SERVERS = 8


def run(workers: int, norm: StalenessNorm | None, examples: int, eval_every: int | None):
    synthetic = dataclasses.replace(SyntheticSpec(), num_train=examples, num_test=20_000)
    spec = JobSpec(
        small_model(),
        TrainSpec(batch_size=BATCH_SIZE),
        ClusterSpec(workers, 1, SERVERS, SERVERS),
        AsyncConfig(staleness_norm=norm),
        synthetic,
    )
    sim = SimJob(spec, plan_for(spec), CLUSTER_COST, eval_every=eval_every)
    return sim, sim.run()


def reproduce(out_dir: Path, progress=None) -> dict[str, Any]:
    out_dir.mkdir(parents=True, exist_ok=True)
    _, base = run(BASE_WORKERS, None, BASE_WORKERS * STEPS_PER_WORKER * BATCH_SIZE, None)
    mu_prime = base["dense_staleness"]["mean"]
    if progress:
        progress(f"mean staleness with {BASE_WORKERS} workers: mu' = {mu_prime:.1f}")
    variants = {
        "no normalization": None,
        "1/tau (Zhang et al. 2016)": StalenessNorm(rule="inverse"),
        f"rho, kappa=2, mu'={mu_prime:.0f}": StalenessNorm(mu_prime=mu_prime, kappa=2.0),
    }
    examples = WORKERS * STEPS_PER_WORKER * BATCH_SIZE
    curves = {}
    for label, norm in variants.items():
        sim, summary = run(WORKERS, norm, examples, EVAL_EVERY)
        curves[label] = {
            "curve": sim.curve,
            "final_auc": summary["test_auc"],
            "mean_staleness": summary["dense_staleness"]["mean"],
        }
        if progress:
            progress(f"{label}: final AUC {summary['test_auc']:.4f}")
    result = {"mu_prime": mu_prime, "examples": examples, "variants": curves}
    (out_dir / "results.json").write_text(json.dumps(result, indent=1))
    _plot(curves, out_dir / "auc_over_examples.png")
    (out_dir / "report.md").write_text(_report(result))
    return result


def _plot(curves: dict[str, Any], path: Path) -> None:
    fig, ax = plt.subplots(figsize=(7, 4))
    for label, data in curves.items():
        points = data["curve"]
        ax.plot([p["examples"] for p in points], [p["auc"] for p in points], label=label)
    ax.set_xlabel("examples")
    ax.set_ylabel("test AUC")
    ax.set_title(f"async, {WORKERS} workers: staleness normalization (simulated)")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _report(result: dict[str, Any]) -> str:
    lines = [
        f"# Staleness normalization, async with {WORKERS} workers (simulator)",
        "",
        f"Small model (dim 8, MLPs 64-32), batch {BATCH_SIZE}, {result['examples']:,} "
        f"examples, {SERVERS} embedding and {SERVERS} dense servers, the cluster of "
        "reports/async_staleness. mu' is the mean dense staleness measured with "
        f"{BASE_WORKERS} workers: {result['mu_prime']:.1f}. rho scales each dense block's and "
        "each embedding row's gradient by its own staleness.",
        "",
        "![AUC over examples](auc_over_examples.png)",
        "",
        "| variant | final test AUC | mean dense staleness |",
        "| --- | --- | --- |",
    ]
    for label, data in result["variants"].items():
        lines.append(f"| {label} | {data['final_auc']:.4f} | {data['mean_staleness']:.1f} |")
    return "\n".join(lines) + "\n"
