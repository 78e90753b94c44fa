"""The engine jobs calibration runs, and what their runs spent: a message end's CPU on a
trainer's process and on a server's, the worker speed inside the engine, a byte's CPU on
either side, and a batch's at the reader's producer."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from recsync.coordinator.outcome import HELPER_PROCESSES
from recsync.coordinator.spec import ClusterSpec, JobSpec, plan_for
from recsync.data.synthetic import SyntheticSpec
from recsync.families import strategy_config
from recsync.model.spec import ModelSpec
from recsync.optim.train_spec import TrainSpec
from recsync.protocol.address import Role
from recsync.runtime.sim.cost import CostModel
from recsync.runtime.sim.job import SimJob
from recsync.runtime.sim.network import Machine

_NOT_SERVERS = (Role.TRAINER.plural, Role.READER.plural)  # the summary's roles off that side
MIN_MORE_ENDS = 2.0  # the second fit job's message ends beyond the first's, in its multiples


def fit_configs(synthetic: SyntheticSpec) -> tuple[JobSpec, JobSpec]:
    """The engine jobs calibration measures a call's CPU and the worker speed in (no
    strategy's sync in them), independent: 1 trainer x 2 workers (in processes of their
    own, as by default) with 1 embedding server (one call a step to it, one to the reader),
    and 2 trainers x 2 workers with 8 (eight calls a step to them: the same rows in seven
    more calls a batch). The second must make several times the first's calls: a
    difference within the engine's run-to-run noise cannot tell a call's cost."""
    model, train, strategy = ModelSpec(), TrainSpec(), strategy_config("independent")
    return (
        JobSpec(model, train, ClusterSpec(1, 2, 1), strategy, synthetic),
        JobSpec(model, train, ClusterSpec(2, 2, 8), strategy, synthetic),
    )


def bytes_config(synthetic: SyntheticSpec) -> JobSpec:
    """The engine job calibration measures a byte's CPU in: the first fit job's cluster
    under async with one dense server (each step pushes the dense gradient to it and pulls
    the dense model back: megabytes a step, where the first job's messages carry ids)."""
    cluster = ClusterSpec(1, 2, 1, num_dense_servers=1)
    return JobSpec(ModelSpec(), TrainSpec(), cluster, strategy_config("async"), synthetic)


def fit_name(spec: JobSpec) -> str:
    """A fit job as rows and progress name it: "1x2 independent, 1 embedding server"."""
    cluster = spec.cluster
    servers = cluster.num_embedding_servers
    return (
        f"{cluster.num_trainers}x{cluster.workers_per_trainer} {spec.strategy.name}, "
        f"{servers} embedding server{'s' if servers > 1 else ''}"
    )


def reader_batch_cpu(runs: list[dict[str, Any]], batch_size: int) -> float | None:
    """CPU seconds the reader's background producer spent making a batch in the engine's
    runs (their summaries tell it among the reader's CPU), over every run that tells; None
    where none does (figures of old)."""
    spent = made = 0.0
    for run in runs:
        producer = run.get("thread_cpu_seconds", {}).get("reader", {}).get(HELPER_PROCESSES)
        if producer:
            spent += producer
            made += run["examples_trained"] / batch_size
    return spent / made if made else None


def message_end_cpu(
    few: JobSpec,
    many: JobSpec,
    few_run: dict[str, Any],
    many_run: dict[str, Any],
    cost: CostModel,
) -> tuple[float, float]:
    """CPU seconds one end of a message takes in a running job at a trainer's process (the
    caller's end) and at a server's (the callee's; the reader's is taken to cost the
    same): the difference of the engine's runs of the two fit jobs (`few_run`,
    `many_run`) in CPU an example on either side over the difference in message ends an
    example there (counted by the simulator, which runs the same nodes, under `cost`: the
    two jobs train the same rows and batches, the second in several times the first's
    calls to its servers). The reader is on neither side: both jobs make it the same
    calls, and its CPU (its process and its producer's) swings from run to run by more
    than the servers' difference (20 us an example on a loaded machine, 2026-11-29).
    Raises where the second job's ends are too few more to tell, or did not cost more."""
    few_ends, many_ends = _message_ends(few, cost), _message_ends(many, cost)
    few_cpu, many_cpu = _cpu_by_side(few_run), _cpu_by_side(many_run)
    prices = []
    for side, name in enumerate(("the trainers'", "the servers'")):
        more = many_ends[side] - few_ends[side]
        if more < MIN_MORE_ENDS * few_ends[side]:
            raise ValueError(
                f"calibration: the fit jobs put {few_ends[side]:.3f} and {many_ends[side]:.3f} "
                f"message ends an example on {name} processes; the second must put at least "
                f"{1 + MIN_MORE_ENDS:.0f} times the first's to tell what one costs"
            )
        price = (many_cpu[side] - few_cpu[side]) / more
        if price <= 0:
            raise ValueError(
                f"calibration: {more:.3f} more message ends an example cost {name} processes "
                f"{(many_cpu[side] - few_cpu[side]) * 1e6:+.1f} us of CPU an example (a message "
                "must cost both ends CPU); is the machine busy with other work?"
            )
        prices.append(price)
    return prices[0], prices[1]


def _message_ends(spec: JobSpec, cost: CostModel) -> tuple[float, float]:
    """Message ends an example a job puts on its trainers' processes and on its servers',
    in the simulator."""
    return _simulated_by_side(spec, cost, _message_ends_of)[0]


def _simulated_by_side(
    spec: JobSpec, cost: CostModel, *counts: Callable[[Machine], float]
) -> list[tuple[float, float]]:
    """Each of `counts` of one simulated run's machines an example, summed over its
    trainers and over its servers (every node but the trainers and the reader; unrounded,
    unlike the summary's)."""
    job = SimJob(spec, plan_for(spec), cost)
    examples = job.run()["examples_trained"]
    trainer_machines = [h.machine for h in job.hosts_of(Role.TRAINER)]
    server_machines = [
        host.machine
        for address, host in job.hosts.items()
        if address.role not in (Role.TRAINER, Role.READER)
    ]
    sides = []
    for count in counts:
        trainers = sum(count(m) for m in trainer_machines)
        servers = sum(count(m) for m in server_machines)
        sides.append((trainers / examples, servers / examples))
    return sides


def _cpu_by_side(run: dict[str, Any]) -> tuple[float, float]:
    """A run's CPU seconds an example on its trainers' processes and on its servers' (every
    role but the trainers and the reader)."""
    assert run.get("cpu_seconds"), "the run's summary has no CPU by role"
    cpu, examples = run["cpu_seconds"], run["examples_trained"]
    servers = sum(seconds for role, seconds in cpu.items() if role not in _NOT_SERVERS)
    return cpu["trainers"] / examples, servers / examples


def worker_speed(few: JobSpec, few_run: dict[str, Any], cost: CostModel) -> float:
    """The factor of the measured worker speed at which the simulated trainers of `few`
    spend the CPU an example its engine run's spent (a worker's math runs at another speed
    inside the engine, amid Ray's threads and the other processes, than alone): the
    engine's trainer CPU less what the simulator charges their messages, against the
    simulator's worker math."""
    free = dataclasses.replace(
        cost, message_cpu_s=0.0, server_message_cpu_s=0.0, byte_cpu_s=0.0, server_byte_cpu_s=0.0
    )
    math_s = _simulated_by_side(few, free, _cpu_seconds)[0][0]
    messages_s = _simulated_by_side(few, cost, _cpu_seconds)[0][0] - math_s
    engine_s = _cpu_by_side(few_run)[0]
    if engine_s <= messages_s:
        raise ValueError(
            f"calibration: the engine's trainers spent {engine_s * 1e6:.1f} us of CPU an "
            f"example, no more than their messages' {messages_s * 1e6:.1f} us alone"
        )
    return math_s / (engine_s - messages_s)


def _cpu_seconds(machine: Machine) -> float:
    return machine.cpu_s


def byte_cpu(spec: JobSpec, run: dict[str, Any], cost: CostModel) -> tuple[float, float]:
    """CPU seconds each byte of a message takes at either end in a running job, at a
    trainer's process and at a server's (the reader's taken to cost the same): what the
    engine's run of `spec` (`bytes_config`'s) spent an example on either side (the reader
    on neither) beyond what the simulator charges there under `cost` with bytes free (the
    math, the servers' work, the message ends at their measured prices), over the bytes
    an example its messages carry there. A side whose run spent no more than that is
    charged nothing for its bytes (0.0)."""
    free = dataclasses.replace(cost, byte_cpu_s=0.0, server_byte_cpu_s=0.0)
    charged, carried = _simulated_by_side(spec, free, _cpu_seconds, _message_bytes)
    spent = _cpu_by_side(run)
    prices = []
    for side in range(2):
        assert carried[side] > 0, "the bytes job's messages carry no bytes"
        prices.append(max(spent[side] - charged[side], 0.0) / carried[side])
    return prices[0], prices[1]


def _message_bytes(machine: Machine) -> float:
    return machine.message_bytes


def _message_ends_of(machine: Machine) -> float:
    return machine.message_ends
