"""One point of an advice, measured in the simulator: a candidate's speed in priced math
(the model's shapes only) on a slice of the data under one condition, or its quality in
real math on a sample of the data with one seed. Each returns a flat JSON-ready dict."""

from __future__ import annotations

from typing import Any

from recsync.app.advise.candidates import Candidate, JobSource
from recsync.app.advise.cluster import SlowServerCondition, condition_cost
from recsync.app.config.schema import Config
from recsync.app.runs.distributed import job_spec
from recsync.coordinator.evaluation import EarlyStopping
from recsync.coordinator.spec import JobSpec, plan_for
from recsync.protocol.address import Role
from recsync.runtime.sim.cost import CostModel
from recsync.runtime.sim.job import SimJob
from recsync.strategy.family import family_of

# A quality point trains until its held-out loss has flattened: the loss is measured every
# tenth of the longest sample, and training stops once FLAT_PATIENCE measurements in a row
# improved on the best by less than FLAT_MIN_DELTA (about 0.1% of a CTR model's logloss),
# not before half the sample (a model that has not started to learn is flat too), or when
# the sample is used up (then the point says it had not flattened).
QUALITY_EVALUATIONS = 10
FLAT_PATIENCE = 2
FLAT_MIN_DELTA = 0.0005
PRICED_TEST_EXAMPLES = 512  # a priced run scores nothing: its test split is made small
SERVER_SLOTS = 4  # CPU slots of a server's machine in the simulator (SimJob server_threads)
# a reader node makes its batches on one slot (its ReaderSpec's threads)


def slowed_server(spec: JobSpec, condition: SlowServerCondition) -> str | None:
    """The server a slow-server condition slows in this job (None: it has none of that
    role): embedding server 0, or the first server holding the dense part."""
    if condition.role == "embedding":
        return f"{Role.EMBEDDING_SERVER.value}-0"
    return family_of(spec.strategy).first_dense_server(spec)


def whole_batches(examples: int, batch_size: int) -> int:
    """`examples` rounded down to whole batches, at least one: a run stopped after a
    number of examples stops at a batch's end (the simulator's one-pass check expects
    exactly that many where the data is longer)."""
    return max(batch_size, examples // batch_size * batch_size)


def data_changes(config: Config, examples: int, test_examples: int) -> dict[str, Any]:
    """Keys that make a synthetic job's data `examples` long with `test_examples` held out
    (file data: none; the run stops after `examples` instead)."""
    if config.data.source != "synthetic":
        return {"data.test_max_examples": test_examples}
    return {"data.synthetic.num_train": examples, "data.synthetic.num_test": test_examples}


def node_loads(summary: dict[str, Any], cost: CostModel, readers: int) -> dict[str, float]:
    """Each role's busiest resource per node, as a share of what the node has: its CPU
    (a worker thread's core, a reader's one slot, a server's SERVER_SLOTS) or its NIC's
    sending (what it receives is not counted: the summary has bytes by sender)."""
    seconds = summary["train_seconds"] or 1e-12
    nodes = {
        "trainers": summary["num_trainers"],
        "embedding_servers": summary["num_embedding_servers"],
        "sync_servers": summary.get("num_sync_servers", 0),
        "dense_servers": summary.get("num_dense_servers", 0),
        "group_servers": summary.get("num_group_servers", 0),
        "reader": readers,
    }
    loads: dict[str, float] = {}
    for role, cpu in summary["cpu_seconds"].items():
        count = nodes.get(role) or 1
        slots = {"trainers": summary["workers_per_trainer"], "reader": 1}.get(role, SERVER_SLOTS)
        sent = summary["bytes_sent"].get(role, 0) / (count * cost.bandwidth_bytes_s * seconds)
        loads[role] = max(cpu / (count * slots * seconds), sent)
    return loads


def staleness_of(summary: dict[str, Any]) -> tuple[str, float | None]:
    """What says how stale the dense part is: the dense staleness of a gradient strategy
    (mean versions behind), or a replica strategy's average sync gap."""
    dense = summary.get("dense_staleness")
    if isinstance(dense, dict) and dense.get("mean") is not None:
        return "staleness", float(dense["mean"])
    if summary.get("average_sync_gap") is not None:
        return "sync gap", float(summary["average_sync_gap"])
    return "-", None


def priced_point(
    job: JobSource,
    candidate: Candidate,
    condition: Any,
    cost: CostModel,
    examples: int,
) -> dict[str, Any]:
    """The candidate's speed on `examples` examples of the data under `condition` (None:
    clean) with the cluster's `cost`, in priced math."""
    more: dict[str, Any] = {"simulate.math": "priced", "run.early_stopping.patience": 0}
    config = candidate.config(job, more)
    examples = whole_batches(examples, config.train.batch_size)
    more |= data_changes(config, examples, PRICED_TEST_EXAMPLES)
    config = candidate.config(job, more)
    spec = job_spec(config, stop_after=examples)
    slowed = None
    if isinstance(condition, SlowServerCondition):
        slowed = slowed_server(spec, condition)
        if slowed is not None:
            more["cluster.server_slowdown"] = {slowed: condition.slowdown}
            spec = job_spec(candidate.config(job, more), stop_after=examples)
    point_cost = condition_cost(cost, condition)
    sim = SimJob(spec, plan_for(spec), point_cost, math="priced")
    summary = sim.run()
    loads = node_loads(summary, point_cost, spec.cluster.readers)
    bottleneck = max(loads, key=loads.__getitem__)
    kind, staleness = staleness_of(summary)
    return {
        "examples": summary["examples_trained"],
        "virtual_seconds": summary["train_seconds"],
        "eps_whole_run": summary["eps"],
        "eps_steady": summary["eps_steady"],
        "staleness_kind": kind,
        "staleness": staleness,
        "bytes_sent": summary["bytes_sent"],
        "cpu_seconds": summary["cpu_seconds"],
        "blocked_seconds": summary["blocked_seconds"],
        "loads": loads,
        "bottleneck": bottleneck,
        "bottleneck_load": loads[bottleneck],
        "slowed_server": slowed,
    }


def quality_point(
    job: JobSource,
    candidate: Candidate,
    cost: CostModel,
    examples: int,
    test_examples: int,
    seed: int,
) -> dict[str, Any]:
    """The candidate's test AUC and NE once its held-out loss has flattened (the rule
    above), training on at most the first `examples` examples of the data (scored on
    `test_examples` held out), real math, seed `seed`."""
    more: dict[str, Any] = {"simulate.math": "real", "run.seed": seed}
    more["run.early_stopping.patience"] = 0
    config = candidate.config(job, more)
    batch = config.train.batch_size
    examples = whole_batches(examples, batch)
    more |= data_changes(config, examples, test_examples)
    spec = job_spec(candidate.config(job, more), stop_after=examples)
    flat = EarlyStopping("test_logloss", FLAT_PATIENCE, FLAT_MIN_DELTA, examples // 2)
    every = whole_batches(examples // QUALITY_EVALUATIONS, batch)
    sim = SimJob(
        spec,
        plan_for(spec),
        cost,
        eval_every=every,
        early_stopping=flat,
        math="real",
        eval_examples=test_examples,
    )
    summary = sim.run()
    stopped = (summary.get("early_stopping") or {}).get("stopped_at_examples")
    return {
        "seed": seed,
        "examples": summary["examples_trained"],
        "flattened": stopped is not None,
        "test_auc": summary["test_auc"],
        "test_ne": summary["test_ne"],
        "teacher_auc": summary.get("teacher_auc"),
    }
