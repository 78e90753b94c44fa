"""`recsync calibrate`: measure this machine into a cost profile for the simulator, and
check the simulator's EPS against the Ray engine's on the same configurations."""

from __future__ import annotations

import dataclasses
import os
import statistics
import time
from collections.abc import Callable, Iterable
from typing import Any

import torch

from recsync.app.runs.fit_jobs import (
    byte_cpu,
    bytes_config,
    fit_configs,
    fit_name,
    message_end_cpu,
    reader_batch_cpu,
    worker_speed,
)
from recsync.coordinator.spec import ClusterSpec, JobSpec, plan_for
from recsync.data.batch import Batch
from recsync.data.synthetic import CHUNK, SyntheticSpec, SyntheticTask
from recsync.families import strategy_config
from recsync.model.hash_spec import HashTables
from recsync.model.spec import ModelSpec
from recsync.optim.train_spec import TrainSpec
from recsync.protocol.messages import Lookup, PushRows
from recsync.ps.hash_layout import HashLayout
from recsync.ps.layout import EmbeddingLayout
from recsync.ps.local import build_shards
from recsync.ps.shard import RowShard, row_gradients
from recsync.runtime.ray.job import connect, run_job
from recsync.runtime.ray.probe import call_cpu_seconds, idle_cpus, round_trip_seconds
from recsync.runtime.sim.cost import CostModel
from recsync.runtime.sim.job import SimJob
from recsync.strategy.family import families
from recsync.strategy.timing import Timing
from recsync.trainer.replica import DenseReplica

PAYLOAD_BYTES = 512 * 1024
Row = dict[str, Any]
FIT_EXAMPLES = 20_000  # a simulated fit job's (its CPU an example settles well before)


def _median_seconds(fn: Callable[[Any], object], items: Iterable[Any]) -> float:
    times = []
    for item in items:
        start = time.perf_counter()
        fn(item)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def shard_row_seconds(shard: RowShard, served: list[tuple[Lookup, PushRows]]) -> float:
    """Seconds a shard spends a row on a batch's lookup and the update of the rows its push
    carries, per row the simulator charges for the two (`Work.rows`: the ids looked up and
    the rows pushed). Computing the row gradients is the worker's math, not timed here."""

    def serve(pair: tuple[Lookup, PushRows]) -> None:
        lookup, push = pair
        shard.lookup(lookup.rows, lookup.offsets, lookup.weights)
        shard.apply_gradients(push.rows, push.grads)

    rows = statistics.median(lookup.work().rows + push.work().rows for lookup, push in served)
    return _median_seconds(serve, served) / rows


def hash_row_seconds(
    model: ModelSpec, train: TrainSpec, served: list[tuple[Lookup, PushRows]]
) -> float:
    """What a hash table's row costs beyond a fixed table's: the same requests served by a
    hash shard (the shard rows taken as keys; the first pass inserts them) and by a fixed
    one (a shard over the same tables), the difference per row, medians of repeats."""
    layout = EmbeddingLayout.single_shard(model.tables)
    fixed = layout.new_shard(0, train.sparse_optimizer, train.seed)
    hashed = HashLayout(model.tables, 1, HashTables()).new_shard(
        0, train.sparse_optimizer, train.seed
    )
    return max(shard_row_seconds(hashed, served) - shard_row_seconds(fixed, served), 0.0)


