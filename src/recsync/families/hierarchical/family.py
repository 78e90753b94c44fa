"""The hierarchical-training family (Huang et al., KDD 2021): groups of trainers, each group's
dense replica on its group PSs, synced across groups by the group PSs in the background."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from recsync.coordinator.node_specs import BuildContext, Collectives, NodeSpec, TrainerSpec
from recsync.coordinator.spec import ClusterSpec, JobSpec
from recsync.families.hierarchical.config import HierarchicalConfig
from recsync.families.hierarchical.plan import group_plan_of
from recsync.families.hierarchical.resume import group_state
from recsync.families.hierarchical.server import GROUP_SERVER, GroupServerReport
from recsync.families.hierarchical.topology import (
    group_collectives,
    group_plan_for,
    group_wiring,
    hierarchical,
    hierarchical_servers,
)
from recsync.families.hierarchical.trainer import HierarchicalTrainer
from recsync.families.synced_replicas.sync_server import SYNC_SERVER, SYNC_SERVER_TRAITS
from recsync.protocol.address import Role
from recsync.protocol.node import Node
from recsync.ps.placement import JobPlan
from recsync.strategy.config import StrategyConfig
from recsync.strategy.family import Family, Reports
from recsync.strategy.roles import RoleTraits
from recsync.trainer.stats import TrainerReport, Wiring


class HierarchicalFamily(Family):
    """``hierarchical``: its group PSs are the servers of the dense part."""

    base = HierarchicalConfig
    strategies = (HierarchicalConfig,)
    roles = {GROUP_SERVER: RoleTraits(holds_model=True), SYNC_SERVER: SYNC_SERVER_TRAITS}

    def trainer(self, spec: TrainerSpec, context: BuildContext) -> Node:
        strategy, setup = spec.strategy, spec.setup
        assert isinstance(strategy, HierarchicalConfig), strategy
        trainers, servers = setup.num_trainers, len(setup.wiring.dense)  # its group's PSs
        plan = group_plan_of(
            setup.model, strategy, trainers, servers, setup.num_workers, setup.train.batch_size
        )
        return HierarchicalTrainer(setup, strategy, plan.dense(setup.model, setup.train.seed))

    def dense_servers(self, spec: JobSpec, plan: JobPlan, initial: torch.Tensor) -> list[NodeSpec]:
        return hierarchical_servers(spec, plan, initial)

    def trainer_wiring(self, spec: JobSpec, trainer: int, wiring: Wiring) -> Wiring:
        return group_wiring(spec, trainer, wiring)

    def collectives(
        self, spec: JobSpec, servers: Sequence[NodeSpec], trainers: Sequence[NodeSpec]
    ) -> Collectives:
        return group_collectives(spec, servers, trainers)

    def process_refusal(self, strategy: StrategyConfig) -> str | None:
        return "its worker threads share one trainer's stats with their group PSs' calls"

    def check_job(self, spec: JobSpec) -> None:
        """Its group plan (a group PS left without an FC part: a ValueError naming it)."""
        strategy, cluster = hierarchical(spec), spec.cluster
        group_plan_of(
            spec.model,
            strategy,
            cluster.num_trainers,
            cluster.num_dense_servers,
            cluster.workers_per_trainer,
            spec.train.batch_size,
        )

    def dense_nodes(self, spec: JobSpec) -> int:
        """Its group PSs (`cluster.num_dense_servers` a group), and as many sync servers
        across the groups if it has them."""
        strategy, p = hierarchical(spec), spec.cluster.num_dense_servers
        return strategy.groups * p + (p if strategy.needs_sync_servers else 0)

    def first_dense_server(self, spec: JobSpec) -> str | None:
        return f"{GROUP_SERVER.value}-0"

    def check_cluster(self, strategy: StrategyConfig, cluster: ClusterSpec) -> None:
        assert isinstance(strategy, HierarchicalConfig), strategy
        if cluster.num_dense_servers < 1:
            raise ValueError(
                f"cluster.num_dense_servers: {strategy.describe()} needs at least one group PS "
                f"a group, got {cluster.num_dense_servers}"
            )
        try:
            strategy.trainers_per_group(cluster.num_trainers)
        except ValueError as error:
            raise ValueError(f"cluster.num_trainers: {error}") from None

    def final_dense(self, spec: JobSpec, reports: Reports) -> torch.Tensor:
        """The average of the groups' models (each put together from its group PSs' parts)."""
        strategy, servers = hierarchical(spec), _group_servers(reports)
        plan, p = group_plan_for(spec), spec.cluster.num_dense_servers
        groups = [
            plan.unsplit(
                spec.model, spec.train.seed, [s.values for s in servers[g * p : (g + 1) * p]]
            )
            for g in range(strategy.groups)
        ]
        return torch.stack(groups).mean(0)

    def final_optimizer(self, spec: JobSpec, reports: Reports) -> tuple[dict[str, Any], int]:
        """Group 0's optimizer state in the unsplit model's layout (each per-parameter
        tensor put together as the parameters are); its step count: group PS 0's. The
        steps: every trainer's iterations."""
        servers = _group_servers(reports)
        plan, first = group_plan_for(spec), servers[: spec.cluster.num_dense_servers]
        state: dict[str, Any] = {"steps": int(first[0].optimizer["steps"])}
        for key, value in first[0].optimizer.items():
            if isinstance(value, torch.Tensor):
                parts = [s.optimizer[key] for s in first]
                state[key] = plan.unsplit(spec.model, spec.train.seed, parts)
        trainers: list[TrainerReport] = reports(Role.TRAINER)
        return state, sum(t.stats.total_iterations for t in trainers)

    def state(self, spec: JobSpec, reports: Reports) -> dict[str, Any] | None:
        """Every group PS's parameters, optimizer and sync state, and the EASGD center:
        what a job resumed with the same groups goes on from (resume.py)."""
        centers = [c.values for c in reports(SYNC_SERVER)]
        p = spec.cluster.num_dense_servers
        return group_state(hierarchical(spec), p, _group_servers(reports), centers)

    def state_roles(self, strategy: StrategyConfig) -> tuple[Role, ...]:
        return (SYNC_SERVER,)

    def measures(self, spec: JobSpec, reports: Reports, train_seconds: float) -> dict[str, Any]:
        servers = _group_servers(reports)
        return {
            "num_groups": hierarchical(spec).groups,
            "num_group_servers": len(servers),
            "cross_group_syncs": sum(s.syncs for s in servers),
            "group_server_backward_steps": [s.backward_steps for s in servers],
        }

    def plan_view(self, spec: JobSpec) -> list[Any]:
        """Each operator on the trainers or a group PS, with the estimated utilisation
        before and after refinement."""
        from recsync.families.hierarchical.plan_view import group_table  # rich: the CLI's

        return [group_table(group_plan_for(spec))]


def _group_servers(reports: Reports) -> list[GroupServerReport]:
    servers: list[GroupServerReport] = reports(GROUP_SERVER)
    return servers
