"""How many readers a job needs, by the simulator's cost model (`recsync plan` says it).

A reader hands out one batch every `cost.reader_batch_s` seconds; a worker asks for one
every step, and a step takes at least its dense compute (`ModelSpec.dense_flops_per_example`
x batch at `cost.worker_flops`). The workers' demand over one reader's rate, rounded up, is
the readers that keep up with workers that do nothing but compute (an upper bound: the
messages of a step make it longer)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from recsync.coordinator.spec import JobSpec
from recsync.runtime.sim.cost import CostModel


@dataclass(frozen=True)
class ReaderNeed:
    """Batches/s one reader hands out, batches/s the job's workers ask for, readers needed."""

    reader_batches_s: float
    demand_batches_s: float
    needed: int


def reader_need(spec: JobSpec, cost: CostModel) -> ReaderNeed:
    step_s = spec.model.dense_flops_per_example() * spec.train.batch_size / cost.worker_flops
    demand = spec.cluster.hogwild_threads / step_s if step_s > 0 else math.inf
    rate = 1.0 / cost.reader_batch_s if cost.reader_batch_s > 0 else math.inf
    needed = 1 if math.isinf(rate) else max(1, math.ceil(demand / rate))
    return ReaderNeed(rate, demand, needed)


def readers_text(spec: JobSpec, cost: CostModel) -> str:
    """The job's readers, where their count comes from, and what the cost model needs."""
    cluster = spec.cluster
    source = (
        "cluster.num_readers"
        if cluster.num_readers is not None
        else "default: one per 64 worker threads, at most one a trainer"
    )
    need = reader_need(spec, cost)
    text = (
        f"readers: {cluster.readers} ({source}); by the cost model a reader hands out "
        f"{need.reader_batches_s:,.0f} batches/s and the {cluster.hogwild_threads} workers ask "
        f"for up to {need.demand_batches_s:,.0f} (compute alone): {need.needed} needed"
    )
    if need.needed > cluster.readers:
        text += f" (set cluster.num_readers = {min(need.needed, cluster.num_trainers)})"
    return text
