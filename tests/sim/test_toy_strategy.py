"""A new strategy of an existing family, as a contributor adds one: one config (and its
policy) deriving from the family's base, added through the family's extension point
(`add_strategy`), built by name and run to the end by the real simulator."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import ClassVar

import pytest
import torch

from recsync.coordinator.spec import ClusterSpec, JobSpec, plan_for
from recsync.data.synthetic import SyntheticSpec
from recsync.families import STRATEGIES, strategy_config
from recsync.families.gradient import GradientFamily
from recsync.families.gradient.dense_server import DENSE_SERVER
from recsync.families.gradient.strategy import GradientStrategy
from recsync.model.spec import ModelSpec, TableSpec
from recsync.optim.train_spec import TrainSpec
from recsync.runtime.sim.cost import CostModel
from recsync.runtime.sim.job import SimJob
from recsync.strategy.config import StrategyConfig
from recsync.strategy.family import add_strategy, family_of
from recsync.strategy.gradient import Action, GradientPolicy, Push

SYNTHETIC = SyntheticSpec(num_train=2_048, num_test=1_000, num_dense=4, table_rows=(50,) * 3)
MODEL = ModelSpec(
    num_dense=4, tables=tuple(TableSpec(f"C{i}", 50, 8) for i in range(3)), top_mlp=(8,)
)
TRAIN = TrainSpec(batch_size=64)


class HalfStepServer(GradientPolicy):
    """Applies every gradient on arrival, at half the learning rate."""

    def on_push(self, push: Push) -> list[Action]:
        return [self._apply([(push.grad_id, 1.0)], 1.0, lr_scale=0.5)]


@dataclass(frozen=True)
class ToyConfig(GradientStrategy):
    """Asynchronous half steps: the toy strategy."""

    name: ClassVar[str] = "toy"
    label: ClassVar[str] = "toy"

    def make_server(self, num_workers: int, sparse: bool) -> HalfStepServer:
        return HalfStepServer(num_workers, sparse)


@pytest.fixture
def toy_registered() -> Iterator[None]:
    add_strategy(ToyConfig)
    yield
    del STRATEGIES["toy"]


def test_a_strategy_of_no_family_is_refused() -> None:
    class Orphan(StrategyConfig):  # of no family's base type
        name: ClassVar[str] = "orphan"
        label: ClassVar[str] = "orphan"

    with pytest.raises(ValueError, match="no registered strategy family"):
        add_strategy(Orphan)
    assert "orphan" not in STRATEGIES


@pytest.mark.usefixtures("toy_registered")
def test_a_toy_strategy_trains_through_the_simulator() -> None:
    config = strategy_config("toy")
    assert isinstance(config, ToyConfig)
    assert isinstance(family_of(config), GradientFamily)
    spec = JobSpec(MODEL, TRAIN, ClusterSpec(2, 2, 2, num_dense_servers=1), config, SYNTHETIC)
    sim = SimJob(spec, plan_for(spec), CostModel())
    initial = sim.nodes_of(DENSE_SERVER)[0].values.clone()
    summary = sim.run()
    assert summary["strategy"] == "toy"
    assert summary["examples_trained"] == SYNTHETIC.num_train
    batches = SYNTHETIC.num_train // TRAIN.batch_size
    assert summary["gradients_applied"] == batches  # every push applied alone
    server = sim.nodes_of(DENSE_SERVER)[0]
    assert isinstance(server.policy, HalfStepServer)
    assert server.policy.version == batches
    assert not torch.equal(server.values, initial)
    assert summary["test_auc"] > 0.5
