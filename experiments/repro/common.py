"""What the gradient-strategy reproductions share: the simulated cluster, its stragglers,
and a runner that chains checkpointed segments (one per day) through the simulator."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Any

import torch

from experiments.repro.points import kept_points
from experiments.repro.registry import Progress
from recsync.coordinator.checkpoint import JobState
from recsync.coordinator.outcome import evaluate_model
from recsync.coordinator.spec import ClusterSpec, JobSpec, plan_for
from recsync.data.batch import Batch
from recsync.data.synthetic import SyntheticSpec
from recsync.families import strategy_config
from recsync.model.spec import ModelSpec
from recsync.optim.train_spec import TrainSpec
from recsync.runtime.pools import current_pool
from recsync.runtime.sim.cost import CostModel, Stragglers
from recsync.runtime.sim.job import SimJob
from recsync.strategy.config import StrategyConfig

NUM_TRAINERS, WORKERS_PER_TRAINER = 8, 4  # 32 workers
EMBEDDING_SERVERS, DENSE_SERVERS = 8, 4
# 25 Gbit/s NICs; a worker does the default DLRM's dense step for a batch of 256 in ~5.8 ms
CLUSTER_COST = CostModel(
    worker_flops=1.25e11,
    speed_spread=0.05,
    batch_noise=0.05,
    latency_s=5.0e-5,
    bandwidth_bytes_s=25e9 / 8,
    request_s=2.0e-5,
    row_s=5.0e-9,
    element_s=2.0e-10,
    reader_batch_s=1.0e-5,
)
STRAGGLERS = Stragglers(fraction=0.2, slowdown=4.0)


def run_in_processes(
    run: Callable[[Any], dict[str, Any]], items: list[Any], progress: Progress | None
) -> list[dict[str, Any]]:
    """`run(item)` for every item, two processes at a time (the simulator is deterministic,
    so the order of the runs does not matter), each with one torch thread (two processes of
    two threads on two cores spin at every barrier), or as Ray tasks where the command set
    a pool (`recsync reproduce NAME --address`: `runtime.pools`); results in the items'
    order, each told to `progress` as it is known. Inside `points.points_kept` each result
    is kept on disk and one computed by an earlier, stopped run of the same code is taken,
    not rerun."""
    cache = kept_points()
    known: list[tuple[bool, Any]] = [
        (False, None) if cache is None else cache.get(run, item) for item in items
    ]
    todo = [item for item, (found, _) in zip(items, known, strict=True) if not found]
    for found, row in known:
        if found and progress:
            progress(row)
    computed: dict[int, dict[str, Any]] = {}
    for index, row in _computed(run, todo):  # each kept as soon as it is known
        if cache is not None:
            cache.put(run, todo[index], row)
        computed[index] = row
        if progress:
            progress(row)
    fresh = iter(computed[index] for index in range(len(todo)))
    return [row if found else next(fresh) for found, row in known]


def _computed(
    run: Callable[[Any], dict[str, Any]], todo: list[Any]
) -> Iterator[tuple[int, dict[str, Any]]]:
    """(index, result) of `run` on each item of `todo`, as each is known: on the command's
    pool if it set one, else in two processes."""
    if not todo:
        return
    pool = current_pool()
    if pool is not None:
        calls = [(index, functools.partial(run, item)) for index, item in enumerate(todo)]
        for index, outcome in pool.run(calls, lambda: True):
            if isinstance(outcome, BaseException):
                raise outcome
            yield index, outcome
        return
    with ProcessPoolExecutor(2, initializer=torch.set_num_threads, initargs=(1,)) as processes:
        running = {processes.submit(run, item): index for index, item in enumerate(todo)}
        for future in as_completed(running):
            yield running[future], future.result()


def strategy(name: str, **fields: Any) -> StrategyConfig:
    return strategy_config(name, **fields)


def cluster(dense_servers: int = DENSE_SERVERS, trainers: int = NUM_TRAINERS) -> ClusterSpec:
    return ClusterSpec(
        trainers, WORKERS_PER_TRAINER, EMBEDDING_SERVERS, num_dense_servers=dense_servers
    )


def allreduce_cluster() -> ClusterSpec:
    """`allreduce` on the same 32 workers: one rank per trainer, the dense part on them."""
    return ClusterSpec(
        NUM_TRAINERS * WORKERS_PER_TRAINER, 1, EMBEDDING_SERVERS, num_dense_servers=0
    )


def run_segment(
    config: StrategyConfig,
    synthetic: SyntheticSpec,
    examples: int | None,
    resume: JobState | None = None,
    cost: CostModel = CLUSTER_COST,
    model: ModelSpec | None = None,
    train: TrainSpec | None = None,
    dense_servers: int = DENSE_SERVERS,
    eval_every: int | None = None,
    trainers: int = NUM_TRAINERS,
    shape: ClusterSpec | None = None,
) -> tuple[SimJob, dict[str, Any]]:
    """One simulated run: from `resume` (or the start), for `examples` examples (None: to
    the end of the data); returns the job (its final_state is the checkpoint) and summary.
    `shape` replaces the cluster that `dense_servers` and `trainers` describe."""
    spec = JobSpec(
        model or ModelSpec(),
        train or TrainSpec(),
        shape or cluster(dense_servers, trainers),
        config,
        synthetic,
        resume=resume,
        stop_after_examples=examples,
    )
    sim = SimJob(spec, plan_for(spec), cost, eval_every=eval_every)
    return sim, sim.run()


def score(sim: SimJob, test: Batch) -> float:
    """AUC of a finished simulated job's model on `test`."""
    state = sim.final_state
    assert state is not None
    return evaluate_model(sim.spec, sim.plan.embeddings.layout, state.dense, state.shards, test).auc


def with_stragglers(
    cost: CostModel = CLUSTER_COST, stragglers: Stragglers = STRAGGLERS
) -> CostModel:
    return dataclasses.replace(cost, stragglers=stragglers)
