"""A sync server of the EASGD replica strategy: one slice of the center variable."""

from __future__ import annotations

from typing import ClassVar

from recsync.protocol.messages import Center, Exchange, Message
from recsync.protocol.node import Node
from recsync.sync.replica import Center as CenterPolicy


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
