"""ShadowSync's Table 2(b) in the simulator: train and eval loss against the sync gap at 20
trainers (S-EASGD and FR-EASGD-5/10/30/100), the paper's larger cluster (20 trainers, 29
embedding servers, 6 sync servers; Table 2(a), 11 trainers and 1 sync server, is
`shadowsync-quality`'s).

The paper's Table 2(b) (Model-A, Dataset-1, one run a cell, the production
hyper-parameters for every variant): the best FR-EASGD gap is 30 (eval 0.78491), where at 11
trainers it was 5, so "the optimal sync rate would vary over different system
configurations"; S-EASGD (eval 0.78565) is slightly worse than the best FR and comparable to
FR-EASGD-5 (0.78565); its average sync gap was 1.008 because the reader service was
under-provisioned, so the trainers waited for data while the shadow threads kept syncing.

Ours: the same 2,097,152 examples in one pass as `shadowsync-quality` (4 worker threads per
trainer, batch 256: 102 iterations a worker thread), the paper's five variants on its cluster
(20 trainers, 29 embedding servers, 6 sync servers) with recsync's readers, which do not pace
training. S-EASGD's gap is then about 1.3 without a slow reader (1.31 in a timed run of
524,288 examples, 1.22 at 131,072): 6 simulated sync servers finish a shadow thread's sync
about every iteration of its trainer. A slow-reader variant was therefore left out: it would
only push a gap already near the paper's 1.008 further down, by a cost we would choose.
Every variant is tuned on the same dense learning-rate grid (LR_GRID, seed TUNE_SEED, the
lowest eval logloss) and then run at its own best rate on SEEDS, which leave the tuning seed
out (no variant's pick flatters it on the seeds judged).

Minutes: two points timed at 524,288 examples (a quarter of a point's) on this 2-core
machine while it ran about 12 other processes (load average 11-14): S-EASGD and FR-EASGD-5
each took about 72 s of CPU (161 s and 309 s of wall). The cost is per example (a point's
start and its two evaluations are a few seconds), so a 2,097,152-example point is about 4x:
~4.8 core-minutes under that load; `shadowsync-quality`'s unloaded rate (1.2 core-minutes per
million examples) gives ~2.5. 5 variants x (5 tuning runs + 5 seeds) = 50 points, two at a
time: 63 to 120 minutes on 2 cores; `minutes` says 100.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from experiments.repro.common import run_in_processes
from experiments.repro.registry import Progress, reproduction
from experiments.repro.shadowsync_quality import (
    CLUSTER_COST,
    EXAMPLES,
    GAP_VARIANTS,
    LR_GRID,
    WORKERS_PER_TRAINER,
    easgd_losses,
)
from experiments.repro.shadowsync_table2b_report import report
from recsync.coordinator.spec import ClusterSpec
from recsync.optim.train_spec import TrainSpec

TRAINERS, EMBEDDING_SERVERS, SYNC_SERVERS = 20, 29, 6  # the paper's Table 2(b) cluster
VARIANTS = tuple(GAP_VARIANTS)  # S-EASGD, FR-EASGD-5, -10, -30, -100
TUNE_SEED = 0
SEEDS = (1, 2, 3, 4, 5)  # the seeds judged: the tuning seed left out

TEST_EXAMPLES = 20_000  # as shadowsync-quality's


@dataclass(frozen=True)
class Setting:
    """What every point of one run of the table shares: the examples of its one pass, the
    test examples, and the cluster. The defaults are the reproduction's; the tests' tiny
    setting shrinks them."""

    examples: int = EXAMPLES
    test_examples: int = TEST_EXAMPLES
    trainers: int = TRAINERS
    embedding_servers: int = EMBEDDING_SERVERS
    sync_servers: int = SYNC_SERVERS


Point = tuple[str, int, float, Setting]  # variant, seed, dense lr, setting


def _run(point: Point) -> dict[str, Any]:
    variant, seed, dense_lr, setting = point
    cluster = ClusterSpec(
        setting.trainers,
        WORKERS_PER_TRAINER,
        setting.embedding_servers,
        num_dense_servers=setting.sync_servers,
    )
    losses = easgd_losses(variant, cluster, seed, dense_lr, setting.examples, setting.test_examples)
    return {"variant": variant, "seed": seed, "dense_lr": dense_lr, **losses}


def _row(r: dict[str, Any]) -> str:
    gap = r["average_sync_gap"]
    return (
        f"Table 2(b), seed {r['seed']}, dense lr {r['dense_lr']:g}, {r['variant']:>12}: "
        f"sync gap {'-' if gap is None else f'{gap:.2f}'}, train loss {r['train_loss']:.5f}, "
        f"eval logloss {r['test_logloss']:.5f}"
    )


def run_table(
    out_dir: Path,
    progress: Progress | None = None,
    *,
    setting: Setting = Setting(),
    grid: tuple[float, ...] = LR_GRID,
    seeds: tuple[int, ...] = SEEDS,
    variants: tuple[str, ...] = VARIANTS,
) -> dict[str, Any]:
    """Tunes every variant on `grid` (seed TUNE_SEED), then runs `seeds` of each at its own
    best rate; writes results.json and report.md. The keywords make the tests' tiny setting."""
    out_dir.mkdir(parents=True, exist_ok=True)
    tuning = run_in_processes(
        _run, [(v, TUNE_SEED, lr, setting) for v in variants for lr in grid], progress
    )
    chosen = {
        v: min((r for r in tuning if r["variant"] == v), key=lambda r: r["test_logloss"])[
            "dense_lr"
        ]
        for v in variants
    }
    rows = run_in_processes(
        _run,
        [(v, seed, chosen[v], setting) for v in variants for seed in seeds],
        progress,
    )
    threads = setting.trainers * WORKERS_PER_TRAINER
    results = {
        "examples": setting.examples,
        "test_examples": setting.test_examples,
        "trainers": setting.trainers,
        "embedding_servers": setting.embedding_servers,
        "sync_servers": setting.sync_servers,
        "workers_per_trainer": WORKERS_PER_TRAINER,
        "iterations_per_thread": setting.examples / TrainSpec().batch_size / threads,
        "lr_grid": list(grid),
        "tune_seed": TUNE_SEED,
        "lr_tuning": tuning,
        "dense_lr": chosen,
        "rows": rows,
    }
    (out_dir / "results.json").write_text(json.dumps(results, indent=1))
    (out_dir / "report.md").write_text(report(results))
    return results


@reproduction(
    "shadowsync-table2b",
    paper="ShadowSync (Zheng et al. 2020)",
    claim="Table 2(b): loss vs sync gap at 20 trainers and 6 sync servers, every variant "
    "tuned on one grid",
    report_dir="reports/shadowsync_table2b",
    # 50 points of 2.5-4.8 core-minutes, two at a time (timed at a quarter of a point's
    # examples on the loaded machine; see the docstring)
    minutes=100.0,
    seeds=SEEDS,
    cost={"cluster": CLUSTER_COST},
    show=_row,
)
def reproduce(out_dir: Path, progress: Progress | None = None) -> dict[str, Any]:
    """Every variant tuned, then run on every seed, two points at a time."""
    return run_table(out_dir, progress)
