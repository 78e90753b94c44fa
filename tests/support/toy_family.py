"""A strategy family from outside recsync's package tree, as a contributor adds one: its
own server (a mean server, under a role of its own), its own message to it, its strategy's
config and its `Family`, registered with `register_family`. Its trainers are replica
trainers (the replica family's, used as a library) that, every round, deposit their replica
with the mean servers and pull halfway towards the running mean of every deposit so far.

`docs/architecture.md` ("Adding a strategy or a family") describes these steps; the tests
(tests/sim/test_toy_family.py, tests/engine/test_toy_family_engine.py) run the family on
both drivers.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import torch

from recsync.coordinator.measures import trainer_replicas
from recsync.coordinator.node_specs import SERVER_MARGIN, BuildContext, NodeSpec, TrainerSpec
from recsync.coordinator.spec import JobSpec
from recsync.families.replica.trainer import ReplicaTrainer
from recsync.families.synced_replicas.strategy import CenterStrategy, ReplicaPolicy, Timing
from recsync.protocol.address import Address, Role
from recsync.protocol.effects import Call
from recsync.protocol.messages import Message, Work
from recsync.protocol.node import Node
from recsync.ps.placement import JobPlan
from recsync.strategy.family import Family, Reports
from recsync.strategy.roles import RoleTraits

MEAN_SERVER = Role.declare("mean-server")


@dataclass(slots=True, eq=False)
class Deposit(Message):
    """-> Mean: a trainer's replica slice, added to the server's running mean."""

    values: torch.Tensor
    kind: ClassVar[str] = "Deposit"
    mutates: ClassVar[bool] = True

    def work(self) -> Work:
        return Work(elements=int(self.values.numel()))


@dataclass(slots=True, eq=False)
class Mean:
    """The running mean of the deposits of one slice, after this one; `deposits`: how
    many it holds."""

    values: torch.Tensor
    deposits: int


class MeanServer(Node):
    """One slice of the running mean of every replica deposited."""

    handles: ClassVar[dict[type[Message], str]] = {Deposit: "deposit"}

    def __init__(self, index: int, initial: torch.Tensor):
        self.name = f"{MEAN_SERVER.value}-{index}"
        self.mean, self.deposits = initial, 0

    def deposit(self, message: Deposit) -> Mean:
        self.deposits += 1
        self.mean += (message.values - self.mean) / self.deposits
        return Mean(self.mean.clone(), self.deposits)

    def report(self) -> Mean:
        return Mean(self.mean.clone(), self.deposits)


@dataclass(frozen=True)
class MeanServerSpec(NodeSpec):
    values: torch.Tensor

    def build(self, context: BuildContext) -> MeanServer:
        return MeanServer(self.address.index, self.values.clone())


class HalfwayPull:
    """The trainer's side: its replica moves halfway to the mean it got back."""

    def apply(self, replica: torch.Tensor, received: torch.Tensor) -> None:
        replica.lerp_(received, 0.5)


@dataclass(frozen=True)
class MeanStrategy(CenterStrategy):
    """The toy family's base type: a deposit and a pull a round, per mean server."""

    def make_replica(self, initial: torch.Tensor | None = None) -> ReplicaPolicy:
        return HalfwayPull()

    def round(
        self,
        policy: ReplicaPolicy,
        replica: torch.Tensor,
        writer: torch.Tensor,
        centers: Sequence[Address],
        ranges: Sequence[tuple[int, int]],
    ) -> Generator[Call, Any, None]:
        for server, (start, stop) in zip(centers, ranges, strict=True):
            mean = yield Call(server, Deposit(replica[start:stop].clone()))
            policy.apply(writer[start:stop], mean.values)


@dataclass(frozen=True)
class ToyMeanConfig(MeanStrategy):
    """``toy-mean``: its one strategy."""

    timing: Timing = field(default_factory=Timing)
    name: ClassVar[str] = "toy-mean"
    label: ClassVar[str] = "toy-mean"

    def __post_init__(self) -> None:
        self._check_timing()


class MeanFamily(Family):
    base = MeanStrategy
    strategies = (ToyMeanConfig,)
    roles = {MEAN_SERVER: RoleTraits()}

    def trainer(self, spec: TrainerSpec, context: BuildContext) -> Node:
        assert isinstance(spec.strategy, MeanStrategy), spec.strategy
        return ReplicaTrainer(spec.setup, spec.strategy)

    def dense_servers(self, spec: JobSpec, plan: JobPlan, initial: torch.Tensor) -> list[NodeSpec]:
        assert plan.dense is not None
        calls = spec.cluster.hogwild_threads + SERVER_MARGIN
        return [
            MeanServerSpec(
                Address(MEAN_SERVER, i),
                threads=None,
                max_calls=calls,
                serialized=True,  # a deposit at a time
                values=initial[a:b].clone(),
            )
            for i, (a, b) in enumerate(plan.dense.ranges)
        ]

    def process_refusal(self, strategy: Any) -> str | None:
        return "the toy family keeps its workers in their trainer's process"

    def first_dense_server(self, spec: JobSpec) -> str | None:
        return f"{MEAN_SERVER.value}-0"

    def final_dense(self, spec: JobSpec, reports: Reports) -> torch.Tensor:
        """The mean servers' running mean, put together."""
        return torch.cat([mean.values for mean in reports(MEAN_SERVER)])

    def measures(self, spec: JobSpec, reports: Reports, train_seconds: float) -> dict[str, Any]:
        replicas = trainer_replicas(reports)
        spread = torch.stack(replicas).std(0).mean() if len(replicas) > 1 else torch.zeros(())
        return {
            "deposits": sum(mean.deposits for mean in reports(MEAN_SERVER)),
            "replica_spread": float(spread),
        }


FAMILY = MeanFamily()
