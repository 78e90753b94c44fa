"""The embedding server of the replica family: one shard, pooled lookups and lock-free
(Hogwild) row updates applied on arrival."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from recsync.optim.checks import all_finite
from recsync.optim.state import copy_state
from recsync.protocol.messages import Lookup, Message, Pooled, PushRows
from recsync.protocol.node import Node
from recsync.ps.shard import RowShard


@dataclass
class ShardReport:
    """An embedding server at the end: a copy of its shard's state, and (a gradient
    strategy's shard) its policy's stats."""

    state: dict[str, Any]
    stats: Any = None


def rows_in_range(rows: torch.Tensor, num_rows: int) -> bool:
    if not rows.numel():
        return True
    low, high = torch.aminmax(rows)
    return int(low) >= 0 and int(high) < num_rows


def checked_lookup(shard: RowShard, message: Lookup, name: str) -> torch.Tensor:
    """The shard's pooled lookup; an id out of the shard's rows is named as a user error."""
    try:
        return shard.lookup(message.rows, message.offsets, message.weights)
    except (RuntimeError, IndexError):
        if rows_in_range(message.rows, shard.num_rows):
            raise
        raise ValueError(f"{name}: row out of range [0, {shard.num_rows})") from None


class EmbeddingServerNode(Node):
    """Hosts one shard: pooled lookups (partial pooling) and lock-free row updates."""

    handles: ClassVar[dict[type[Message], str]] = {
        Lookup: "lookup",
        PushRows: "apply",
    }

    def __init__(self, index: int, shard: RowShard):
        self.index = index
        self.name = f"embedding-server-{index}"
        self.shard = shard

    def lookup(self, message: Lookup) -> Pooled:
        return Pooled(checked_lookup(self.shard, message, self.name))

    def apply(self, message: PushRows) -> None:
        if not all_finite(message.grads):
            raise ValueError(f"{self.name}: NaN or infinite row gradient")
        self.shard.apply_gradients(message.rows, message.grads)

    def report(self) -> ShardReport:
        """The shard's state at a cut or the end, after the eviction due there (both drivers
        report at the same points, so a run and its resumed twin evict the same rows)."""
        self.shard.evict_at_cut()
        return ShardReport(copy_state(self.shard.state_dict()))
