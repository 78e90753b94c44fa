"""`recsync calibrate`: measure this machine into a cost profile for the simulator, and
check the simulator's EPS against the Ray engine's on the same configurations."""

from __future__ import annotations

import dataclasses
import math
import os
import statistics
import time
from collections.abc import Callable, Iterable
from typing import Any

import torch

from recsync.coordinator.spec import ClusterSpec, JobSpec, plan_for
from recsync.data.batch import Batch
from recsync.data.synthetic import SyntheticSpec, SyntheticTask
from recsync.model.spec import ModelSpec
from recsync.optim.train_spec import TrainSpec
from recsync.ps.layout import EmbeddingLayout
from recsync.ps.local import build_shards
from recsync.ps.shard import row_gradients
from recsync.runtime.ray.job import connect, run_job
from recsync.runtime.ray.probe import call_cpu_seconds, idle_cpus, round_trip_seconds
from recsync.runtime.sim.cost import CostModel
from recsync.runtime.sim.job import SimJob
from recsync.sync.easgd import EasgdCenter, EasgdConfig
from recsync.sync.registry import strategy_config
from recsync.sync.replica import Timing
from recsync.trainer.replica import DenseReplica

PAYLOAD_BYTES = 512 * 1024
Row = dict[str, Any]
FIT_EXAMPLES = 20_000
FIT_ROUNDS = 8  # turns of the two-factor fit (its two jobs pull both factors: it settles slowly)
FIT_RANGE = 8.0  # the first turn looks for each factor in [1/8, 8]
FIT_LAST_RANGE = 1.25
FIT_PRECISION = 0.01  # of a factor's logarithm
FIT_TOLERANCE = 0.05  # the fitted profile reproduces both jobs' EPS this closely


def _median_seconds(fn: Callable[[Any], object], items: Iterable[Any]) -> float:
    times = []
    for item in items:
        start = time.perf_counter()
        fn(item)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def measure(model: ModelSpec, train: TrainSpec, synthetic: SyntheticSpec) -> dict[str, float]:
    """Seconds per batch of the worker math (and the share of it its dense optimizer's step
    takes), the reader, a shard's rows, a dense element on a server, a message between
    nodes; the cores an idle node process takes."""
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

    applying: list[float] = []  # seconds of each step's dense optimizer step

    def worker_math(batch: Batch) -> None:
        request = requests[id(batch)][0]
        dense_in = layout.combine(batch.batch_size, [request], [pooled[id(batch)]])
        _, flat_grad, grad_pooled = replica.gradients(batch, dense_in)
        start = time.perf_counter()
        replica.apply(flat_grad)
        applying.append(time.perf_counter() - start)
        row_gradients(request.rows, request.offsets, layout.bag_gradients(grad_pooled, request))

    def server_rows(batch: Batch) -> None:
        r = requests[id(batch)][0]
        shards[0].lookup(r.rows, r.offsets, r.weights)
        rows, grads = row_gradients(r.rows, r.offsets, pooled[id(batch)], r.weights)
        shards[0].apply_gradients(rows, grads)

    stream = iter(SyntheticTask(synthetic).train_batches(train.batch_size))
    rows_per_batch = statistics.median(int(b.ids.numel()) for b in batches)
    empty = round_trip_seconds(0)
    loaded = round_trip_seconds(PAYLOAD_BYTES)
    caller_cpu_s, callee_cpu_s = call_cpu_seconds(0)
    worker_s = _median_seconds(worker_math, batches)
    return {
        "worker_s": worker_s,
        "apply_share": statistics.median(applying) / worker_s,
        "reader_s": _median_seconds(lambda _: next(stream), range(40)),
        "server_row_s": _median_seconds(server_rows, batches) / rows_per_batch,
        "server_element_s": _dense_element_seconds(model, train),
        "message_s": empty / 2,
        "call_caller_cpu_s": caller_cpu_s,
        "call_callee_cpu_s": callee_cpu_s,
        "process_idle_cpus": idle_cpus(),
        "byte_s": max(loaded - empty, 0.0) / (4 * PAYLOAD_BYTES),
    }


