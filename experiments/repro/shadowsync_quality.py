"""ShadowSync's quality tables in the simulator: Table 2(a), train and eval loss against the
sync gap (S-EASGD and FR-EASGD-5/10/30/100 at one scale, one sync server), and Table 3,
the relative loss increase from 5 to 10 and 20 trainers (S-EASGD, FR-EASGD-5, FR-EASGD-30,
two sync servers).

Claims under test: FR-EASGD's eval loss grows with its sync gap and S-EASGD is at least as
good as the best FR (Table 2(a)); S-EASGD's loss grows least as trainers are added,
especially in evaluation (Table 3). Every run trains the same examples of the default
synthetic task in one pass (the paper's one-pass rule); the dense learning rate is tuned
once, on the 5-trainer S-EASGD baseline, and then frozen for every variant and scale (the
paper keeps its production hyper-parameters for all). S-EASGD's shadow thread syncs
without waiting.

The setting beside the paper's: 5 seeds (the paper: one run a cell), 2,097,152 examples a
run (2x the first version's 1M; the paper: billions), 4 worker threads per trainer (the
paper: 24), no speed noise. The issue asked for 10x longer runs with 5 seeds: at ~1.2 minutes
of one core per million examples (real math, measured from the 3-seed, 1M-example runs: 45
runs in 26 minutes on 2 cores), 74 runs of 10.5M examples would take ~15 hours of one core,
beyond the ~3 hours a reproduction may take; 74 runs of 2M take ~180 core-minutes (~90
minutes on 2 cores, the runs two at a time, each one item of `common.run_in_processes`),
the longest that fits with 5 seeds. The learning-rate grid is extended above the first
version's chosen rate (0.008, at the top of its grid) so the rate chosen is interior; the
report says whether it is.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from experiments.repro import common
from experiments.repro.common import run_in_processes
from experiments.repro.registry import Progress, reproduction
from experiments.repro.shadowsync_quality_report import report
from recsync.coordinator.spec import ClusterSpec, JobSpec, plan_for
from recsync.data.synthetic import SyntheticSpec
from recsync.families import strategy_config
from recsync.model.spec import ModelSpec
from recsync.optim.dense import DenseOptimizerSpec
from recsync.optim.train_spec import TrainSpec
from recsync.runtime.sim.job import SimJob
from recsync.strategy.timing import Timing

EXAMPLES = 1 << 21  # every run: the same 2,097,152 examples, one pass (see the docstring)
WORKERS_PER_TRAINER = 4  # the paper: 24 (Fig. 5's throughput runs have 24; see the docstring)
# the other reproductions' cluster, without speed spread or batch noise
CLUSTER_COST = dataclasses.replace(common.CLUSTER_COST, speed_spread=0.0, batch_noise=0.0)
LAST_PART = 0.25  # the train loss of the pass's last quarter, beside the whole pass's
GAP_TRAINERS = 10  # Table 2(a): the paper's 11 trainers, 1 sync server
SCALE_TRAINERS = (5, 10, 20)  # Table 3: 2 sync servers
SEEDS = (0, 1, 2, 3, 4)  # initial weights and data order; the task is the same
# dense Adagrad lr, tried on the baseline; the first version's grid (0.001-0.008) chose its
# top, 0.008, so the grid goes two doublings above it (0.001 lost to 0.004 and 0.008 there)
LR_GRID = (0.002, 0.004, 0.008, 0.016, 0.032)
BASELINE = ("S-EASGD", SCALE_TRAINERS[0], 2)  # variant, trainers, sync servers
SHADOW = Timing(shadow_min_gap=0.0)
GAP_VARIANTS = {"S-EASGD": SHADOW} | {
    f"FR-EASGD-{k}": Timing("fixed", every_iterations=k) for k in (5, 10, 30, 100)
}
SCALE_VARIANTS = {k: GAP_VARIANTS[k] for k in ("S-EASGD", "FR-EASGD-5", "FR-EASGD-30")}

Run = tuple[str, str, int, int, int, float]  # table, variant, trainers, sync servers, seed, lr


def _runs(dense_lr: float) -> list[Run]:
    runs: list[Run] = [
        ("gap", v, GAP_TRAINERS, 1, seed, dense_lr) for seed in SEEDS for v in GAP_VARIANTS
    ]
    runs += [
        ("scale", v, n, 2, seed, dense_lr)
        for seed in SEEDS
        for n in SCALE_TRAINERS
        for v in SCALE_VARIANTS
    ]
    return runs


def _run(run: Run) -> dict[str, Any]:
    table, variant, trainers, sync_servers, seed, dense_lr = run
    cluster = ClusterSpec(trainers, WORKERS_PER_TRAINER, trainers, num_dense_servers=sync_servers)
    return {
        "table": table,
        "variant": variant,
        "trainers": trainers,
        "sync_servers": sync_servers,
        "seed": seed,
        "dense_lr": dense_lr,
        **easgd_losses(variant, cluster, seed, dense_lr, EXAMPLES, 20_000),
    }


def easgd_losses(
    variant: str, cluster: ClusterSpec, seed: int, dense_lr: float, examples: int, test: int
) -> dict[str, Any]:
    """One EASGD run of a timing variant on `cluster`, `examples` long (`test` held out):
    its train loss (all of it and its last part), held-out loss and AUC, steady EPS and
    sync gaps."""
    synthetic = dataclasses.replace(SyntheticSpec(), num_train=examples, num_test=test)
    train = TrainSpec(dense_optimizer=DenseOptimizerSpec(lr=dense_lr), seed=seed)
    timing = GAP_VARIANTS[variant]
    spec = JobSpec(ModelSpec(), train, cluster, strategy_config("easgd", timing=timing), synthetic)
    early: list[dict[str, Any]] = []  # the one record at the start of the last part
    mark = int(examples * (1 - LAST_PART))
    job = SimJob(spec, plan_for(spec), CLUSTER_COST, eval_every=mark, on_eval=early.append)
    summary = job.run()
    return {
        "train_loss": summary["train_loss"],
        "train_loss_last": _last_part_loss(summary, early),
        "test_logloss": summary["test_logloss"],
        "test_auc": summary["test_auc"],
        "eps": summary["eps_steady"],
        "average_sync_gap": summary["average_sync_gap"],
        "average_sync_gap_per_thread": summary["average_sync_gap_per_thread"],
    }


def _last_part_loss(summary: dict[str, Any], early: list[dict[str, Any]]) -> float:
    """The mean train loss of the examples trained after the one evaluation record."""
    assert len(early) == 1, f"expected one record before the last part, got {len(early)}"
    trained, before = summary["examples_trained"], early[0]["examples"]
    assert trained > before
    loss_sum = summary["train_loss"] * trained - early[0]["train_loss"] * before
    return float(loss_sum / (trained - before))


def _quality_row(r: dict[str, Any]) -> str:
    table = {"gap": "Table 2(a)", "scale": "Table 3", "tune": "lr tuning"}[r["table"]]
    return (
        f"{table}, seed {r['seed']}, dense lr {r['dense_lr']:g}, {r['variant']:>12} "
        f"{r['trainers']:>3} trainers: train loss {r['train_loss']:.5f}, "
        f"eval logloss {r['test_logloss']:.5f}"
    )


@reproduction(
    "shadowsync-quality",
    paper="ShadowSync (Zheng et al. 2020)",
    claim="Tables 2(a) and 3: loss vs sync gap, relative loss increase from 5 to 20 trainers",
    report_dir="reports/shadowsync_quality",
    # ~1.2 core-minutes per million examples: 74 runs of 2.1M, two at a time (3 seeds of
    # 1M took 26 minutes)
    minutes=90.0,
    seeds=SEEDS,
    cost={"cluster": CLUSTER_COST},
    show=_quality_row,
)
def reproduce(out_dir: Path, progress: Progress | None = None) -> dict[str, Any]:
    """Tunes the dense lr on the baseline (seed 0), then every run at it, two at a time."""
    out_dir.mkdir(parents=True, exist_ok=True)
    variant, trainers, servers = BASELINE
    tuning = run_in_processes(
        _run, [("tune", variant, trainers, servers, SEEDS[0], lr) for lr in LR_GRID], progress
    )
    best = min(tuning, key=lambda r: r["test_logloss"])
    known = dict(best, table="scale")  # the baseline's seed-0 run at the chosen lr
    pending = [
        r for r in _runs(best["dense_lr"]) if r != ("scale", *BASELINE, SEEDS[0], best["dense_lr"])
    ]
    done = run_in_processes(_run, pending, progress)
    rows = sorted([known, *done], key=lambda r: (r["table"], r["seed"], r["trainers"]))
    batches = EXAMPLES / TrainSpec().batch_size
    per_thread = {str(n): batches / (n * WORKERS_PER_TRAINER) for n in SCALE_TRAINERS}
    results = {
        "lr_tuning": tuning,
        "dense_lr": best["dense_lr"],
        "iterations_per_thread": per_thread,
        "examples": EXAMPLES,
        "rows": rows,
    }
    (out_dir / "results.json").write_text(json.dumps(results, indent=1))
    (out_dir / "report.md").write_text(report(results))
    return results
