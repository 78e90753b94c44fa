"""One point of ShadowSync's Figs. 6 to 8 in the simulator: a replica strategy (EASGD, MA or
BMUF; shadow or fixed rate) on a cluster, run for its throughput in priced math or for its
quality in real math. A point is a frozen dataclass (a deterministic repr), one item of
`common.run_in_processes`.

Clusters: throughput points use Fig. 5's (shadowsync.py: 24 worker threads sharing a
trainer's compute, speed noise on); quality points of Figs. 6 and 7 use Table 3's
(shadowsync_quality.py: 4 threads at the full per-thread speed, no noise), whose trainer
does as many examples a second; Fig. 8 varies the threads over Fig. 5's trainer, whose
compute `threads_cost` saturates at 24 threads.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from experiments.repro import shadowsync, shadowsync_quality
from recsync.coordinator.spec import ClusterSpec, JobSpec, plan_for
from recsync.data.synthetic import SyntheticSpec
from recsync.families import strategy_config
from recsync.model.spec import ModelSpec
from recsync.optim.dense import DenseOptimizerSpec
from recsync.optim.train_spec import TrainSpec
from recsync.runtime.sim.cost import CostModel
from recsync.runtime.sim.job import SimJob
from recsync.strategy.config import StrategyConfig
from recsync.strategy.timing import Timing

# the dense Adagrad rate Table 3's tuning chose on its baseline (S-EASGD, 5 trainers, 1M
# examples: 0.008 beside 0.001-0.004), frozen for every strategy here as the paper keeps one
# set of hyper-parameters
DENSE_LR = 0.008
ALPHA = 0.1  # the elastic parameter of every strategy (the paper: the same for all three)
LARGE_ALPHA = 0.5  # S-BMUF's "larger value" of Fig. 7 (the paper's value is unstated)
SATURATING_THREADS = 24  # Fig. 8: a trainer's compute is full at 24 threads (the paper's)
# the shadow thread waits for one new iteration a worker thread before it syncs again
# (recsync's default): an all-reduce of the 1.9 MB dense part takes less than an iteration,
# so looping without waiting (the paper's letter, Fig. 5's) would sync unchanged replicas
SHADOW = Timing(shadow_min_gap=1.0)
# BMUF's block momentum and Nesterov: fairseq's defaults (the paper's are unstated); with
# none, BMUF at block_lr 1 is MA exactly
BLOCK_MOMENTUM, NESTEROV = 0.875, True


@dataclass(frozen=True)
class Point:
    """One run: `variant` (S-EASGD, S-MA, S-BMUF, S-BMUF-large, FR-MA, FR-BMUF), its
    cluster, `seed`, `math` ("priced": throughput; "real": quality), `examples` (one pass),
    `period_s` (FR-MA and FR-BMUF: a sync every period, virtual seconds), `cost` ("fig5":
    Fig. 5's cluster; "table3": Table 3's; "threads": Fig. 5's trainer at `threads`)."""

    variant: str
    trainers: int
    threads: int
    sync_servers: int
    embedding_servers: int
    seed: int
    math: str
    examples: int
    period_s: float | None = None
    cost: str = "fig5"


def strategy_of(variant: str, period_s: float | None) -> StrategyConfig:
    """The config a variant names; FR variants need `period_s` (ValueError otherwise)."""
    if variant.startswith("FR-"):
        if period_s is None or not period_s > 0:
            raise ValueError(f"{variant} needs a sync period > 0 s, got {period_s!r}")
        timing = Timing("fixed", every_seconds=period_s)
    else:
        timing = SHADOW
    name = {"EASGD": "easgd", "MA": "ma", "BMUF": "bmuf"}[variant.split("-")[1]]
    alpha = LARGE_ALPHA if variant.endswith("-large") else ALPHA
    if name == "bmuf":
        return strategy_config(
            name, alpha=alpha, timing=timing, block_momentum=BLOCK_MOMENTUM, nesterov=NESTEROV
        )
    return strategy_config(name, alpha=alpha, timing=timing)


def threads_cost(threads: int) -> CostModel:
    """Fig. 5's cluster with a trainer's compute split over `threads`, full at 24: a thread
    is as fast as Fig. 5's up to 24 threads, then the trainer's rate stays (the paper: 24
    threads saturate a trainer's memory bandwidth). A stated model, not a measurement."""
    base = shadowsync.CLUSTER_COST
    share = SATURATING_THREADS / max(threads, SATURATING_THREADS)
    return dataclasses.replace(base, worker_flops=base.worker_flops * share)


def cost_of(point: Point) -> CostModel:
    if point.cost == "fig5":
        return shadowsync.CLUSTER_COST
    if point.cost == "table3":
        return shadowsync_quality.CLUSTER_COST
    if point.cost == "threads":
        return threads_cost(point.threads)
    raise ValueError(f"unknown cost {point.cost!r}")


def run_point(point: Point) -> dict[str, Any]:
    """The point's run: its throughput, sync rate and gaps, and (real math) its losses."""
    synthetic = dataclasses.replace(
        SyntheticSpec(),
        num_train=point.examples,
        num_test=2_000 if point.math == "priced" else 20_000,
    )
    train = TrainSpec(dense_optimizer=DenseOptimizerSpec(lr=DENSE_LR), seed=point.seed)
    spec = JobSpec(
        ModelSpec(),
        train,
        ClusterSpec(
            point.trainers,
            point.threads,
            point.embedding_servers,
            num_dense_servers=point.sync_servers,
        ),
        strategy_of(point.variant, point.period_s),
        synthetic,
    )
    summary = SimJob(spec, plan_for(spec), cost_of(point), math=point.math).run()
    seconds = summary["train_seconds"]
    return dataclasses.asdict(point) | {
        "eps": float(summary["eps_steady"]),
        "syncs_per_trainer_s": summary["syncs"] / point.trainers / seconds,
        "average_sync_gap": summary["average_sync_gap"],
        "average_sync_gap_per_thread": summary["average_sync_gap_per_thread"],
        "train_loss": summary.get("train_loss"),
        "test_logloss": summary.get("test_logloss"),
    }


def examples_for(trainers: int, threads: int, iterations: int) -> int:
    """Enough data for every worker thread to run `iterations` iterations of batch 256."""
    return trainers * threads * iterations * int(TrainSpec().batch_size)


def by_seed(rows: list[dict[str, Any]], key: str, **match: Any) -> dict[int, float]:
    """seed -> `key` of the rows whose fields equal `match`."""
    return {r["seed"]: r[key] for r in rows if all(r[k] == v for k, v in match.items())}