def _dense_element_seconds(model: ModelSpec, train: TrainSpec) -> float:
    """Seconds per dense parameter of the two server requests that touch them: a dense
    server's optimizer step on a pushed gradient, a sync server's elastic exchange (their
    mean; vectorized, they cost a few percent of an embedding row's element)."""
    replica = DenseReplica(model, train.seed, train.dense_optimizer)
    values = replica.flat.detach().clone()
    optimizer = train.dense_optimizer.build(values.numel())
    grad = torch.full_like(values, 1e-3)
    center = EasgdCenter(EasgdConfig(), values.clone())
    rounds = range(20)
    push_s = _median_seconds(lambda _: optimizer.updated(values, grad), rounds)
    exchange_s = _median_seconds(lambda _: center.exchange(values), rounds)
    return (push_s + exchange_s) / 2 / values.numel()


def profile(model: ModelSpec, train: TrainSpec, measured: dict[str, float]) -> CostModel:
    """The cost model of this machine: every node shares its cores, each of its processes
    taking what one takes idle; a call between two nodes (a loop's message over its
    channel) costs the CPU both processes spent on it (a call is four message ends: request
    and reply, each sent and received)."""
    flops = model.dense_flops_per_example() * train.batch_size
    return CostModel(
        worker_flops=flops / measured["worker_s"],
        apply_share=measured["apply_share"],
        latency_s=0.0,
        bandwidth_bytes_s=1e12,
        request_s=0.0,
        row_s=measured["server_row_s"],
        element_s=measured["server_element_s"],
        reader_batch_s=measured["reader_s"],
        message_cpu_s=(measured["call_caller_cpu_s"] + measured["call_callee_cpu_s"]) / 4,
        byte_cpu_s=measured["byte_s"],
        shared_cpus=os.cpu_count() or 1,
        process_idle_cpus=measured["process_idle_cpus"],
    )


def check_configs(synthetic: SyntheticSpec) -> list[tuple[str, JobSpec]]:
    """Jobs of benchmarks/bench_engine.py the fitted profile is checked on."""
    model, train = ModelSpec(), TrainSpec()
    fixed1 = Timing("fixed", every_iterations=1)
    cluster = ClusterSpec(2, 2, 2, 1)
    return [
        ("2x2 S-EASGD", JobSpec(model, train, cluster, strategy_config("easgd"), synthetic)),
        (
            "2x2 FR-EASGD-1",
            JobSpec(model, train, cluster, strategy_config("easgd", timing=fixed1), synthetic),
        ),
    ]


def simulated(spec: JobSpec, cost: CostModel) -> dict[str, Any]:
    """The simulated run's summary."""
    return SimJob(spec, plan_for(spec), cost).run()


def simulated_eps(spec: JobSpec, cost: CostModel) -> float:
    return float(simulated(spec, cost)["eps"])


def cpu_per_example(summary: dict[str, Any]) -> dict[str, float]:
    """A run's CPU microseconds per trained example, by role (the engine's measured, the
    simulator's charged; none where the summary has no `cpu_seconds`)."""
    examples = summary["examples_trained"]
    return {
        role: round(seconds / examples * 1e6, 1)
        for role, seconds in summary.get("cpu_seconds", {}).items()
    }


def fit_configs(synthetic: SyntheticSpec) -> tuple[JobSpec, JobSpec]:
    """The jobs the cost model is fitted on (no strategy's sync in them), independent: 1
    trainer x 2 workers (in processes of their own, as by default) with 1 embedding server
    (one call a step, a process a core on 2 cores), and 2 trainers x 2 workers with 8 (eight
    calls a step, amid more processes than cores on a small machine, where a message costs
    its ends more than alone). The second must make several times the first's calls an
    example: a difference within the engine's run-to-run noise cannot tell a message's cost."""
    model, train, strategy = ModelSpec(), TrainSpec(), strategy_config("independent")
    return (
        JobSpec(model, train, ClusterSpec(1, 2, 1, 0), strategy, synthetic),
        JobSpec(model, train, ClusterSpec(2, 2, 8, 0), strategy, synthetic),
    )


