"""Priced math (simulate math = "priced"): the same virtual times and events as real math
where the cost model prices the compute, no model values, little memory."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import textwrap

import pytest
import torch

from recsync.coordinator.evaluation import EarlyStopping
from recsync.coordinator.spec import ClusterSpec, JobSpec, plan_for
from recsync.data.synthetic import SyntheticSpec
from recsync.model.hash_spec import Admission, HashTables
from recsync.model.priced import PricedTensor, PricedValueRead, priced_math
from recsync.model.spec import ModelSpec, TableSpec
from recsync.optim.train_spec import TrainSpec
from recsync.protocol.address import Role
from recsync.runtime.sim.cost import CostModel, Stragglers
from recsync.runtime.sim.job import SimJob
from recsync.runtime.sim.math_modes import QUALITY_KEYS
from recsync.strategy.registry import load_families, strategy_config

load_families()
SYNTHETIC = SyntheticSpec(num_train=1_536, num_test=300, num_dense=4, table_rows=(50,) * 6)
MODEL = ModelSpec(
    num_dense=4,
    tables=tuple(TableSpec(f"C{i}", 50, 8) for i in range(6)),
    bottom_mlp=(16,),
    top_mlp=(16,),
)
COST = CostModel(speed_spread=0.1, batch_noise=0.1, stragglers=Stragglers(0.5, 3.0))
TWO_BY_TWO = ClusterSpec(2, 2, 2, num_dense_servers=2)


def spec_of(strategy: str, cluster: ClusterSpec = TWO_BY_TWO, model: ModelSpec = MODEL) -> JobSpec:
    return JobSpec(model, TrainSpec(batch_size=64), cluster, strategy_config(strategy), SYNTHETIC)


def timeline(spec: JobSpec, math: str) -> tuple[SimJob, list[tuple[float, int]], dict]:
    job = SimJob(spec, plan_for(spec), COST, math=math)
    summary = job.run()
    return job, job.handed, summary


@pytest.mark.parametrize(
    ("strategy", "cluster"),
    [
        ("easgd", TWO_BY_TWO),
        ("async", TWO_BY_TWO),
        ("sync", TWO_BY_TWO),
        ("gba", TWO_BY_TWO),
        ("psp", TWO_BY_TWO),
        ("allreduce", ClusterSpec(3, 1, 2)),
        ("hierarchical", TWO_BY_TWO),
    ],
)
def test_priced_runs_the_real_runs_events(strategy, cluster):
    """Every batch handed out at the same virtual time, the same end time, the same
    measures (messages, bytes, time blocked per effect, staleness): all but the quality."""
    assert_same_events(spec_of(strategy, cluster))


def test_priced_hash_tables_insert_and_evict_the_rows_real_ones_do():
    synthetic = dataclasses.replace(SYNTHETIC, keyed=True)
    model = dataclasses.replace(MODEL, hash_tables=HashTables(admission=Admission(min_count=2)))
    spec = JobSpec(model, TrainSpec(batch_size=64), TWO_BY_TWO, strategy_config("async"), synthetic)
    assert_same_events(spec)  # embedding_rows (live, inserted, refused) among the measures


@pytest.mark.parametrize("strategy", ["easgd", "async"])
def test_priced_tables_of_several_dims_run_the_real_runs_events(strategy):
    """Tables of their own dims (compact row gradients, one store per dim on a shard)."""
    tables = tuple(TableSpec(f"C{i}", 50, (4, 8, 16)[i % 3]) for i in range(6))
    model = dataclasses.replace(MODEL, tables=tables, interaction_dim=8)
    assert_same_events(spec_of(strategy, model=model))


def assert_same_events(spec: JobSpec) -> None:
    real_job, real_handed, real = timeline(spec, "real")
    priced_job, priced_handed, priced = timeline(spec, "priced")
    assert priced_handed == real_handed
    assert priced_job.clock.now == real_job.clock.now
    assert priced.pop("math") == "priced" and "math" not in real
    for key in QUALITY_KEYS:
        assert real[key] is not None and priced.pop(key) is None
        real.pop(key)
    assert priced == real
    for address, host in real_job.hosts.items():  # every node's effects and bytes, exactly
        other = priced_job.hosts[address].measures
        assert other.effects == host.measures.effects, address
        assert other.blocked == host.measures.blocked, address


def test_priced_nodes_hold_no_values():
    job = SimJob(spec_of("easgd"), plan_for(spec_of("easgd")), COST, math="priced")
    trainer = job.nodes_of(Role.TRAINER)[0]
    assert isinstance(trainer.replica.flat, PricedTensor)
    shard = job.nodes_of(Role.EMBEDDING_SERVER)[0]
    assert isinstance(shard.shard.weight, PricedTensor)
    assert not isinstance(shard.shard.versions, PricedTensor)  # versions stay real


def test_a_priced_value_cannot_be_read():
    with priced_math():
        values = torch.zeros(10)
    assert isinstance(values, PricedTensor) and values.nbytes == 40
    assert isinstance(values + torch.ones(10), PricedTensor)
    with pytest.raises(PricedValueRead):
        float(values.sum())


@pytest.mark.parametrize(
    ("option", "named"),
    [
        ({"eval_every": 500}, "run.eval_every"),
        ({"early_stopping": EarlyStopping(patience=2)}, "run.early_stopping"),
        ({"keep_best": True}, "run.keep_best"),
    ],
)
def test_priced_refuses_what_needs_values(option, named):
    spec = spec_of("easgd")
    with pytest.raises(ValueError, match=named):
        SimJob(spec, plan_for(spec), COST, math="priced", **option)


def test_unknown_math_is_refused():
    spec = spec_of("easgd")
    with pytest.raises(ValueError, match="simulate.math"):
        SimJob(spec, plan_for(spec), COST, math="fake")


BIG_DENSE = """
import resource, sys
from recsync.coordinator.spec import ClusterSpec, JobSpec, plan_for
from recsync.data.synthetic import SyntheticSpec
from recsync.model.hash_spec import Admission, HashTables
from recsync.model.spec import ModelSpec, TableSpec
from recsync.optim.train_spec import TrainSpec
from recsync.runtime.sim.cost import CostModel
from recsync.runtime.sim.job import SimJob
from recsync.strategy.registry import load_families, strategy_config
load_families()
model = ModelSpec(num_dense=4, tables=tuple(TableSpec(f"C{i}", 50, 8) for i in range(6)),
                  bottom_mlp=(16,), top_mlp=(8192, 8192, 4096))  # 115 M parameters: 460 MB
synthetic = SyntheticSpec(num_train=1024, num_test=200, num_dense=4, table_rows=(50,) * 6)
spec = JobSpec(model, TrainSpec(batch_size=64), ClusterSpec(2, 4, 2), strategy_config(
    sys.argv[1]), synthetic)
plan = plan_for(spec)  # a sample of the data: as much in either mode
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
summary = SimJob(spec, plan, CostModel(), math="priced").run()
grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
print(grown // 1024, summary["examples_trained"])
"""


@pytest.mark.parametrize("strategy", ["easgd", "async", "hierarchical"])
def test_a_dense_part_of_hundreds_of_mb_runs_in_little_memory(strategy):
    """Two trainers (and a center, dense servers or group servers) of a 460 MB dense
    part: real math would hold several GB; priced math grows the process by far less
    than one copy (about 80 MB here, whatever the dense part's size)."""
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(BIG_DENSE), strategy],
        capture_output=True,
        text=True,
        check=True,
        timeout=240,
    )
    grown_mb, trained = map(int, done.stdout.split())
    assert trained == 1024
    assert grown_mb < 150, f"priced math grew the process by {grown_mb} MB"