def measure(model: ModelSpec, train: TrainSpec, synthetic: SyntheticSpec) -> dict[str, float]:
    """Seconds per batch of the worker math (and the share of it its dense optimizer's step
    takes), the reader, a shard's rows, a dense element on a server, a message between
    nodes; the cores an idle node process takes."""
    torch.set_num_threads(1)
    task = SyntheticTask(
        dataclasses.replace(synthetic, num_train=train.batch_size * 40, keyed=False)
    )
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

    served = [  # a batch's lookup and its push of coalesced row gradients (worker math)
        (
            Lookup(r.rows, r.offsets, r.weights),
            PushRows(*row_gradients(r.rows, r.offsets, pooled[id(b)], r.weights)),
        )
        for b in batches
        for r in requests[id(b)]
    ]
    empty = round_trip_seconds(0)
    loaded = round_trip_seconds(PAYLOAD_BYTES)
    caller_cpu_s, callee_cpu_s = call_cpu_seconds(0)
    worker_s = _median_seconds(worker_math, batches)
    return {
        "worker_s": worker_s,
        "apply_share": statistics.median(applying) / worker_s,
        "reader_s": _batch_making_seconds(synthetic, train.batch_size),
        "server_row_s": shard_row_seconds(shards[0], served),
        "server_hash_row_s": hash_row_seconds(model, train, served),
        "server_element_s": _dense_element_seconds(model, train),
        "message_s": empty / 2,
        "call_caller_cpu_s": caller_cpu_s,
        "call_callee_cpu_s": callee_cpu_s,
        "process_idle_cpus": idle_cpus(),
        "byte_s": max(loaded - empty, 0.0) / (4 * PAYLOAD_BYTES),
    }