def fit_name(spec: JobSpec) -> str:
    """A fit job as rows and progress name it: "1x2 independent, 1 embedding server"."""
    cluster = spec.cluster
    servers = cluster.num_embedding_servers
    return (
        f"{cluster.num_trainers}x{cluster.workers_per_trainer} independent, "
        f"{servers} embedding server{'s' if servers > 1 else ''}"
    )


def fit_engine(
    few: JobSpec,
    many: JobSpec,
    few_eps: float,
    many_eps: float,
    cost: CostModel,
    tolerance: float | None = FIT_TOLERANCE,
) -> CostModel:
    """What the measured profile lacks, fitted to the engine's EPS on two jobs: a factor of
    the worker speed (a worker's math runs slower inside the engine, amid Ray's threads and
    the other processes on its cores) mostly from the job with few messages, a factor
    of the per-message CPU (a call costs more amid other work than alone) mostly from the
    job with many; in turns, until both settle. Raises where a factor still runs to the
    edge of its search in the last turn (the two jobs do not pin it) or the fit misses
    either job by more than `tolerance` (None: returns the closest fit, for a benchmark to
    report)."""
    spread = FIT_RANGE
    for _ in range(FIT_ROUNDS):
        speed = _log_bisect(_eps_of(few, cost, True), few_eps, True, spread)
        cost = _scaled(cost, speed, 1.0)
        message = _log_bisect(_eps_of(many, cost, False), many_eps, False, spread)
        cost = _scaled(cost, 1.0, message)
        last_spread = spread
        spread = max(math.sqrt(spread), FIT_LAST_RANGE)  # later turns only correct a little
    unsettled = [
        name
        for name, factor in (("worker speed", speed), ("per-message CPU", message))
        if abs(math.log(factor)) > math.log(last_spread) - 2 * FIT_PRECISION
    ]
    if tolerance is not None and unsettled:
        raise ValueError(
            f"calibration: the fit of the {' and '.join(unsettled)} was still running to the "
            f"edge of its search in its last turn (the engine's {few_eps:,.0f} and "
            f"{many_eps:,.0f} examples/s on the fit jobs do not pin it); is the machine busy "
            "with other work?"
        )
    for spec, target in ((few, few_eps), (many, many_eps)):
        predicted = simulated_eps(spec, cost)
        if tolerance is not None and abs(predicted / target - 1.0) > tolerance:
            raise ValueError(
                f"calibration: no worker speed and per-message CPU reproduce the engine's "
                f"{target:,.0f} examples/s (the fit predicts {predicted:,.0f}); is the machine "
                "busy with other work?"
            )
    return cost


def _eps_of(spec: JobSpec, cost: CostModel, speed: bool) -> Callable[[float], float]:
    """Simulated EPS of `spec` as a function of a factor of the worker speed (or of the
    per-message CPU)."""
    if speed:
        return lambda factor: simulated_eps(spec, _scaled(cost, factor, 1.0))
    return lambda factor: simulated_eps(spec, _scaled(cost, 1.0, factor))


def _scaled(cost: CostModel, speed: float, message: float) -> CostModel:
    return dataclasses.replace(
        cost,
        worker_flops=cost.worker_flops * speed,
        message_cpu_s=cost.message_cpu_s * message,
    )


def _log_bisect(
    eps_at: Callable[[float], float], target: float, rising: bool, spread: float
) -> float:
    """The factor in [1/spread, spread] at which `eps_at` (rising or falling with it) meets
    `target` (bisection on its logarithm, to 1% of a factor's width)."""
    low, high = -math.log(spread), math.log(spread)
    for _ in range(math.ceil(math.log2(2 * math.log(spread) / FIT_PRECISION))):
        mid = (low + high) / 2
        if (eps_at(math.exp(mid)) > target) == rising:
            high = mid
        else:
            low = mid
    return math.exp((low + high) / 2)


Step = Callable[[str], None]  # told what calibration does next


def _quiet(what: str) -> None:
    return None


FIT_STEPS = 4  # steps `fitted_cost` announces


