"""The replica family (ShadowSync, Zheng et al. 2020): the dense part replicated on the
trainers, synced never (`independent`), through a center variable on sync servers
(`CenterStrategy`: EASGD) or through an all-reduce among the trainers
(`CollectiveStrategy`: MA, BMUF); embedding shards Hogwild."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from recsync.coordinator.measures import trainer_replicas
from recsync.coordinator.node_specs import (
    SERVER_MARGIN,
    BuildContext,
    Collectives,
    NodeSpec,
    TrainerSpec,
)
from recsync.coordinator.spec import ClusterSpec, JobSpec
from recsync.families.replica.bmuf import BmufConfig
from recsync.families.replica.easgd import EasgdCenter, EasgdConfig
from recsync.families.replica.independent import IndependentConfig
from recsync.families.replica.ma import MaConfig
from recsync.families.replica.replica_sync import process_refusal
from recsync.families.replica.trainer import ReplicaTrainer
from recsync.families.synced_replicas.strategy import (
    CenterStrategy,
    CollectiveStrategy,
    ReplicaStrategy,
)
from recsync.families.synced_replicas.sync_server import (
    SYNC_SERVER,
    SYNC_SERVER_TRAITS,
    SyncServerSpec,
)
from recsync.protocol.address import Address, Role
from recsync.protocol.node import Node
from recsync.ps.placement import JobPlan
from recsync.strategy.config import StrategyConfig
from recsync.strategy.family import Family, Reports
from recsync.strategy.timing import average_sync_gap
from recsync.trainer.stats import TrainerStats


class ReplicaFamily(Family):
    """``independent``, ``easgd``, ``ma``, ``bmuf``, each in ``shadow`` or ``fixed`` timing."""

    base = ReplicaStrategy
    strategies = (IndependentConfig, EasgdConfig, MaConfig, BmufConfig)
    roles = {SYNC_SERVER: SYNC_SERVER_TRAITS}
    dense_role = SYNC_SERVER

    def trainer(self, spec: TrainerSpec, context: BuildContext) -> Node:
        return ReplicaTrainer(spec.setup, _replica(spec.strategy))

    def dense_servers(self, spec: JobSpec, plan: JobPlan, initial: torch.Tensor) -> list[NodeSpec]:
        """A center strategy's sync servers: each one slice of the center variable."""
        strategy = spec.strategy
        if not isinstance(strategy, CenterStrategy) or plan.dense is None:
            return []
        calls = spec.cluster.hogwild_threads + SERVER_MARGIN
        return [
            SyncServerSpec(
                Address(SYNC_SERVER, i),
                threads=None,
                max_calls=calls,
                serialized=False,
                values=initial[a:b].clone(),
                strategy=strategy,
            )
            for i, (a, b) in enumerate(plan.dense.ranges)
        ]

    def collectives(
        self, spec: JobSpec, servers: Sequence[NodeSpec], trainers: Sequence[NodeSpec]
    ) -> Collectives:
        """A collective strategy's trainers all-reduce together."""
        if not isinstance(spec.strategy, CollectiveStrategy):
            return ()
        return (tuple(t.address for t in trainers),)

    def process_refusal(self, strategy: StrategyConfig) -> str | None:
        return process_refusal(_replica(strategy))

    def restart_roles(self, strategy: StrategyConfig) -> tuple[Role, ...]:
        return (SYNC_SERVER,) if isinstance(strategy, CenterStrategy) else ()

    def restarted_dense(self, spec: JobSpec, reports: Reports) -> torch.Tensor | None:
        """The center variable (EASGD): its slices on the sync servers put together."""
        if not isinstance(spec.strategy, CenterStrategy):
            return None
        return torch.cat([part.values for part in reports(SYNC_SERVER)])

    def dense_server_work(
        self, values: torch.Tensor, optimizer: Any
    ) -> Callable[[], object] | None:
        """A sync server's elastic exchange with a replica."""
        center = EasgdCenter(EasgdConfig(), values.clone())
        return lambda: center.exchange(values)

    def check_cluster(self, strategy: StrategyConfig, cluster: ClusterSpec) -> None:
        if isinstance(strategy, CenterStrategy) and cluster.num_dense_servers < 1:
            raise ValueError(
                f"cluster.num_dense_servers: {strategy.describe()} needs at least one sync "
                f"server, got {cluster.num_dense_servers}"
            )

    def final_dense(self, spec: JobSpec, reports: Reports) -> torch.Tensor:
        """The strategy's combination of the trainers' replicas."""
        return _replica(spec.strategy).combine_replicas(trainer_replicas(reports))

    def measures(self, spec: JobSpec, reports: Reports, train_seconds: float) -> dict[str, Any]:
        stats = [t.stats for t in reports(Role.TRAINER)]
        return sync_measures(stats, _replica(spec.strategy).timing.is_shadow)

    def partial_shards(self, strategy: StrategyConfig) -> bool:
        return True

    def restarts_trainer(self, strategy: StrategyConfig) -> bool:
        """Not with an all-reduce: it waits for every rank."""
        return not isinstance(strategy, CollectiveStrategy)


def _replica(strategy: StrategyConfig) -> ReplicaStrategy:
    assert isinstance(strategy, ReplicaStrategy), strategy
    return strategy


def sync_measures(stats: list[TrainerStats], shadow: bool) -> dict[str, float | None]:
    """ShadowSync's average sync gap, eq. 2: the job's iterations per second (EPS / batch
    size) over its syncs per second (sync-server traffic / model size), i.e. all worker
    threads' iterations over all syncs; FR-k has gap k, a shadow sync serving m threads
    counts once. Also per worker thread (a shadow sync's gap over its trainer's m threads;
    a fixed-rate sync is one thread's own), per trainer then averaged."""
    iterations = sum(s.total_iterations for s in stats)
    syncs = sum(s.syncs for s in stats)
    per_thread = []
    for s in stats:
        gap = average_sync_gap(s.total_iterations, s.syncs)
        per_thread.append(gap / len(s.iterations) if gap is not None and shadow else gap)
    known = [g for g in per_thread if g is not None]
    return {
        "syncs": syncs,
        "average_sync_gap": average_sync_gap(iterations, syncs),
        "average_sync_gap_per_thread": sum(known) / len(known) if known else None,
    }
