"""GBA (Alibaba, NeurIPS 2022), Fig. 6 in the simulator: switching from synchronous
all-reduce to each PS strategy and back, through checkpoints (the report's text and figure
are `gba_switching_report`).

A continual-learning task of DAYS days (the synthetic teacher drifts each day), on the
gba-stragglers cluster (16 workers, computing paces a step, local batch 128, global batch
2,048; 64 global steps a day). Days 0-1 are trained with `allreduce` (16 ranks, one a worker:
the paper's synchronous baseline), without stragglers. Its checkpoint is then continued for
days 2-4 by each branch with unchanged hyper-parameters (recsync's defaults) while 2 of the 16
workers are 8x slower in stretches (gba-stragglers' main setting, where GBA's token decay
excludes gradients, so GBA and BSP apply different updates); day 5 switches every branch
back to `allreduce` without stragglers. The `allreduce` branch never leaves it: the baseline.
After each day the model is scored on held-out examples of that day. Seeds 0, 1, 2
(initial weights, data order, straggler draws; one draw of the task).

Claims (the paper: Fig. 6, Tab. 5.2): GBA stays within 0.002 AUC of continuing all-reduce;
async (same hyper-parameters, 16x more updates of a 16x smaller batch) drops; GBA is faster
than all-reduce under the stragglers (the paper: 2.0-2.3x global QPS on its shared cluster).

Cost (process CPU on this project's loaded 2-core machine, about 20 ms a gradient): 2 base
days a seed (once a process) and 24 branch days, about 12 minutes a seed, 36 on one core for
the 3 seeds; `run_in_processes` runs two branches at a time.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from pathlib import Path
from typing import Any

from experiments.repro import gba
from experiments.repro import gba_switching_report as report
from experiments.repro.common import EMBEDDING_SERVERS, run_in_processes, run_segment, strategy
from experiments.repro.registry import Progress, reproduction
from recsync.coordinator.checkpoint import JobState
from recsync.coordinator.outcome import evaluate_model
from recsync.coordinator.spec import ClusterSpec
from recsync.data.batch import Batch
from recsync.data.synthetic import SyntheticSpec, SyntheticTask
from recsync.runtime.sim.cost import CostModel
from recsync.runtime.sim.job import SimJob

DAYS = 6
SYNC_DAYS = 2
PER_DAY = 64 * gba.GLOBAL_BATCH  # 131,072 examples, 64 global steps
DRIFT = 0.1
TEST_PER_DAY = 20_000
SEEDS = (0, 1, 2)
BASELINE = "allreduce"
BRANCHES: dict[str, tuple[str, dict[str, Any]]] = {
    BASELINE: ("allreduce", {}),
    "gba": ("gba", {"iota": 4}),
    "bsp": ("bsp", {}),
    "backup_workers": ("backup_workers", {"num_backup": gba.BACKUP}),
    "async": ("async", {}),
    "bounded_staleness": ("bounded_staleness", {"staleness": 4}),
}
CALM = gba.STRAGGLER_COST
STRAGGLING = gba.cost_of(gba.MAIN_SLOWDOWN, gba.MAIN_FRACTION)


def task_spec() -> SyntheticSpec:
    return dataclasses.replace(
        SyntheticSpec(), num_train=DAYS * PER_DAY, num_test=2_000, num_days=DAYS, drift=DRIFT
    )


def allreduce_shape() -> ClusterSpec:
    """`allreduce` on the same workers: one rank a worker, the dense part on them."""
    return ClusterSpec(gba.WORKERS, 1, EMBEDDING_SERVERS, num_dense_servers=0)


def run_day(
    name: str, seed: int, state: JobState | None, cost: CostModel, day: int
) -> tuple[JobState | None, dict[str, Any]]:
    """One day of `name` (a key of BRANCHES) from `state`: the checkpoint and its row."""
    kind, fields = BRANCHES[name]
    shape = allreduce_shape() if kind == "allreduce" else None
    sim, summary = run_segment(
        strategy(kind, **fields),
        task_spec(),
        PER_DAY,
        state,
        cost,
        train=gba.train_spec(1.0, seed),
        trainers=gba.TRAINERS,
        shape=shape,
    )
    test = SyntheticTask(task_spec()).day_test_set(day, TEST_PER_DAY)[0]
    row = {
        "auc": score(sim, test),
        "eps_steady": summary["eps_steady"],
        "global_steps": summary["global_steps"],
        "dropped": sum(summary.get("gradients_dropped", {}).values()),
    }
    return sim.final_state, row


def score(sim: SimJob, test: Batch) -> float:
    """AUC of a finished simulated job's model (its end state) on `test`."""
    state = sim.final_state
    assert state is not None
    layout = sim.plan.embeddings.layout
    return evaluate_model(sim.spec, layout, state.dense, state.shards, test).auc


@functools.cache
def base_days(seed: int) -> tuple[JobState | None, tuple[float, ...]]:
    """Days 0 to SYNC_DAYS - 1 of all-reduce (once a process and seed): checkpoint, AUCs."""
    state, auc = None, []
    for day in range(SYNC_DAYS):
        state, row = run_day(BASELINE, seed, state, CALM, day)
        auc.append(row["auc"])
    return state, tuple(auc)


def run_branch(item: tuple[int, str]) -> dict[str, Any]:
    """One branch of one seed: the base days, then the switched days, then all-reduce."""
    seed, name = item
    state, base = base_days(seed)
    days = []
    for day in range(SYNC_DAYS, DAYS):
        last = day == DAYS - 1
        state, row = run_day(
            BASELINE if last else name, seed, state, CALM if last else STRAGGLING, day
        )
        days.append(row)
    switched = days[:-1]
    return {
        "seed": seed,
        "branch": name,
        "auc": [*base, *(d["auc"] for d in days)],
        "eps_steady": [d["eps_steady"] for d in switched],
        "dropped": [d["dropped"] for d in switched],
        "global_steps": [d["global_steps"] for d in switched],
    }


def _branch_row(r: dict[str, Any]) -> str:
    return (
        f"{r['branch']:>17} seed {r['seed']}: AUC "
        + " ".join(f"{a:.4f}" for a in r["auc"])
        + f", excluded {sum(r['dropped'])}"
    )


@reproduction(
    "gba-switching",
    paper="GBA (Alibaba, NeurIPS 2022)",
    claim="Fig. 6: all-reduce for 2 days, then each strategy from the checkpoint under "
    "stragglers, back to all-reduce",
    report_dir="reports/gba_switching",
    minutes=20.0,
    seeds=SEEDS,
    cost={"calm": CALM, "stragglers": STRAGGLING},
    show=_branch_row,
)
def reproduce_switching(out_dir: Path, progress: Progress | None = None) -> dict[str, Any]:
    out_dir.mkdir(parents=True, exist_ok=True)
    items = [(seed, name) for seed in SEEDS for name in BRANCHES]
    runs = run_in_processes(run_branch, items, progress)
    result = {
        "runs": runs,
        "days": DAYS,
        "sync_days": SYNC_DAYS,
        "per_day": PER_DAY,
        "workers": gba.WORKERS,
        "local_batch": gba.LOCAL_BATCH,
        "drift": DRIFT,
        "test_per_day": TEST_PER_DAY,
        "stragglers": str(STRAGGLING.stragglers),
    }
    (out_dir / "results.json").write_text(json.dumps(result, indent=1))
    report.write(result, out_dir)
    return result
