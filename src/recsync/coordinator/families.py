"""The strategy families: how each family's job is assembled (its servers of the dense part,
whether its embedding shards run the strategy's policy, the reader's tokens, its
collectives, its trainer, why its workers cannot be processes), and the spec of a trainer
of any family, built by its family. `FAMILIES` is the one
registry a new family (or node kind) is added to; `build_topology` reads it, no driver
changes with it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import ClassVar

import torch

from recsync.coordinator.group_topology import (
    group_collectives,
    group_wiring,
    hierarchical_servers,
)
from recsync.coordinator.node_specs import (
    SERVER_MARGIN,
    BuildContext,
    Collectives,
    DenseServerSpec,
    NodeSpec,
    SyncServerSpec,
)
from recsync.coordinator.spec import JobSpec
from recsync.protocol.address import Address, Role
from recsync.protocol.node import Node
from recsync.ps.group_plan import group_plan_of
from recsync.ps.placement import JobPlan
from recsync.sync.allreduce import AllReduceStrategy
from recsync.sync.family import StrategyFamily
from recsync.sync.gradient import GradientStrategy, Tokens
from recsync.sync.hierarchical import HierarchicalConfig
from recsync.sync.replica import CenterStrategy, CollectiveStrategy, ReplicaStrategy
from recsync.trainer.allreduce_trainer import AllReduceTrainer
from recsync.trainer.gradient_trainer import GradientTrainer
from recsync.trainer.hierarchical_trainer import HierarchicalTrainer
from recsync.trainer.replica_sync import process_refusal
from recsync.trainer.replica_trainer import ReplicaTrainer
from recsync.trainer.stats import TrainerSetup, Wiring


@dataclass(frozen=True)
class TrainerSpec(NodeSpec):
    """A trainer of any family (`setup`: what every trainer is built from)."""

    setup: TrainerSetup
    strategy: StrategyFamily
    processes: bool = False
    has_loops: ClassVar[bool] = True

    def build(self, context: BuildContext) -> Node:
        return family_of(self.strategy).trainer(self, context)

    @property
    def worker_processes(self) -> bool:
        return self.processes

    @property
    def workers(self) -> range:
        """The job-wide indices of its workers (the `worker` of its worker loops)."""
        first = self.setup.first_worker
        return range(first, first + self.setup.num_workers)


@dataclass(frozen=True)
class Family:
    """How a strategy family's job is assembled: its servers of the dense part (with the
    wiring trainers get), whether its embedding shards run the strategy's policy, the
    reader's tokens, which nodes all-reduce together (given the servers and the trainers),
    its trainer, and why its trainers' workers cannot run in processes of their own (None:
    they can), and what trainer t talks to (by default what every trainer does)."""

    dense_servers: Callable[[JobSpec, JobPlan, torch.Tensor], list[NodeSpec]]
    policy_shards: bool
    tokens: Callable[[StrategyFamily, int], Tokens | None]
    collectives: Callable[[JobSpec, Sequence[NodeSpec], Sequence[NodeSpec]], Collectives]
    trainer: Callable[[TrainerSpec, BuildContext], Node]
    process_refusal: Callable[[StrategyFamily], str | None]
    trainer_wiring: Callable[[JobSpec, int, Wiring], Wiring] = lambda spec, t, wiring: wiring


def family_of(strategy: StrategyFamily) -> Family:
    """The registered family of a strategy (its most specific registered base type)."""
    for kind in type(strategy).__mro__:
        family = FAMILIES.get(kind)
        if family is not None:
            return family
    raise ValueError(f"{type(strategy).__name__} is of no registered strategy family")


def _sync_servers(spec: JobSpec, plan: JobPlan, initial: torch.Tensor) -> list[NodeSpec]:
    strategy = spec.strategy
    assert isinstance(strategy, CenterStrategy)
    if plan.dense is None:
        return []
    calls = spec.cluster.hogwild_threads + SERVER_MARGIN
    return [
        SyncServerSpec(
            Address(Role.SYNC_SERVER, i),
            threads=None,
            max_calls=calls,
            serialized=False,
            values=initial[a:b].clone(),
            strategy=strategy,
        )
        for i, (a, b) in enumerate(plan.dense.ranges)
    ]


def _dense_servers(spec: JobSpec, plan: JobPlan, initial: torch.Tensor) -> list[NodeSpec]:
    strategy, resume, workers = spec.strategy, spec.resume, spec.cluster.hogwild_threads
    assert isinstance(strategy, GradientStrategy)
    if plan.dense is None:
        return []
    return [
        DenseServerSpec(
            Address(Role.DENSE_SERVER, i),
            threads=None,
            max_calls=2 * workers + SERVER_MARGIN,
            serialized=True,
            values=initial[a:b].clone(),
            optimizer=spec.train.dense_optimizer,
            state=None if resume is None else resume.optimizer_slice(a, b),
            strategy=strategy,
            num_workers=workers,
        )
        for i, (a, b) in enumerate(plan.dense.ranges)
    ]


def _no_servers(spec: JobSpec, plan: JobPlan, initial: torch.Tensor) -> list[NodeSpec]:
    return []


def _no_tokens(strategy: StrategyFamily, workers: int) -> Tokens | None:
    return None


def _no_collective(
    spec: JobSpec, servers: Sequence[NodeSpec], trainers: Sequence[NodeSpec]
) -> Collectives:
    return ()


def _trainers_collective(
    spec: JobSpec, servers: Sequence[NodeSpec], trainers: Sequence[NodeSpec]
) -> Collectives:
    return (tuple(t.address for t in trainers),)


def _gradient_tokens(strategy: StrategyFamily, workers: int) -> Tokens | None:
    assert isinstance(strategy, GradientStrategy)
    return strategy.token_list(workers)


def _replica_refusal(strategy: StrategyFamily) -> str | None:
    assert isinstance(strategy, ReplicaStrategy)
    return process_refusal(strategy)


def _no_refusal(strategy: StrategyFamily) -> str | None:
    return None


def _one_rank(strategy: StrategyFamily) -> str | None:
    return "each trainer is one rank of one worker"


def _replica_trainer(spec: TrainerSpec, context: BuildContext) -> Node:
    assert isinstance(spec.strategy, ReplicaStrategy)
    return ReplicaTrainer(spec.setup, spec.strategy)


def _gradient_trainer(spec: TrainerSpec, context: BuildContext) -> Node:
    assert isinstance(spec.strategy, GradientStrategy)
    setup = spec.setup
    return GradientTrainer(setup, spec.strategy, context.workspace(setup.model, setup.train))


def _hierarchical_trainer(spec: TrainerSpec, context: BuildContext) -> Node:
    strategy, setup = spec.strategy, spec.setup
    assert isinstance(strategy, HierarchicalConfig)
    trainers = setup.num_trainers
    plan = group_plan_of(setup.model, strategy, trainers, setup.num_workers, setup.train.batch_size)
    return HierarchicalTrainer(setup, strategy, plan.dense(setup.model, setup.train.seed))


def _threads_only(strategy: StrategyFamily) -> str | None:
    return "its worker threads share one trainer's stats with their group PSs' calls"


def _allreduce_trainer(spec: TrainerSpec, context: BuildContext) -> Node:
    assert isinstance(spec.strategy, AllReduceStrategy)
    return AllReduceTrainer(spec.setup, spec.strategy)


FAMILIES: dict[type[StrategyFamily], Family] = {
    CenterStrategy: Family(
        _sync_servers,
        policy_shards=False,
        tokens=_no_tokens,
        collectives=_no_collective,
        trainer=_replica_trainer,
        process_refusal=_replica_refusal,
    ),
    CollectiveStrategy: Family(
        _no_servers,
        policy_shards=False,
        tokens=_no_tokens,
        collectives=_trainers_collective,
        trainer=_replica_trainer,
        process_refusal=_replica_refusal,
    ),
    ReplicaStrategy: Family(
        _no_servers,
        policy_shards=False,
        tokens=_no_tokens,
        collectives=_no_collective,
        trainer=_replica_trainer,
        process_refusal=_replica_refusal,
    ),
    GradientStrategy: Family(
        _dense_servers,
        policy_shards=True,
        tokens=_gradient_tokens,
        collectives=_no_collective,
        trainer=_gradient_trainer,
        process_refusal=_no_refusal,
    ),
    HierarchicalConfig: Family(
        hierarchical_servers,
        policy_shards=False,
        tokens=_no_tokens,
        collectives=group_collectives,
        trainer=_hierarchical_trainer,
        process_refusal=_threads_only,
        trainer_wiring=group_wiring,
    ),
    AllReduceStrategy: Family(
        _no_servers,
        policy_shards=True,
        tokens=_no_tokens,
        collectives=_trainers_collective,
        trainer=_allreduce_trainer,
        process_refusal=_one_rank,
    ),
}
