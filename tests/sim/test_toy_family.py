"""A strategy family from outside the package tree (tests/support/toy_family.py: its own
server, role and message) registered and run to the end by the simulator."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import toy_family
from toy_family import FAMILY, MEAN_SERVER, MeanServer, ToyMeanConfig

from recsync.coordinator.spec import ClusterSpec, JobSpec, plan_for
from recsync.data.synthetic import SyntheticSpec
from recsync.families import STRATEGIES, strategy_config
from recsync.model.spec import ModelSpec, TableSpec
from recsync.optim.train_spec import TrainSpec
from recsync.protocol.address import Role
from recsync.runtime.sim.cost import CostModel
from recsync.runtime.sim.job import SimJob
from recsync.strategy.family import family_of, register_family, unregister_family
from recsync.strategy.roles import known_roles

SYNTHETIC = SyntheticSpec(num_train=2_048, num_test=1_000, num_dense=4, table_rows=(50,) * 3)
MODEL = ModelSpec(
    num_dense=4, tables=tuple(TableSpec(f"C{i}", 50, 8) for i in range(3)), top_mlp=(8,)
)
TRAIN = TrainSpec(batch_size=64)


@pytest.fixture
def toy_registered() -> Iterator[None]:
    register_family(FAMILY)
    yield
    unregister_family(FAMILY)


def toy_job(num_servers: int = 2) -> JobSpec:
    config = strategy_config("toy-mean", timing={"mode": "fixed", "every_iterations": 2})
    cluster = ClusterSpec(2, 2, 2, num_dense_servers=num_servers)
    return JobSpec(MODEL, TRAIN, cluster, config, SYNTHETIC)


@pytest.mark.usefixtures("toy_registered")
def test_a_toy_family_trains_through_the_simulator_with_its_own_servers() -> None:
    spec = toy_job()
    assert isinstance(spec.strategy, ToyMeanConfig)
    assert family_of(spec.strategy) is FAMILY
    sim = SimJob(spec, plan_for(spec), CostModel())
    servers = sim.nodes_of(MEAN_SERVER)
    assert [type(s) for s in servers] == [MeanServer, MeanServer]
    summary = sim.run()
    assert summary["strategy"].startswith("FR-toy-mean")
    assert summary["examples_trained"] == SYNTHETIC.num_train
    # every worker deposits every 2 of its iterations, one slice with each mean server
    iterations = SYNTHETIC.num_train // TRAIN.batch_size
    assert summary["deposits"] == 2 * (iterations // 2)
    traffic = summary["traffic"]
    assert traffic["trainers"]["Deposit"]["calls"] == summary["deposits"]
    assert traffic["mean_servers"]["Deposit"]["bytes"] > 0  # the means sent back
    assert summary["test_auc"] > 0.5
    assert summary["num_sync_servers"] == 0  # its servers are its own role's


def test_registering_the_toy_family_adds_its_role_and_strategy_and_forgetting_removes_them():
    register_family(FAMILY)
    try:
        assert STRATEGIES["toy-mean"] is ToyMeanConfig
        assert MEAN_SERVER in known_roles()
        assert Role.declare("mean-server") is MEAN_SERVER
    finally:
        unregister_family(FAMILY)
    assert "toy-mean" not in STRATEGIES
    assert MEAN_SERVER not in known_roles()
    assert "src/recsync" not in str(toy_family.__file__)  # from outside the package tree
