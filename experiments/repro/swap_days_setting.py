"""swap-days' setting: the task, the model, the variants and the rate grid they are tuned on,
and how its results file's rows are read (shared by the runs and the report)."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from experiments.repro.common import WORKERS_PER_TRAINER
from experiments.repro.settle import Flattening, Grid
from recsync.data.synthetic import SyntheticSpec
from recsync.model.spec import ModelSpec, default_tables
from recsync.optim.dense import DenseOptimizerSpec
from recsync.optim.rowwise import RowOptimizerSpec
from recsync.optim.swap import Swap
from recsync.optim.train_spec import TrainSpec

DAYS = 12  # days 0-10 trained, 1-11 scored
PER_DAY = 262_144
SEGMENTS = 8  # each day trained as this many chained segments, its held-out loss after each
DRIFT = 0.2
BATCH_SIZE = 64
WORKERS = WORKERS_PER_TRAINER  # one trainer's worker threads
UPDATES_PER_DAY = PER_DAY // BATCH_SIZE  # async: one update per batch
TEST_PER_DAY = 20_000  # the next day's held-out examples the claims read
HELD_OUT = 10_000  # held-out examples of the day being trained: its within-day curve
VALIDATION = 20_000  # the tuning's score: the task's own test split (the last day's teacher)
TUNING_SEED = 0
# one factor of both default Adagrad rates (dense DenseOptimizerSpec().lr, rows
# RowOptimizerSpec().lr), the same grid for every variant
GRID = Grid((0.5, 1.0, 2.0))
RULE = Flattening()
STALL = 0.25  # Adagrad "stalls": its late gain is under a quarter of SWAP's
PAPER_ITERATIONS_PER_DAY = 7e9 / 580
STEP_DECAY = math.exp(PAPER_ITERATIONS_PER_DAY * math.log(0.999999) / UPDATES_PER_DAY)
VARIANTS: dict[str, Swap | None] = {
    "Adagrad": None,
    f"per-step decay (lambda {STEP_DECAY:.5f})": Swap(decay=STEP_DECAY, period=1),
    "Adagrad-SWAP (0.8, T = 1 day)": Swap(decay=0.8, period=UPDATES_PER_DAY),
}


def task() -> SyntheticSpec:
    return dataclasses.replace(
        SyntheticSpec(), num_train=DAYS * PER_DAY, num_test=2_000, num_days=DAYS, drift=DRIFT
    )


def model() -> ModelSpec:
    return ModelSpec(tables=default_tables(26, 100, 8), bottom_mlp=(64, 32), top_mlp=(64, 32))


def train_spec(swap: Swap | None, seed: int = 0, factor: float = 1.0) -> TrainSpec:
    """The variant's Adagrad (with its decay), both default rates times `factor`."""
    return TrainSpec(
        batch_size=BATCH_SIZE,
        dense_optimizer=DenseOptimizerSpec(lr=DenseOptimizerSpec().lr * factor, swap=swap),
        sparse_optimizer=RowOptimizerSpec(lr=RowOptimizerSpec().lr * factor, swap=swap),
        seed=seed,
    )


def rows_of(results: dict[str, Any] | list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The runs the claims read: a results file's "rows" (or a bare list of rows, the
    older format)."""
    return results["rows"] if isinstance(results, dict) else results


def by_seed(rows: list[dict[str, Any]]) -> dict[str, dict[int, list[float]]]:
    """Each variant's next-day AUCs by seed, variants in the rows' order (a row without a
    seed, of the older one-seed setting, is seed 0)."""
    out: dict[str, dict[int, list[float]]] = {}
    for row in rows:
        out.setdefault(row["variant"], {})[row.get("seed", 0)] = row["next_day_auc"]
    return out
