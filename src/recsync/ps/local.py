"""All embedding shards of a job held in one process (reference trainer, simulator)."""

from __future__ import annotations

import torch

from recsync.data.batch import Batch
from recsync.optim.rowwise import RowOptimizerSpec
from recsync.ps.layout import EmbeddingLayout, ShardRequest
from recsync.ps.shard import EmbeddingShard, init_table, row_gradients


def shard_weight(layout: EmbeddingLayout, shard: int, seed: int) -> torch.Tensor:
    """Initial rows of one shard: each table's rows come from (seed, table) whatever the
    sharding, so every layout of the same tables starts from the same model."""
    weight = torch.empty(layout.shard_rows[shard], layout.tables[0].dim)
    for s in layout.slices:
        if s.shard == shard:
            spec = layout.tables[s.table]
            table = init_table(spec.num_rows, spec.dim, seed * 1000 + s.table)
            weight[s.shard_row : s.shard_row + s.num_rows] = table[s.row_start : s.row_end]
    return weight


def build_shards(
    layout: EmbeddingLayout, optimizer: RowOptimizerSpec, seed: int
) -> list[EmbeddingShard]:
    """The shards of a layout with their initial rows and optimizers."""
    weights = [shard_weight(layout, shard, seed) for shard in range(layout.num_shards)]
    return [EmbeddingShard(w, optimizer.build(w.shape[0], w.shape[1])) for w in weights]


class LocalEmbeddings:
    """Pooled lookup and sparse update over shards in this process."""

    def __init__(self, layout: EmbeddingLayout, shards: list[EmbeddingShard]):
        assert len(shards) == layout.num_shards
        self.layout = layout
        self.shards = shards

    def lookup(self, batch: Batch) -> tuple[torch.Tensor, list[ShardRequest]]:
        """B x F x D pooled embeddings, and the requests to pass back to `apply`."""
        requests = self.layout.route(batch)
        partials = [self.shards[r.shard].lookup(r.rows, r.offsets, r.weights) for r in requests]
        return self.layout.combine(batch.batch_size, requests, partials), requests

    def apply(self, grad_pooled: torch.Tensor, requests: list[ShardRequest]) -> None:
        """Turn a B x F x D pooled gradient into row updates on every shard involved."""
        grad_bags_of = self.layout.requests_gradients(grad_pooled, requests)
        for r, grad_bags in zip(requests, grad_bags_of, strict=True):
            rows, grads = row_gradients(r.rows, r.offsets, grad_bags, r.weights)
            self.shards[r.shard].apply_gradients(rows, grads)
