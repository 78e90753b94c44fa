"""The end of a distributed job, written once for both drivers: from the nodes' reports and
the driver's measures, the one-pass check, the final model and its held-out quality, the
summary of measures, and the checkpoint (a consistent snapshot: every batch handed out was
trained when the reports were taken)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import torch

from recsync.coordinator.checkpoint import JobState, layout_slices
from recsync.coordinator.measures import check_one_pass, worker_step_measures
from recsync.coordinator.reader import ReaderReport
from recsync.coordinator.readers import data_unit_of, joined_report, position_of
from recsync.coordinator.spec import JobSpec
from recsync.coordinator.topology import Topology
from recsync.data.batch import Batch
from recsync.data.held_out import two_classes
from recsync.data.shares import StreamPosition
from recsync.errors import DataError
from recsync.metrics.quality import Quality, evaluate_predictions
from recsync.model.priced import is_priced
from recsync.protocol.address import Address, Role
from recsync.ps.embedding_server import ShardReport
from recsync.ps.layout import TableLayout
from recsync.ps.local import loaded_embeddings
from recsync.strategy.family import family_of
from recsync.strategy.roles import counted_roles
from recsync.trainer.reference import predict
from recsync.trainer.replica import DenseReplica
from recsync.trainer.stats import TrainerReport

MEASURED = (
    "bytes_sent",
    "bytes_to",
    "calls",
    "blocked",
    "effects",
    "worker_compute_s",
    "worker_steps",
    "cpu_s",
    "control_bytes",
)


THREADS = "threads:"  # a `NodeMeasures.cpu_s` key's prefix: CPU of one kind of thread
HELPER_PROCESSES = "helper_processes"  # the kind (after THREADS) of a node's helper processes


@dataclass
class NodeMeasures:
    """What a driver measured of one node: bytes it sent (its requests and its replies) and
    calls it made, by message kind; of its loops the seconds blocked and the effects
    yielded, by effect label; and per worker (its global index) the seconds it computed and
    the steps it computed (`Compute` effects: the math of a step, stragglers' slowdown
    included); and the CPU seconds its processes spent (`cpu_s["process"]`, Ray's own threads
    in them and its helper processes, such as the reader's batch producer, included; a
    driver that cannot tell leaves it empty), and of that, where a driver tells, its
    threads' by what they run and its helpers' (`cpu_s[THREADS + kind]`). `bytes_to`: the
    bytes it sent by the machine they went to (its address; the engine counts whole frames
    as its connections write them, the simulator the messages' bytes), which tells what
    crossed each machine's link (`host_traffic.py`); `control_bytes`, by what, the bytes it
    sent the driver's side outside the data path (the engine's reports through Ray, for
    evaluations, cuts and the end, as "report"; its answers to the driver's asks, progress
    polls, cuts and held-out samples, as "asked"; the simulator counts none)."""

    bytes_sent: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    bytes_to: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    calls: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    blocked: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    effects: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    worker_compute_s: dict[int, float] = field(default_factory=lambda: defaultdict(float))
    worker_steps: dict[int, int] = field(default_factory=lambda: defaultdict(int))
    cpu_s: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    control_bytes: dict[str, int] = field(default_factory=lambda: defaultdict(int))

    def count_compute(self, worker: int, seconds: float) -> None:
        self.worker_compute_s[worker] += seconds
        self.worker_steps[worker] += 1

    def merged(self, other: NodeMeasures) -> NodeMeasures:
        """Both measures summed (one node hosted in several processes)."""
        total = NodeMeasures()
        for mine in (self, other):
            for name in MEASURED:
                into = getattr(total, name)
                for key, value in getattr(mine, name).items():
                    into[key] += value
        return total


@dataclass
class JobEnd:
    """What a driver gathered when the job's loops finished."""

    engine: str
    reports: dict[Address, Any]
    measures: dict[Address, NodeMeasures]
    train_seconds: float
    lost_examples: list[int] | None = None  # per trainer: handed out, lost in a crash

    def of_role(self, role: Role) -> list[Any]:
        """The reports of the nodes of one role, in index order."""
        found = [(a.index, r) for a, r in self.reports.items() if a.role is role]
        return [r for _, r in sorted(found, key=lambda item: item[0])]


def final_dense(spec: JobSpec, end: JobEnd) -> torch.Tensor:
    """The dense model the job ends with, as the strategy's family puts it together (the
    dense servers' blocks, or a combination of the trainers' or groups' replicas)."""
    return family_of(spec.strategy).final_dense(spec, end.of_role)


def evaluate_model(
    spec: JobSpec,
    layout: TableLayout,
    dense_flat: torch.Tensor,
    shard_states: list[dict[str, Any]],
    test: Batch,
) -> Quality:
    """Held-out quality of a dense vector and shards' states (read-only: nothing is
    trained, no hash table row is added)."""
    dense = DenseReplica(spec.model, spec.train.seed, spec.train.dense_optimizer)
    dense.load_flat(dense_flat)
    probs = predict(
        dense.module,
        loaded_embeddings(spec.train.sparse_optimizer, spec.train.seed, layout, shard_states),
        test,
    )
    return evaluate_predictions(test.labels, probs)


