"""All embedding shards of a job held in one process (reference trainer, simulator)."""

from __future__ import annotations

from typing import Any

import torch

from recsync.data.batch import Batch
from recsync.optim.rowwise import RowOptimizerSpec
from recsync.ps.layout import ShardRequest, TableLayout
from recsync.ps.shard import RowShard, row_gradients


def build_shards(layout: TableLayout, optimizer: RowOptimizerSpec, seed: int) -> list[RowShard]:
    """The shards of a layout with their initial rows and optimizers."""
    return [layout.new_shard(shard, optimizer, seed) for shard in range(layout.num_shards)]


class LocalEmbeddings:
    """Pooled lookup and sparse update over shards in this process."""

    def __init__(self, layout: TableLayout, shards: list[RowShard]):
        assert len(shards) == layout.num_shards
        self.layout = layout
        self.shards = shards

    def lookup(self, batch: Batch) -> tuple[torch.Tensor, list[ShardRequest]]:
        """B x F x D pooled embeddings, and the requests to pass back to `apply`."""
        requests = self.layout.route(batch)
        partials = [self.shards[r.shard].lookup(r.rows, r.offsets, r.weights) for r in requests]
        return self.layout.combine(batch.batch_size, requests, partials), requests

    def peek(self, batch: Batch) -> torch.Tensor:
        """B x F x D pooled embeddings read without changing a shard (evaluation, serving:
        a hash table neither counts nor inserts the ids it reads)."""
        requests = self.layout.route(batch)
        partials = [self.shards[r.shard].peek(r.rows, r.offsets, r.weights) for r in requests]
        return self.layout.combine(batch.batch_size, requests, partials)

    def apply(self, grad_pooled: torch.Tensor, requests: list[ShardRequest]) -> None:
        """Turn a B x F x D pooled gradient into row updates on every shard involved."""
        grad_bags_of = self.layout.requests_gradients(grad_pooled, requests)
        for r, grad_bags in zip(requests, grad_bags_of, strict=True):
            rows, grads = row_gradients(r.rows, r.offsets, grad_bags, r.weights)
            self.shards[r.shard].apply_gradients(rows, grads)


def loaded_embeddings(
    optimizer: RowOptimizerSpec, seed: int, layout: TableLayout, states: list[dict[str, Any]]
) -> LocalEmbeddings:
    """The shards of a layout holding checkpointed states (to evaluate or serve)."""
    shards = build_shards(layout, optimizer, seed)
    for shard, state in zip(shards, states, strict=True):
        shard.load_state_dict(state)
    return LocalEmbeddings(layout, shards)
