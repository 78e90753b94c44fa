"""How a hierarchical-training job is assembled (Huang et al. 2021): its group plan, its group
PSs and global sync servers, and which group PSs each trainer talks to."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import torch

from recsync.coordinator.node_specs import SERVER_MARGIN, Collectives, NodeSpec
from recsync.coordinator.spec import JobSpec
from recsync.families.hierarchical.config import HierarchicalConfig
from recsync.families.hierarchical.nodes import GroupServerSpec
from recsync.families.hierarchical.plan import GroupPlan, group_plan_of
from recsync.families.hierarchical.resume import server_starts
from recsync.families.hierarchical.server import GROUP_SERVER, GroupServerStart
from recsync.families.synced_replicas.strategy import CenterStrategy
from recsync.families.synced_replicas.sync_server import SYNC_SERVER, SyncServerSpec
from recsync.protocol.address import Address
from recsync.ps.placement import JobPlan
from recsync.trainer.stats import Wiring


def hierarchical(spec: JobSpec) -> HierarchicalConfig:
    """The job's strategy (of this family)."""
    assert isinstance(spec.strategy, HierarchicalConfig), spec.strategy
    return spec.strategy


def group_plan_for(spec: JobSpec) -> GroupPlan:
    """The group plan of a hierarchical-training job (the same for every group)."""
    cluster = spec.cluster
    return group_plan_of(
        spec.model,
        hierarchical(spec),
        cluster.num_trainers,
        cluster.num_dense_servers,
        cluster.workers_per_trainer,
        spec.train.batch_size,
    )


def hierarchical_servers(spec: JobSpec, plan: JobPlan, initial: torch.Tensor) -> list[NodeSpec]:
    """Every group's group PSs, then the global sync servers of a cross-group EASGD (sync
    server j: the center of what group PS j of every group owns); a resumed job's from its
    checkpoint (resume.py)."""
    strategy, cluster = hierarchical(spec), spec.cluster
    group_workers = strategy.trainers_per_group(cluster.num_trainers) * cluster.workers_per_trainer
    plan_ = group_plan_for(spec)
    dense = plan_.dense(spec.model, spec.train.seed)
    p, centered = cluster.num_dense_servers, strategy.needs_sync_servers
    centers = [dense.flat_of(j) for j in range(p)]
    starts: list[GroupServerStart | None] = [None] * (strategy.groups * p)
    if spec.resume is not None:
        resumed, centers = server_starts(strategy, plan_, dense, spec)
        starts = list(resumed)
    nodes: list[NodeSpec] = [
        GroupServerSpec(
            Address(GROUP_SERVER, g * p + j),
            threads=None,
            max_calls=group_workers + SERVER_MARGIN + 1,  # + its sync loop
            serialized=False,
            group=g,
            server=j,
            model=spec.model,
            train=spec.train,
            plan=plan_,
            strategy=strategy,
            sync_server=Address(SYNC_SERVER, j) if centered else None,
            num_workers=group_workers,
            start=starts[g * p + j],
        )
        for g in range(strategy.groups)
        for j in range(p)
    ]
    if not centered:
        return nodes
    cross = strategy.cross_sync
    assert isinstance(cross, CenterStrategy)
    nodes += [
        SyncServerSpec(
            Address(SYNC_SERVER, j),
            threads=None,
            max_calls=strategy.groups + SERVER_MARGIN,
            serialized=False,
            values=centers[j],
            strategy=cross,
        )
        for j in range(p)
    ]
    return nodes


def group_collectives(
    spec: JobSpec, servers: Sequence[NodeSpec], trainers: Sequence[NodeSpec]
) -> Collectives:
    """With MA or BMUF across groups: group PS j of every group (in group order) all-reduce
    together, one collective for each j."""
    strategy = hierarchical(spec)
    if strategy.needs_sync_servers:
        return ()
    group_servers = [s for s in servers if isinstance(s, GroupServerSpec)]
    return tuple(
        tuple(s.address for s in sorted(group_servers, key=lambda s: s.group) if s.server == j)
        for j in range(spec.cluster.num_dense_servers)
    )


def group_wiring(spec: JobSpec, trainer: int, wiring: Wiring) -> Wiring:
    """A trainer talks to the group PSs of its group."""
    strategy = hierarchical(spec)
    group = trainer // strategy.trainers_per_group(spec.cluster.num_trainers)
    p = spec.cluster.num_dense_servers
    servers = tuple(Address(GROUP_SERVER, group * p + j) for j in range(p))
    return dataclasses.replace(wiring, dense=servers, dense_ranges=())
