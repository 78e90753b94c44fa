"""`recsync calibrate`: measure this machine into a cost profile for the simulator, and
check the simulator's EPS against the Ray engine's on the same configurations."""

from __future__ import annotations

import dataclasses
import os
import statistics
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

import torch

from recsync.coordinator.spec import ClusterSpec
from recsync.data.batch import Batch
from recsync.coordinator.spec import JobSpec, plan_for
from recsync.data.synthetic import SyntheticSpec, SyntheticTask
from recsync.model.spec import ModelSpec
from recsync.ps.layout import EmbeddingLayout
from recsync.ps.local import build_shards
from recsync.ps.shard import row_gradients
from recsync.runtime.ray.job import connect, run_job
from recsync.runtime.ray.probe import round_trip_seconds
from recsync.runtime.sim.cost import CostModel
from recsync.runtime.sim.job import SimJob
from recsync.sync.registry import strategy_config
from recsync.sync.replica import Timing
from recsync.optim.train_spec import TrainSpec
from recsync.trainer.replica import DenseReplica

PAYLOAD_BYTES = 512 * 1024
FIT_EXAMPLES = 30_000
FIT_STEPS = 8


def _median_seconds(fn: Callable[[Any], object], items: Iterable[Any]) -> float:
    times = []
    for item in items:
        start = time.perf_counter()
        fn(item)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def measure(model: ModelSpec, train: TrainSpec, synthetic: SyntheticSpec) -> dict[str, float]:
    """Seconds per batch of the worker math, the reader, a shard's rows, a Ray message."""
    torch.set_num_threads(1)
    task = SyntheticTask(dataclasses.replace(synthetic, num_train=train.batch_size * 40))
    batches = list(task.train_batches(train.batch_size))
    layout = EmbeddingLayout.single_shard(model.tables)
    shards = build_shards(layout, train.sparse_optimizer, train.seed)
    replica = DenseReplica(model, train.seed, train.dense_optimizer)
    requests = {id(b): layout.route(b) for b in batches}
    pooled = {
        id(b): shards[0].lookup(r.rows, r.offsets, r.weights)
        for b in batches
        for r in requests[id(b)]
    }

    def worker_math(batch: Batch) -> None:
        request = requests[id(batch)][0]
        dense_in = layout.combine(batch.batch_size, [request], [pooled[id(batch)]])
        _, flat_grad, grad_pooled = replica.gradients(batch, dense_in)
        replica.apply(flat_grad)
        row_gradients(request.rows, request.offsets, layout.bag_gradients(grad_pooled, request))

    def server_rows(batch: Batch) -> None:
        r = requests[id(batch)][0]
        shards[0].lookup(r.rows, r.offsets, r.weights)
        rows, grads = row_gradients(r.rows, r.offsets, pooled[id(batch)], r.weights)
        shards[0].apply_gradients(rows, grads)

    def concurrent_worker_s(threads: int) -> float:
        """Seconds per batch per thread when `threads` worker threads share one process (and
        its interpreter lock), as a trainer's Hogwild threads do."""
        def work() -> None:
            for batch in batches:
                worker_math(batch)

        start = time.perf_counter()
        pool = [threading.Thread(target=work) for _ in range(threads)]
        for thread in pool:
            thread.start()
        for thread in pool:
            thread.join()
        return (time.perf_counter() - start) / len(batches)

    stream = iter(SyntheticTask(synthetic).train_batches(train.batch_size))
    rows_per_batch = statistics.median(int(b.ids.numel()) for b in batches)
    empty = round_trip_seconds(0)
    loaded = round_trip_seconds(PAYLOAD_BYTES)
    return {
        "worker_s": _median_seconds(worker_math, batches),
        "worker_s_2_threads": concurrent_worker_s(2),
        "reader_s": _median_seconds(lambda _: next(stream), range(40)),
        "server_row_s": _median_seconds(server_rows, batches) / rows_per_batch,
        "message_s": empty / 2,
        "byte_s": max(loaded - empty, 0.0) / (4 * PAYLOAD_BYTES),
    }