def finish_job(topology: Topology, end: JobEnd) -> tuple[dict[str, Any], JobState]:
    """Check one-pass accounting, evaluate, and gather every measure of the run; and the
    end state as a checkpoint."""
    spec = topology.spec
    reader = joined_report(end.of_role(Role.READER))
    trainers: list[TrainerReport] = end.of_role(Role.TRAINER)
    shards: list[ShardReport] = end.of_role(Role.EMBEDDING_SERVER)
    stats = [t.stats for t in trainers]
    # a restarted trainer: its lost incarnations trained some, gave the rest back
    previous = reader.previous_examples or [0] * len(stats)
    requeued = reader.requeued_examples or [0] * len(stats)
    trained = [s.total_examples + p for s, p in zip(stats, previous, strict=True)]
    lost = end.lost_examples or [0] * len(trained)
    dataset = None if reader.stopped else _dataset(spec)
    kept = [h - r for h, r in zip(reader.handed_examples, requeued, strict=True)]
    check_one_pass(kept, [a + b for a, b in zip(trained, lost, strict=True)], dataset)
    if reader.test is None or reader.test.batch_size == 0:
        raise DataError(
            "the held-out set is empty: cannot evaluate (no test data, or every line of it "
            "was skipped; see data.test_path or data.test_fraction)"
        )
    if not two_classes(reader.test):
        label = int(reader.test.labels[0])
        raise DataError(
            f"the held-out set's {reader.test.batch_size:,} labels are all {label}: AUC and "
            "NE are undefined (is the label column right? is the test data a sample of both?)"
        )
    dense = final_dense(spec, end)
    quality = None  # priced math (model/priced.py): a model without values, no quality
    if not is_priced(dense):
        states = [s.state for s in shards]
        quality = evaluate_model(spec, topology.layout, dense, states, reader.test)
    examples = sum(trained)
    summary: dict[str, Any] = {
        "engine": end.engine,
        "strategy": spec.strategy.describe(),
        "num_trainers": spec.cluster.num_trainers,
        "workers_per_trainer": spec.cluster.workers_per_trainer,
        "worker_processes": any(t.worker_processes for t in topology.of_role(Role.TRAINER)),
        "num_embedding_servers": len(shards),
        **{f"num_{role.plural}": len(topology.of_role(role)) for role in counted_roles()},
        "examples_trained": examples,
        "examples_per_trainer": trained,
        "examples_lost_in_crash": sum(lost),
        "train_seconds": end.train_seconds,
        "eps": examples / end.train_seconds,
        "elp": spec.cluster.elp(spec.train.batch_size),
        **family_of(spec.strategy).measures(spec, end.of_role, end.train_seconds),
        "train_loss": sum(s.loss_sum for s in stats) / max(examples, 1),
        **_traffic(end, sum(s.total_iterations for s in stats)),
        **_worker_steps(end),
        **_test_measures(quality, reader.test.batch_size),
        "teacher_auc": reader.teacher_auc,
        "skipped": reader.skipped,
        "storage_retries": reader.storage_retries,
    }
    rows = topology.layout.rows_summary([s.state for s in shards])
    if rows is not None:
        summary["embedding_rows"] = rows
    state = _checkpoint(topology, end, dense)
    summary["checkpoint"] = {
        "data_position": state.data_position,
        "global_step": state.global_step,
        "in_flight_examples": state.in_flight_examples,
    }
    if state.data_unit is not None:
        summary["checkpoint"]["data_unit"] = state.data_unit
    return summary, state


def _test_measures(quality: Quality | None, examples: int) -> dict[str, Any]:
    """The held-out measures of the summary (None each without a quality)."""
    if quality is None:
        names = [k for k in Quality.__dataclass_fields__ if k != "examples"]
        return {**{f"test_{k}": None for k in names}, "test_examples": examples}
    measures = {f"test_{k}": v for k, v in quality.as_dict().items() if k != "examples"}
    return {**measures, "test_examples": quality.examples}


def _dataset(spec: JobSpec) -> int | None:
    """Examples the job must have handed out (known for the synthetic task). A limit the
    data ends before leaves it whole; else the reader hands out no batch that would pass
    the limit, and every batch before the stream's last is whole."""
    if spec.synthetic is None:
        return None
    dataset = spec.synthetic.num_train * spec.train.epochs - spec.handed_before
    limit = spec.stop_after_examples
    if limit is not None and spec.cluster.readers > 1:
        return None  # each reader stops at its share of the limit, in whole batches
    if limit is not None and limit < dataset:
        batch = spec.train.batch_size
        dataset = limit // batch * batch
    return dataset


