"""The gradient family (design.md section 3): the dense part on dense servers, every server
(dense block, embedding shard) run by the strategy's policy, workers pulling parameters and
pushing gradients; GBA's tokens handed by the reader."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from recsync.coordinator.measures import policy_measures
from recsync.coordinator.node_specs import SERVER_MARGIN, BuildContext, NodeSpec, TrainerSpec
from recsync.coordinator.spec import ClusterSpec, JobSpec
from recsync.families.gradient.asynchronous import AsyncConfig
from recsync.families.gradient.backup_workers import BackupWorkersConfig
from recsync.families.gradient.bounded_staleness import BoundedStalenessConfig
from recsync.families.gradient.bsp import BspConfig
from recsync.families.gradient.dense_server import (
    DENSE_SERVER,
    DENSE_SERVER_TRAITS,
    DenseBlockReport,
    DenseServerSpec,
)
from recsync.families.gradient.gba import GbaConfig
from recsync.families.gradient.psp import PspConfig
from recsync.families.gradient.strategy import GradientStrategy
from recsync.families.gradient.synchronous import SyncConfig
from recsync.families.gradient.trainer import GradientTrainer
from recsync.protocol.address import Address
from recsync.protocol.node import Node
from recsync.ps.placement import JobPlan
from recsync.strategy.config import StrategyConfig
from recsync.strategy.family import Family, Reports
from recsync.strategy.gradient import ServerPolicies, Tokens


class GradientFamily(Family):
    """``async``, ``sync``, ``bsp``, ``bounded_staleness``, ``backup_workers``, ``gba``,
    ``psp``: a policy on every server of the job."""

    base = GradientStrategy
    strategies = (
        AsyncConfig,
        SyncConfig,
        BspConfig,
        BoundedStalenessConfig,
        BackupWorkersConfig,
        GbaConfig,
        PspConfig,
    )
    roles = {DENSE_SERVER: DENSE_SERVER_TRAITS}
    dense_role = DENSE_SERVER

    def trainer(self, spec: TrainerSpec, context: BuildContext) -> Node:
        strategy, setup = _gradient(spec.strategy), spec.setup
        return GradientTrainer(setup, strategy, context.workspace(setup.model, setup.train))

    def dense_servers(self, spec: JobSpec, plan: JobPlan, initial: torch.Tensor) -> list[NodeSpec]:
        strategy, resume, workers = (
            _gradient(spec.strategy),
            spec.resume,
            spec.cluster.hogwild_threads,
        )
        if plan.dense is None:
            return []
        return [
            DenseServerSpec(
                Address(DENSE_SERVER, i),
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

    def shard_policy(self, strategy: StrategyConfig) -> ServerPolicies | None:
        return _gradient(strategy)

    def tokens(self, strategy: StrategyConfig, workers: int) -> Tokens | None:
        return _gradient(strategy).token_list(workers)

    def dense_server_work(
        self, values: torch.Tensor, optimizer: Any
    ) -> Callable[[], object] | None:
        """A dense server's optimizer step on a pushed gradient."""
        grad = torch.full_like(values, 1e-3)
        return lambda: optimizer.updated(values, grad)

    def values_needed_by(self, strategy: StrategyConfig) -> str | None:
        norm = _gradient(strategy).staleness_norm
        if norm is not None and norm.sigmoid_lambda is not None:
            return "strategy.staleness_norm.sigmoid_lambda (scales by the update's size)"
        return None

    def check_cluster(self, strategy: StrategyConfig, cluster: ClusterSpec) -> None:
        if cluster.num_dense_servers < 1:
            raise ValueError(
                f"cluster.num_dense_servers: {strategy.describe()} needs at least one dense "
                f"server, got {cluster.num_dense_servers}"
            )

    def final_dense(self, spec: JobSpec, reports: Reports) -> torch.Tensor:
        """The dense servers' blocks put together."""
        blocks: list[DenseBlockReport] = reports(DENSE_SERVER)
        return torch.cat([b.values for b in blocks])

    def final_optimizer(self, spec: JobSpec, reports: Reports) -> tuple[dict[str, Any], int]:
        """The blocks' optimizer states put together; the steps: block 0's updates."""
        blocks: list[DenseBlockReport] = reports(DENSE_SERVER)
        return join_optimizer_states([b.optimizer for b in blocks]), blocks[0].stats.steps

    def measures(self, spec: JobSpec, reports: Reports, train_seconds: float) -> dict[str, Any]:
        dense = [b.stats for b in reports(DENSE_SERVER)]
        return policy_measures(spec, reports, train_seconds, dense)


def _gradient(strategy: StrategyConfig) -> GradientStrategy:
    assert isinstance(strategy, GradientStrategy), strategy
    return strategy


def join_optimizer_states(states: list[dict[str, Any]]) -> dict[str, Any]:
    """One dense optimizer state from the blocks' states, in block order; the step count is
    the first block's (every block takes the same steps)."""
    joined: dict[str, Any] = {"steps": int(states[0]["steps"])}
    for key, value in states[0].items():
        if isinstance(value, torch.Tensor):
            joined[key] = torch.cat([s[key] for s in states])
    return joined
