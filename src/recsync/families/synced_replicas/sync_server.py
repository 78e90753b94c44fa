"""A sync server of a center strategy (EASGD): one slice of the center variable, and its
node spec."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from recsync.coordinator.node_specs import BuildContext, NodeSpec
from recsync.families.synced_replicas.messages import Center, Exchange
from recsync.families.synced_replicas.strategy import Center as CenterPolicy
from recsync.families.synced_replicas.strategy import CenterStrategy
from recsync.protocol.address import Role
from recsync.protocol.messages import Message
from recsync.protocol.node import Node
from recsync.strategy.roles import RoleTraits

SYNC_SERVER = Role.declare("sync-server")
# a sync server holds no part of the model a cut takes (a replica's trainer does); the
# run's summary counts them
SYNC_SERVER_TRAITS = RoleTraits(counted=True)


class SyncServerNode(Node):
    """Holds one slice of the EASGD center variable and answers exchanges (ShadowSync
    Alg. 2 line 4, in `EasgdCenter`)."""

    handles: ClassVar[dict[type[Message], str]] = {Exchange: "exchange"}

    def __init__(self, index: int, center: CenterPolicy):
        self.index = index
        self.name = f"sync-server-{index}"
        self.center = center

    def exchange(self, message: Exchange) -> Center:
        return Center(self.center.exchange(message.values))

    def report(self) -> Center:
        """A copy of its slice of the center (where a restarted trainer's replica starts)."""
        return Center(self.center.center.clone())


@dataclass(frozen=True)
class SyncServerSpec(NodeSpec):
    """One slice of a center strategy's center variable."""

    values: torch.Tensor
    strategy: CenterStrategy

    def build(self, context: BuildContext) -> SyncServerNode:
        return SyncServerNode(self.address.index, self.strategy.make_center(self.values.clone()))