def profile(model: ModelSpec, train: TrainSpec, measured: dict[str, float]) -> CostModel:
    """The cost model of this machine: every node shares its cores."""
    flops = model.dense_flops_per_example() * train.batch_size
    return CostModel(
        worker_flops=flops / max(measured["worker_s"], measured["worker_s_2_threads"]),
        latency_s=0.0,
        bandwidth_bytes_s=1e12,
        request_s=0.0,
        row_s=measured["server_row_s"],
        element_s=measured["server_row_s"] / model.embedding_dim,
        reader_batch_s=measured["reader_s"],
        message_cpu_s=measured["message_s"],
        byte_cpu_s=measured["byte_s"],
        shared_cpus=os.cpu_count() or 1,
    )


def check_configs(synthetic: SyntheticSpec) -> list[tuple[str, JobSpec]]:
    """The configurations of benchmarks/bench_engine.py."""
    model, train = ModelSpec(), TrainSpec()
    fixed1 = Timing("fixed", every_iterations=1)
    return [
        (
            "1x2 independent",
            JobSpec(
                model,
                train,
                ClusterSpec(1, 2, 1, 0),
                strategy_config("independent"),
                synthetic,
            ),
        ),
        (
            "2x2 S-EASGD",
            JobSpec(
                model, train, ClusterSpec(2, 2, 2, 1), strategy_config("easgd"), synthetic
            ),
        ),
        (
            "2x2 FR-EASGD-1",
            JobSpec(
                model,
                train,
                ClusterSpec(2, 2, 2, 1),
                strategy_config("easgd", timing=fixed1),
                synthetic,
            ),
        ),
    ]


def simulated_eps(spec: JobSpec, cost: CostModel) -> float:
    return float(SimJob(spec, plan_for(spec), cost).run()["eps"])


def fit_message_cpu(spec: JobSpec, cost: CostModel, target_eps: float) -> CostModel:
    """The per-message CPU cost at which the simulator's EPS on `spec` equals `target_eps`
    (bisection; EPS falls as messaging gets dearer). An idle round trip under-states what a
    Ray call costs on a loaded machine; this fits it to the engine itself."""
    low, high = 0.0, max(cost.message_cpu_s, 1e-4)
    while simulated_eps(spec, dataclasses.replace(cost, message_cpu_s=high)) > target_eps:
        low, high = high, high * 2
        if high > 1.0:
            raise ValueError("the engine is slower than any per-message cost explains")
    for _ in range(FIT_STEPS):
        mid = (low + high) / 2
        if simulated_eps(spec, dataclasses.replace(cost, message_cpu_s=mid)) > target_eps:
            low = mid
        else:
            high = mid
    return dataclasses.replace(cost, message_cpu_s=(low + high) / 2)


def calibrate(
    examples: int, with_check: bool
) -> tuple[CostModel, dict[str, float], list[dict[str, Any]]]:
    """Measure, fit the messaging cost on the first check configuration, and (optionally)
    predict the others: rows of measured vs predicted EPS, the first marked as fitted."""
    connect(None, os.cpu_count())
    model, train = ModelSpec(), TrainSpec()
    measured = measure(model, train, SyntheticSpec())
    cost = profile(model, train, measured)
    synthetic = dataclasses.replace(SyntheticSpec(), num_train=examples, num_test=2_000)
    fitting = dataclasses.replace(synthetic, num_train=FIT_EXAMPLES)
    configs = check_configs(synthetic)
    name, spec = configs[0]
    engine_eps = run_job(spec)["eps"]
    cost = fit_message_cpu(dataclasses.replace(spec, synthetic=fitting), cost, engine_eps)
    measured["message_s_fitted"] = cost.message_cpu_s
    rows = [_row(f"{name} (fitted)", engine_eps, simulated_eps(spec, cost))]
    if with_check:
        for name, spec in configs[1:]:
            rows.append(_row(name, run_job(spec)["eps"], simulated_eps(spec, cost)))
    return cost, measured, rows


def _row(name: str, measured: float, predicted: float) -> dict[str, Any]:
    return {
        "config": name,
        "measured_eps": round(measured),
        "predicted_eps": round(predicted),
        "error": round(predicted / measured - 1.0, 3),
    }
