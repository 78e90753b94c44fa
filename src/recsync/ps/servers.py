"""Server nodes: embedding servers (table shards) and sync servers (EASGD center slices)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from recsync.ps.shard import EmbeddingShard


@dataclass
class ServerStats:
    """Requests served and bytes moved by one server."""

    lookups: int = 0
    rows_looked_up: int = 0
    updates: int = 0
    rows_updated: int = 0
    exchanges: int = 0
    bytes_received: int = 0
    bytes_sent: int = 0


class EmbeddingServerNode:
    """Hosts one shard: pooled lookups (partial pooling) and lock-free row updates."""

    def __init__(self, index: int, shard: EmbeddingShard):
        self.index = index
        self.shard = shard
        self.stats = ServerStats()

    def lookup(
        self, rows: torch.Tensor, offsets: torch.Tensor, weights: torch.Tensor | None
    ) -> torch.Tensor:
        if rows.numel() and (int(rows.min()) < 0 or int(rows.max()) >= self.shard.num_rows):
            raise ValueError(
                f"embedding server {self.index}: row out of range [0, {self.shard.num_rows})"
            )
        pooled = self.shard.lookup(rows, offsets, weights)
        stats = self.stats
        stats.lookups += 1
        stats.rows_looked_up += int(rows.numel())
        stats.bytes_received += _nbytes(rows, offsets, weights)
        stats.bytes_sent += _nbytes(pooled)
        return pooled

    def apply(self, rows: torch.Tensor, grads: torch.Tensor) -> None:
        if not bool(torch.isfinite(grads).all()):
            raise ValueError(f"embedding server {self.index}: NaN or infinite row gradient")
        self.shard.apply_gradients(rows, grads)
        self.stats.updates += 1
        self.stats.rows_updated += int(rows.numel())
        self.stats.bytes_received += _nbytes(rows, grads)


class SyncServerNode:
    """Holds one slice of the EASGD center variable and answers exchanges."""

    def __init__(self, index: int, center_policy):
        self.index = index
        self.center = center_policy
        self.stats = ServerStats()

    def exchange(self, values: torch.Tensor) -> torch.Tensor:
        new_center = self.center.exchange(values)
        self.stats.exchanges += 1
        self.stats.bytes_received += _nbytes(values)
        self.stats.bytes_sent += _nbytes(new_center)
        return new_center


def _nbytes(*tensors: torch.Tensor | None) -> int:
    return sum(t.numel() * t.element_size() for t in tensors if t is not None)