def fitted_cost(
    examples: int,
    num_cpus: int,
    step: Step = _quiet,
    tolerance: float | None = FIT_TOLERANCE,
    repeats: int = 1,
) -> tuple[CostModel, dict[str, float], list[Row]]:
    """This machine's profile (`num_cpus` shared cores), fitted to the engine's EPS on the
    fit jobs (`examples` each, the median of `repeats` runs): the profile, what was
    measured and fitted, and a row of engine vs simulated EPS per fit job. Needs a
    connected Ray. `step(what)` is told of each of its FIT_STEPS steps before it starts."""
    if repeats < 1:
        raise ValueError(f"calibration repeats must be >= 1, got {repeats}")
    model, train = ModelSpec(), TrainSpec()
    step("measuring the math, a call between nodes and its CPU")
    measured = measure(model, train, SyntheticSpec())
    cost = dataclasses.replace(profile(model, train, measured), shared_cpus=num_cpus)
    synthetic = dataclasses.replace(SyntheticSpec(), num_train=examples, num_test=2_000)
    few, many = fit_configs(synthetic)
    step(f"engine: {fit_name(few)}")
    few_run = _median_run(few, repeats)
    step(f"engine: {fit_name(many)}")
    many_run = _median_run(many, repeats)
    few_eps, many_eps = few_run["eps"], many_run["eps"]
    step("fitting the simulator to both")
    small = dataclasses.replace(synthetic, num_train=FIT_EXAMPLES)
    fitted = fit_engine(
        dataclasses.replace(few, synthetic=small),
        dataclasses.replace(many, synthetic=small),
        few_eps,
        many_eps,
        cost,
        tolerance,
    )
    measured["worker_speed_fitted"] = fitted.worker_flops / cost.worker_flops
    measured["message_cpu_fitted"] = fitted.message_cpu_s / cost.message_cpu_s
    rows = [
        _row(f"{fit_name(few)} (fitted)", few_run, simulated(few, fitted)),
        _row(f"{fit_name(many)} (fitted)", many_run, simulated(many, fitted)),
    ]
    return fitted, measured, rows


def _median_run(spec: JobSpec, repeats: int) -> dict[str, Any]:
    """The summary of the run with the median EPS of `repeats` runs of `spec` (on a shared
    machine one run can be far off, and a fit to it is off everywhere)."""
    runs = sorted((run_job(spec) for _ in range(repeats)), key=lambda run: run["eps"])
    return runs[len(runs) // 2]


def calibration_steps(with_check: bool) -> int:
    """How many steps `calibrate` announces."""
    return FIT_STEPS + (len(check_configs(SyntheticSpec())) if with_check else 0)


def calibrate(
    examples: int, with_check: bool, step: Step = _quiet, repeats: int = 1
) -> tuple[CostModel, dict[str, float], list[Row]]:
    """Measure and fit this machine's profile (each fit job the median of `repeats` runs),
    and (optionally) predict the engine's EPS on other jobs: rows of measured vs predicted
    EPS, the fitted ones marked. `step(what)` is told of each of its `calibration_steps`
    steps before it starts."""
    connect(None, os.cpu_count())
    cost, measured, rows = fitted_cost(examples, os.cpu_count() or 1, step, repeats=repeats)
    if with_check:
        synthetic = dataclasses.replace(SyntheticSpec(), num_train=examples, num_test=2_000)
        for name, spec in check_configs(synthetic):
            step(f"engine and simulator: {name}")
            rows.append(_row(name, run_job(spec), simulated(spec, cost)))
    return cost, measured, rows


def _row(name: str, engine: dict[str, Any], simulation: dict[str, Any]) -> Row:
    """Engine vs simulator on one job: EPS, and CPU per example by role."""
    measured, predicted = engine["eps"], simulation["eps"]
    return {
        "config": name,
        "measured_eps": round(measured),
        "predicted_eps": round(predicted),
        "error": round(predicted / measured - 1.0, 3),
        "cpu_us_per_example": cpu_per_example(engine),
        "predicted_cpu_us_per_example": cpu_per_example(simulation),
    }