def _batch_making_seconds(synthetic: SyntheticSpec, batch_size: int) -> float:
    """Seconds the reader spends making a batch of the synthetic stream: the mean over
    whole chunks (it makes CHUNK examples at once and slices batches off them: the median
    batch would take the slicing alone, a sixth of it on the default task)."""
    count = 4 * max(CHUNK // batch_size, 1)
    stream = iter(SyntheticTask(synthetic).train_batches(batch_size))
    start = time.perf_counter()
    for _ in range(count):
        next(stream)
    return (time.perf_counter() - start) / count


def _dense_element_seconds(model: ModelSpec, train: TrainSpec) -> float:
    """Seconds per dense parameter of the server requests that touch them, each family's
    (a dense server's optimizer step on a pushed gradient, a sync server's elastic
    exchange): their mean; vectorized, they cost a few percent of an embedding row's
    element."""
    replica = DenseReplica(model, train.seed, train.dense_optimizer)
    values = replica.flat.detach().clone()
    optimizer = train.dense_optimizer.build(values.numel())
    works = [family.dense_server_work(values, optimizer) for family in families()]
    rounds = range(20)
    seconds = [_median_seconds(_called(w), rounds) for w in works if w is not None]
    return statistics.mean(seconds) / values.numel()


def _called(work: Callable[[], object]) -> Callable[[Any], object]:
    return lambda _: work()


def profile(model: ModelSpec, train: TrainSpec, measured: dict[str, float]) -> CostModel:
    """The cost model of this machine from what was measured alone: every node shares its
    cores, each of its processes taking what one takes idle; a call between two nodes (a
    loop's message over its channel) costs the CPU both processes spent on it (a call is
    four message ends: request and reply, each sent and received). `cost_from` replaces
    the calls' CPU and the worker speed by what the engine's runs spent."""
    flops = model.dense_flops_per_example() * train.batch_size
    return CostModel(
        worker_flops=flops / measured["worker_s"],
        apply_share=measured["apply_share"],
        latency_s=0.0,
        bandwidth_bytes_s=1e12,
        request_s=0.0,
        row_s=measured["server_row_s"],
        hash_row_s=measured.get("server_hash_row_s", CostModel.hash_row_s),
        element_s=measured["server_element_s"],
        reader_batch_s=measured["reader_s"],
        message_cpu_s=(measured["call_caller_cpu_s"] + measured["call_callee_cpu_s"]) / 4,
        byte_cpu_s=measured["byte_s"],
        shared_cpus=os.cpu_count() or 1,
        process_idle_cpus=measured["process_idle_cpus"],
    )


def check_configs(synthetic: SyntheticSpec) -> list[tuple[str, JobSpec]]:
    """Jobs of benchmarks/bench_engine.py the profile is checked on."""
    model, train = ModelSpec(), TrainSpec()
    fixed1 = Timing("fixed", every_iterations=1)
    cluster = ClusterSpec(2, 2, 2)
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


def cpu_per_example(summary: dict[str, Any]) -> dict[str, float]:
    """A run's CPU microseconds per trained example, by role (the engine's measured, the
    simulator's charged; none where the summary has no `cpu_seconds`)."""
    examples = summary["examples_trained"]
    return {
        role: round(seconds / examples * 1e6, 1)
        for role, seconds in summary.get("cpu_seconds", {}).items()
    }


Step = Callable[[str], None]  # told what calibration does next


def _quiet(what: str) -> None:
    return None


FIT_JOBS = 3  # the engine jobs calibration runs: `fit_configs`' two and `bytes_config`


def fit_steps(repeats: int) -> int:
    """Steps `machine_cost` announces: the math alone, each run of each fit job, the profile."""
    return 2 + FIT_JOBS * repeats


def machine_cost(
    examples: int, num_cpus: int, step: Step = _quiet, repeats: int = 1
) -> tuple[CostModel, dict[str, float], list[Row]]:
    """This machine's profile (`num_cpus` shared cores), measured alone and in the engine's
    fit jobs (`examples` each, the median of `repeats` runs): the profile, what was
    measured, and a row of engine vs simulated EPS per fit job. Needs a connected Ray.
    `step(what)` is told of each of its `fit_steps(repeats)` steps before it starts."""
    return cost_from(engine_figures(examples, step, repeats), num_cpus, step)


def engine_figures(examples: int, step: Step = _quiet, repeats: int = 1) -> dict[str, Any]:
    """What calibration measures on this machine (JSON-able; `cost_from` makes it a profile,
    here or on another machine): the math, a call and an idle process alone, and the
    engine's runs of the fit jobs (`examples` each, the run of the median EPS of `repeats`).
    Needs a connected Ray; announces `fit_steps(repeats) - 1` steps."""
    if repeats < 1:
        raise ValueError(f"calibration repeats must be >= 1, got {repeats}")
    step("measuring the math, a call between nodes and its CPU")
    measured = measure(ModelSpec(), TrainSpec(), SyntheticSpec())
    synthetic = _engine_synthetic(examples)
    specs = [*fit_configs(synthetic), bytes_config(synthetic)]
    assert len(specs) == FIT_JOBS
    runs = median_runs(specs, repeats, run_job, step)
    kept = (
        "eps",
        "eps_steady",
        "examples_trained",
        "cpu_seconds",
        "calls_per_batch",
        "thread_cpu_seconds",
    )
    return {
        "measured": measured,
        "fit_examples": examples,
        "fit_runs": [{key: run[key] for key in kept if key in run} for run in runs],
    }


def cost_from(
    figures: dict[str, Any], num_cpus: int, step: Step = _quiet
) -> tuple[CostModel, dict[str, float], list[Row]]:
    """The profile of the machine `engine_figures` measured (`num_cpus` shared cores): what
    a message end costs a trainer's process and a server's, the worker speed, what a byte
    costs either side and what making a batch costs the reader's producer, as the fit jobs'
    runs spent them (figures of old, without the bytes job's run or the producer's CPU: a
    byte as the probe measured it, a batch as made alone); with what was measured and a row
    of engine vs simulated EPS per fit job (a check: nothing is fitted to their EPS)."""
    step("a message's CPU, a byte's and the worker speed in the engine's runs")
    model, train = ModelSpec(), TrainSpec()
    measured = dict(figures["measured"])
    runs = figures["fit_runs"]
    synthetic = _engine_synthetic(figures["fit_examples"])
    specs = [*fit_configs(synthetic), bytes_config(synthetic)][: len(runs)]
    few, many, *_ = small = [
        dataclasses.replace(s, synthetic=_engine_synthetic(FIT_EXAMPLES)) for s in specs
    ]
    cost = dataclasses.replace(profile(model, train, measured), shared_cpus=num_cpus)
    reader_s = reader_batch_cpu(runs, train.batch_size)
    if reader_s is not None:
        cost = dataclasses.replace(cost, reader_batch_s=reader_s)
        measured["job_reader_batch_s"] = reader_s
    caller_s, callee_s = message_end_cpu(few, many, runs[0], runs[1], cost)
    cost = dataclasses.replace(cost, message_cpu_s=caller_s, server_message_cpu_s=callee_s)
    measured["job_message_end_trainer_cpu_s"] = caller_s
    measured["job_message_end_server_cpu_s"] = callee_s
    alone = cost.worker_flops
    # the worker speed takes the first job's bytes at their price, a byte's price the math
    # at the worker speed: a second pass settles both (the first job carries few bytes)
    for _ in range(2 if len(runs) > 2 else 1):
        speed = worker_speed(few, runs[0], dataclasses.replace(cost, worker_flops=alone))
        cost = dataclasses.replace(cost, worker_flops=alone * speed)
        measured["worker_speed_factor"] = speed
        if len(runs) > 2:
            trainer_byte_s, server_byte_s = byte_cpu(small[2], runs[2], cost)
            cost = dataclasses.replace(
                cost, byte_cpu_s=trainer_byte_s, server_byte_cpu_s=server_byte_s
            )
            measured["job_byte_trainer_cpu_s"] = trainer_byte_s
            measured["job_byte_server_cpu_s"] = server_byte_s
    rows = [
        _row(f"{fit_name(spec)} (calibrated on)", run, simulated(spec, cost))
        for spec, run in zip(specs, runs, strict=True)
    ]
    return cost, measured, rows


def _engine_synthetic(examples: int) -> SyntheticSpec:
    """The data of calibration's engine runs: `examples` to train on."""
    return dataclasses.replace(SyntheticSpec(), num_train=examples, num_test=2_000)


def median_runs(
    specs: list[JobSpec],
    repeats: int,
    run: Callable[[JobSpec], dict[str, Any]],
    step: Step = _quiet,
) -> list[dict[str, Any]]:
    """Per job of `specs`, the summary of its run of median steady EPS among `repeats` runs (on a
    shared machine one run can be far off, and a profile measured in it is off everywhere),
    made in rounds over the jobs (a slow spell of the machine spreads over all of them
    instead of taking every run of one); `step` told of each run before it starts."""
    tried: list[list[dict[str, Any]]] = [[] for _ in specs]
    for round_ in range(repeats):
        for spec, runs in zip(specs, tried, strict=True):
            of = f" (run {round_ + 1} of {repeats})" if repeats > 1 else ""
            step(f"engine: {fit_name(spec)}{of}")
            runs.append(run(spec))
    return [sorted(runs, key=lambda r: r["eps_steady"])[len(runs) // 2] for runs in tried]


def calibration_steps(with_check: bool, repeats: int = 1) -> int:
    """How many steps `calibrate` announces."""
    return fit_steps(repeats) + (len(check_configs(SyntheticSpec())) if with_check else 0)


def calibrate(
    examples: int, with_check: bool, step: Step = _quiet, repeats: int = 1
) -> tuple[CostModel, dict[str, float], list[Row]]:
    """Measure this machine's profile (each fit job the median of `repeats` runs), and
    (optionally) predict the engine's EPS on other jobs: rows of measured vs predicted
    EPS, the fit jobs' marked. `step(what)` is told of each of its `calibration_steps`
    steps before it starts."""
    connect(None, os.cpu_count())
    cost, measured, rows = machine_cost(examples, os.cpu_count() or 1, step, repeats=repeats)
    if with_check:
        for name, spec in check_configs(_engine_synthetic(examples)):
            step(f"engine and simulator: {name}")
            rows.append(_row(name, run_job(spec), simulated(spec, cost)))
    return cost, measured, rows


def _row(name: str, engine: dict[str, Any], simulation: dict[str, Any]) -> Row:
    """Engine vs simulator on one job: steady EPS (`eps_steady`), and CPU per example by
    role."""
    if "eps_steady" not in engine:
        raise ValueError(
            f"calibration figures: the engine's run of {name} has no steady examples/s "
            "(eps_steady): measure the figures again"
        )
    measured, predicted = engine["eps_steady"], simulation["eps_steady"]
    return {
        "config": name,
        "measured_eps": round(measured),
        "predicted_eps": round(predicted),
        "error": round(predicted / measured - 1.0, 3),
        "cpu_us_per_example": cpu_per_example(engine),
        "predicted_cpu_us_per_example": cpu_per_example(simulation),
    }
