"""Hierarchical training's group PS (a small picklable spec; a driver builds the node where
it runs)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from recsync.coordinator.node_specs import BuildContext, NodeSpec
from recsync.families.hierarchical.config import HierarchicalConfig
from recsync.families.hierarchical.plan import GroupPlan
from recsync.families.hierarchical.server import GroupServerNode, GroupServerStart
from recsync.model.spec import ModelSpec
from recsync.optim.train_spec import TrainSpec
from recsync.protocol.address import Address


@dataclass(frozen=True)
class GroupServerSpec(NodeSpec):
    """Group PS `server` of group `group` (hierarchical training): the FC parts `plan`
    gives it, and its sync loop against `sync_server` (None: an all-reduce with the group
    PSs of the other groups that own the same parts); `start`: where a resumed one starts
    (None: the plan's initial parts)."""

    group: int
    server: int
    model: ModelSpec
    train: TrainSpec
    plan: GroupPlan
    strategy: HierarchicalConfig
    sync_server: Address | None
    num_workers: int
    start: GroupServerStart | None = None
    has_loops: ClassVar[bool] = True

    def build(self, context: BuildContext) -> GroupServerNode:
        return GroupServerNode(
            self.group,
            self.server,
            self.plan.dense(self.model, self.train.seed),
            self.train.dense_optimizer,
            self.strategy,
            self.sync_server,
            self.num_workers,
            self.start,
        )
