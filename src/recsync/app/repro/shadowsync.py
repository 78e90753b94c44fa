"""Reproduction of ShadowSync's Fig. 5 in the simulator: EPS vs number of trainers for
S-EASGD, FR-EASGD-5 and FR-EASGD-30 with 2 sync servers on a 25 Gbit network.

Claim under test: FR-EASGD-5's foreground syncs saturate the 2 sync servers' NICs, so its
EPS plateaus as trainers are added, while S-EASGD (background syncs, m times less traffic
at the same sync gap) keeps growing linearly; its average sync gap is measured per point.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from recsync.app.repro import common
from recsync.app.repro.common import Progress
from recsync.app.runs.plots import new_figure, save_figure
from recsync.coordinator.spec import ClusterSpec, JobSpec, plan_for
from recsync.data.synthetic import SyntheticSpec
from recsync.model.spec import ModelSpec
from recsync.optim.train_spec import TrainSpec
from recsync.protocol.address import Role
from recsync.runtime.sim.job import SimJob
from recsync.sync.registry import strategy_config
from recsync.sync.replica import Timing

TRAINERS = (5, 10, 15, 20)
WORKERS_PER_TRAINER = 4
ITERATIONS_PER_THREAD = 40
SYNC_SERVERS = 2
# 25 Gbit/s NICs; a worker thread does the default DLRM's dense step for 256 examples in
# ~5.8 ms; small server overheads. With these, FR-EASGD-5's foreground syncs fill the two
# sync servers' NICs at about 12 trainers (5 * t_iter * bandwidth / (m * 1.9 MB)).
# The other reproductions' cluster, without speed spread or batch noise (Fig. 5 is steady state).
CLUSTER_COST = dataclasses.replace(common.CLUSTER_COST, speed_spread=0.0, batch_noise=0.0)
VARIANTS = {
    "S-EASGD": Timing(),
    "FR-EASGD-5": Timing("fixed", every_iterations=5),
    "FR-EASGD-30": Timing("fixed", every_iterations=30),
}


def examples_for(trainers: int, batch_size: int) -> int:
    """Enough data for every worker thread to run ITERATIONS_PER_THREAD iterations."""
    return trainers * WORKERS_PER_TRAINER * ITERATIONS_PER_THREAD * batch_size


def run_point(variant: str, trainers: int) -> dict[str, Any]:
    train = TrainSpec()
    examples = examples_for(trainers, train.batch_size)
    synthetic = dataclasses.replace(SyntheticSpec(), num_train=examples, num_test=2_000)
    spec = JobSpec(
        ModelSpec(),
        train,
        ClusterSpec(trainers, WORKERS_PER_TRAINER, trainers, SYNC_SERVERS),
        strategy_config("easgd", timing=VARIANTS[variant]),
        synthetic,
    )
    sim = SimJob(spec, plan_for(spec), CLUSTER_COST)
    summary = sim.run()
    sync_servers = sim.hosts_of(Role.SYNC_SERVER)
    busy = max(h.machine.nic_busy_s for h in sync_servers) / summary["train_seconds"]
    return {
        "variant": variant,
        "trainers": trainers,
        "examples": examples,
        "eps": float(summary["eps_steady"]),
        "average_sync_gap": summary["average_sync_gap"],
        "sync_server_nic_utilization": float(busy),
        "test_auc": summary["test_auc"],
    }


def reproduce(out_dir: Path, progress: Progress | None = None) -> list[dict[str, Any]]:
    out_dir.mkdir(parents=True, exist_ok=True)
    points = []
    for variant in VARIANTS:
        for trainers in TRAINERS:
            points.append(run_point(variant, trainers))
            if progress:
                progress(points[-1])
    (out_dir / "points.json").write_text(json.dumps(points, indent=1))
    _plot(points, out_dir / "eps_vs_trainers.png")
    (out_dir / "report.md").write_text(_report(points))
    return points


def _plot(points: list[dict[str, Any]], path: Path) -> None:
    fig, ax = new_figure(6, 4)
    for variant in VARIANTS:
        rows = [p for p in points if p["variant"] == variant]
        ax.plot([p["trainers"] for p in rows], [p["eps"] for p in rows], marker="o", label=variant)
        if variant == "S-EASGD":
            for p in rows:
                ax.annotate(
                    f"gap {p['average_sync_gap']:.1f}",
                    (p["trainers"], p["eps"]),
                    textcoords="offset points",
                    xytext=(4, -12),
                    fontsize=8,
                )
    ax.set_xlabel("trainers")
    ax.set_ylabel("examples / s (virtual)")
    ax.set_title(f"EASGD, {SYNC_SERVERS} sync servers, 25 Gbit/s (simulated)")
    ax.grid(alpha=0.3)
    ax.legend()
    save_figure(fig, path)


def _report(points: list[dict[str, Any]]) -> str:
    lines = [
        "# ShadowSync Fig. 5 in the simulator",
        "",
        f"Default DLRM (dense part 475,985 parameters, 1.9 MB), {WORKERS_PER_TRAINER} worker "
        f"threads per trainer, as many embedding servers as trainers, {SYNC_SERVERS} sync "
        f"servers, 25 Gbit/s NICs; {ITERATIONS_PER_THREAD} iterations of batch 256 per worker "
        "thread per point; EPS measured while the middle 60% of the data was handed out "
        "(virtual time). Cost model: "
        f"`{CLUSTER_COST}`.",
        "",
        "![EPS vs trainers](eps_vs_trainers.png)",
        "",
        "Each point is a throughput run: 40 iterations per worker thread from a fresh model, "
        "so its test AUC says little about the strategies' quality (see the Ray-engine "
        "variant runs for that). The NIC column is the busiest sync server's NIC busy time "
        "(sending and receiving share it) over the run.",
        "",
        "| variant | trainers | EPS | average sync gap | busiest sync-server NIC busy | test AUC |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for p in points:
        gap = "-" if p["average_sync_gap"] is None else f"{p['average_sync_gap']:.2f}"
        lines.append(
            f"| {p['variant']} | {p['trainers']} | {p['eps']:,.0f} | {gap} | "
            f"{p['sync_server_nic_utilization']:.0%} | {p['test_auc']:.4f} |"
        )
    return "\n".join(lines) + "\n"
