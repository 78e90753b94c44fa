"""A job assembled once, for both drivers: which nodes it runs, how each is built, and who
talks to whom.

`build_topology(spec, plan)` gives the node specs in start order (the reader, the embedding
shards, the servers of the dense part, the trainers) and its collectives. The
family of the job's strategy decides the servers and the trainer class: `FAMILIES` is the one
registry a new family (or node kind) is added to; no driver changes with it.
"""

from __future__ import annotations

import dataclasses
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
    ReaderSpec,
    ShardSpec,
    SyncServerSpec,
)
from recsync.coordinator.spec import ClusterSpec, JobSpec, initial_dense
from recsync.errors import ConfigError
from recsync.protocol.address import READER, Address, Role
from recsync.protocol.node import Node
from recsync.ps.group_plan import group_plan_of
from recsync.ps.layout import EmbeddingLayout
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


@dataclass(frozen=True)
class Topology:
    """A job's nodes in start order, its plan, and its collectives: each the nodes that
    all-reduce together, in rank order (none when the strategy uses no all-reduce; a node
    is in one at most)."""

    spec: JobSpec
    plan: JobPlan
    nodes: tuple[NodeSpec, ...]
    collectives: Collectives

    def __post_init__(self) -> None:
        members = [a for group in self.collectives for a in group]
        assert len(members) == len(set(members)), "a node in two collectives"

    def of_role(self, role: Role) -> list[NodeSpec]:
        return [n for n in self.nodes if n.address.role is role]

    def num_processes(self) -> int:
        """Processes the engine runs the job in: one a node, and one more a worker of a
        trainer whose workers run in processes of their own."""
        return sum(
            1 + (len(n.workers) if isinstance(n, TrainerSpec) and n.worker_processes else 0)
            for n in self.nodes
        )

    @property
    def layout(self) -> EmbeddingLayout:
        return self.plan.embeddings.layout


def family_of(strategy: StrategyFamily) -> Family:
    """The registered family of a strategy (its most specific registered base type)."""
    for kind in type(strategy).__mro__:
        family = FAMILIES.get(kind)
        if family is not None:
            return family
    raise ValueError(f"{type(strategy).__name__} is of no registered strategy family")


def split_workers(cluster: ClusterSpec, strategy: StrategyFamily, cpus: int | None = None) -> bool:
    """Whether each trainer's workers run in processes of their own: as
    `cluster.worker_processes` says, or (unset) wherever the strategy allows it and the
    `cpus` the job runs on (None: enough) give every worker one. A trainer of one worker
    has nothing to split. On too few cores, a process per worker costs more (context
    switches, each process's runtime threads) than an interpreter lock shared by threads
    that could not run at once anyway (measured: 4 x 2 on 2 cores, async 21% and S-EASGD
    7% slower as processes; 1 x 2, S-EASGD 14% faster)."""
    if cluster.workers_per_trainer == 1 or cluster.worker_processes is False:
        return False
    refusal = family_of(strategy).process_refusal(strategy)
    if refusal is not None and cluster.worker_processes:
        raise ValueError(
            f"cluster.worker_processes: not with {strategy.describe()}: {refusal} (use "
            "threads: worker_processes = false, or shadow timing, or every_iterations)"
        )
    if cluster.worker_processes is None and cpus is not None:
        return refusal is None and cluster.hogwild_threads <= cpus
    return refusal is None


def build_topology(spec: JobSpec, plan: JobPlan, cpus: int | None = None) -> Topology:
    """The node specs of a job (validated against a checkpoint it resumes from); `cpus`:
    the cores it runs on, if known (they decide `split_workers` when the config does
    not)."""
    family, cluster, train = family_of(spec.strategy), spec.cluster, spec.train
    layout = plan.embeddings.layout
    resume = spec.resume
    if resume is not None:
        resume.check_layout(layout)
    workers = cluster.hogwild_threads
    reader = ReaderSpec(
        READER,
        threads=1,
        max_calls=workers + SERVER_MARGIN,  # workers parked for a cut wait in it
        serialized=True,
        synthetic=spec.synthetic,
        files=spec.files,
        train=train,
        start_example=spec.start_example,
        num_trainers=cluster.num_trainers,
        tokens=family.tokens(spec.strategy, workers),
        limit=spec.stop_after_examples,
        num_workers=workers,
        batches_per_step=spec.strategy.batches_per_step(workers),
    )
    policy = spec.strategy if family.policy_shards else None
    assert policy is None or isinstance(policy, GradientStrategy | AllReduceStrategy)
    calls = (2 if family.policy_shards else 1) * workers + SERVER_MARGIN
    shards = [
        ShardSpec(
            Address(Role.EMBEDDING_SERVER, i),
            threads=None,
            max_calls=calls,
            serialized=family.policy_shards,
            layout=layout,
            optimizer=train.sparse_optimizer,
            seed=train.seed,
            state=None if resume is None else resume.shards[i],
            strategy=policy,
            num_workers=workers,
        )
        for i in range(layout.num_shards)
    ]
    dense = family.dense_servers(spec, plan, initial_dense(spec))
    wiring = Wiring(
        READER,
        tuple(s.address for s in shards),
        tuple(s.address for s in dense),
        tuple(plan.dense.ranges) if plan.dense is not None else (),
    )
    initial = None if resume is None else (resume.dense, resume.dense_optimizer)
    m = cluster.workers_per_trainer
    trainers = [
        TrainerSpec(
            Address(Role.TRAINER, t),
            threads=m,
            max_calls=m + SERVER_MARGIN,
            serialized=False,
            setup=TrainerSetup(
                t,
                cluster.num_trainers,
                m,
                spec.model,
                train,
                layout,
                family.trainer_wiring(spec, t, wiring),
                initial,
            ),
            strategy=spec.strategy,
            slowdown=cluster.slowdown(t),
            slowdown_window=cluster.slowdown_window,
            processes=split_workers(cluster, spec.strategy, cpus),
        )
        for t in range(cluster.num_trainers)
    ]
    collectives = family.collectives(spec, dense, trainers)
    servers = [_slowed(cluster, node) for node in (reader, *shards, *dense)]
    unknown = sorted(set(dict(cluster.server_slowdown)) - {s.address.name for s in servers})
    if unknown:
        raise ConfigError(
            f"cluster.server_slowdown: no server named {unknown} in this job; its servers: "
            f"{[s.address.name for s in servers]}"
        )
    return Topology(spec, plan, (*servers, *trainers), collectives)


def _slowed(cluster: ClusterSpec, node: NodeSpec) -> NodeSpec:
    factor = cluster.server_factor(node.address.name)
    if factor == 1.0:
        return node
    return dataclasses.replace(node, slowdown=factor, slowdown_window=cluster.slowdown_window)


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