def _worker_steps(end: JobEnd) -> dict[str, Any]:
    compute_s: dict[int, float] = defaultdict(float)
    steps: dict[int, int] = defaultdict(int)
    for measures in end.measures.values():
        for worker, seconds in measures.worker_compute_s.items():
            compute_s[worker] += seconds
        for worker, count in measures.worker_steps.items():
            steps[worker] += count
    return worker_step_measures(compute_s, steps)


def _traffic(end: JobEnd, batches: int) -> dict[str, Any]:
    """Bytes sent per role; per role and message kind, the calls made and bytes sent, and
    the calls per trained batch of the roles that make calls (their calls over the job's
    `batches`: what the messaging costs a step); time blocked and effects yielded by kind, over the
    nodes that run loops."""
    sent: dict[str, int] = defaultdict(int)
    traffic: dict[str, dict[str, dict[str, int]]] = defaultdict(dict)
    blocked: dict[str, float] = defaultdict(float)
    effects: dict[str, int] = defaultdict(int)
    cpu: dict[str, float] = defaultdict(float)
    threads: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for address, measures in end.measures.items():
        role = address.role.plural
        sent[role] += sum(measures.bytes_sent.values())
        if measures.cpu_s:
            cpu[role] += measures.cpu_s["process"]
        for key, seconds in measures.cpu_s.items():
            if key.startswith(THREADS):
                threads[role][key.removeprefix(THREADS)] += seconds
        for kind in set(measures.bytes_sent) | set(measures.calls):
            entry = traffic[role].setdefault(kind, {"calls": 0, "bytes": 0})
            entry["calls"] += measures.calls.get(kind, 0)
            entry["bytes"] += measures.bytes_sent.get(kind, 0)
        for label, seconds in measures.blocked.items():
            blocked[label] += seconds
        for label, count in measures.effects.items():
            effects[label] += count
    per_batch = {
        role: {
            kind: round(entry["calls"] / max(batches, 1), 3)
            for kind, entry in kinds.items()
            if entry["calls"]
        }
        for role, kinds in traffic.items()
        if any(entry["calls"] for entry in kinds.values())
    }
    for kinds in per_batch.values():
        kinds["total"] = round(sum(kinds.values()), 3)
    return {
        "bytes_sent": dict(sent),
        "traffic": {role: dict(sorted(kinds.items())) for role, kinds in sorted(traffic.items())},
        "calls_per_batch": {role: dict(sorted(k.items())) for role, k in sorted(per_batch.items())},
        "blocked_seconds": {k: round(v, 3) for k, v in blocked.items()},
        "effects": dict(effects),
        **({"cpu_seconds": {role: round(s, 2) for role, s in sorted(cpu.items())}} if cpu else {}),
        **({"thread_cpu_seconds": _rounded(threads)} if threads else {}),
    }


def _rounded(threads: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
    return {
        role: {kind: round(s, 2) for kind, s in sorted(kinds.items())}
        for role, kinds in sorted(threads.items())
    }


def _checkpoint(topology: Topology, end: JobEnd, dense: torch.Tensor) -> JobState:
    """The quiescent end state. Examples in flight at the stop: handed out when the reader
    first said the data was consumed, minus trained when each trainer first learned it
    (trainers learn a little after the stop: a lower bound)."""
    readers: list[ReaderReport] = end.of_role(Role.READER)
    reader = joined_report(readers)
    trainers: list[TrainerReport] = end.of_role(Role.TRAINER)
    dry = [t.stats.trained_when_dry for t in trainers]
    in_flight = 0
    if reader.handed_at_stop is not None and all(d is not None for d in dry):
        in_flight = max(0, reader.handed_at_stop - sum(d for d in dry if d is not None))
    position = position_of(topology, [r.consumed for r in readers])
    return model_state(topology, end, dense, position, in_flight)


def model_state(
    topology: Topology,
    end: JobEnd,
    dense: torch.Tensor,
    position: StreamPosition,
    in_flight: int,
) -> JobState:
    """The model the reports of `end` hold (embedding shards, dense part, optimizer states,
    global step) as a JobState at `position` of the stream."""
    spec = topology.spec
    family = family_of(spec.strategy)
    optimizer, steps = family.final_optimizer(spec, end.of_role)
    return JobState(
        dense=dense.clone(),
        dense_optimizer=optimizer,
        shards=[s.state for s in end.of_role(Role.EMBEDDING_SERVER)],
        slices=layout_slices(topology.layout),
        data_position=position.prefix,
        data_beyond=list(position.beyond) or None,
        global_step=(0 if spec.resume is None else spec.resume.global_step) + steps,
        in_flight_examples=in_flight,
        strategy=spec.strategy.describe(),
        family_state=family.state(spec, end.of_role),
        data_unit=data_unit_of(topology),
    )
