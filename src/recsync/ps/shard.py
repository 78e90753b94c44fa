"""An embedding shard: rows of one or more tables stacked in one R x D matrix.

The shard pools its own rows per bag (partial pooling: a bag split over several shards is
the sum of their partial pools), turns pooled gradients back into coalesced row gradients,
and applies a row-wise optimizer in place. Each row carries a version: the number of
updates applied to it.
"""

from __future__ import annotations

from typing import Any, Protocol

import torch
import torch.nn.functional as F_

from recsync.model.priced import is_priced, pooled_shape, shaped
from recsync.optim.rowwise import RowOptimizer

ONE = torch.ones((), dtype=torch.int64)


class RowShard(Protocol):
    """What an embedding server asks of its shard, fixed (`EmbeddingShard`, rows addressed
    by index) or hash (`HashEmbeddingShard`, rows addressed by 64-bit key)."""

    global_step: int

    @property
    def num_rows(self) -> int: ...

    @property
    def dim(self) -> int: ...

    def lookup(
        self, rows: torch.Tensor, offsets: torch.Tensor, weights: torch.Tensor | None = None
    ) -> torch.Tensor: ...

    def peek(
        self, rows: torch.Tensor, offsets: torch.Tensor, weights: torch.Tensor | None = None
    ) -> torch.Tensor: ...

    def apply_gradients(
        self, rows: torch.Tensor, grads: torch.Tensor, lr_scale: float = 1.0
    ) -> None: ...

    def versions_of(self, rows: torch.Tensor) -> torch.Tensor: ...

    def evict_at_cut(self) -> int: ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...


class EmbeddingShard:
    """R x D rows with their optimizer state and per-row versions.

    Requests address rows by local index in [0, R). A request is (rows, offsets, weights):
    N row indices, num_bags+1 offsets (offsets[-1] = N) and optional N per-id weights (mean
    pooling is sum pooling with weights 1/len).
    """

    def __init__(self, weight: torch.Tensor, optimizer: RowOptimizer):
        assert weight.dim() == 2 and weight.dtype == torch.float32
        self.weight = weight
        self.optimizer = optimizer
        self.versions = torch.zeros(weight.shape[0], dtype=torch.int64)
        self.global_step = 0

    @property
    def num_rows(self) -> int:
        return int(self.weight.shape[0])

    @property
    def dim(self) -> int:
        return int(self.weight.shape[1])

    def lookup(
        self, rows: torch.Tensor, offsets: torch.Tensor, weights: torch.Tensor | None = None
    ) -> torch.Tensor:
        """num_bags x D pooled (summed, optionally weighted) rows."""
        priced = pooled_shape(offsets, self.weight)
        if priced is not None:
            return priced
        return F_.embedding_bag(
            rows,
            self.weight,
            offsets,
            mode="sum",
            per_sample_weights=weights,
            include_last_offset=True,
        )

    def peek(
        self, rows: torch.Tensor, offsets: torch.Tensor, weights: torch.Tensor | None = None
    ) -> torch.Tensor:
        """`lookup`: a fixed table reads its rows without changing them."""
        return self.lookup(rows, offsets, weights)

    def versions_of(self, rows: torch.Tensor) -> torch.Tensor:
        """Each row's version (updates applied to it)."""
        return self.versions.index_select(0, rows)

    def evict_at_cut(self) -> int:
        """A fixed table keeps every row."""
        return 0

    def apply_gradients(
        self, rows: torch.Tensor, grads: torch.Tensor, lr_scale: float = 1.0
    ) -> None:
        """Apply U x D gradients to U unique rows, the learning rate times `lr_scale`
        (lock-free: concurrent callers may race)."""
        if not is_priced(self.weight):  # priced math: no values to update
            self.optimizer.apply(self.weight, rows, grads, self.global_step, lr_scale)
        self.versions.index_put_((rows,), ONE, accumulate=True)
        self.global_step += 1

    def state_dict(self) -> dict[str, Any]:
        return {
            "weight": self.weight,
            "versions": self.versions,
            "global_step": self.global_step,
            "optimizer": self.optimizer.state_dict(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.weight.copy_(state["weight"])
        self.versions.copy_(state["versions"])
        self.global_step = int(state["global_step"])
        self.optimizer.load_state_dict(state["optimizer"])


def row_gradients(
    rows: torch.Tensor,
    offsets: torch.Tensor,
    grad_bags: torch.Tensor,
    weights: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Backward of a pooled lookup: (U unique rows, U x D summed gradients).

    grad_bags is num_bags x D, the gradient of the loss w.r.t. each pooled bag.
    """
    unique_rows, grads, _ = row_gradients_with_inverse(rows, offsets, grad_bags, weights)
    return unique_rows, grads


def row_gradients_with_inverse(
    rows: torch.Tensor,
    offsets: torch.Tensor,
    grad_bags: torch.Tensor,
    weights: torch.Tensor | None = None,
    one_per_bag: bool = False,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """`row_gradients`, and for each of the N ids the index of its row among the U.
    `one_per_bag`: the caller knows every bag holds one id (offsets = arange)."""
    unique_rows, inverse = torch.unique(rows, return_inverse=True)
    if is_priced(grad_bags):  # shapes only: priced math adds nothing up
        return unique_rows, shaped(unique_rows.numel(), grad_bags.shape[1]), inverse
    contributions = _contributions(offsets, grad_bags, weights, one_per_bag, rows.numel())
    grads = torch.zeros(unique_rows.numel(), grad_bags.shape[1], dtype=grad_bags.dtype)
    grads.index_add_(0, inverse, contributions)
    return unique_rows, grads, inverse


def _contributions(
    offsets: torch.Tensor,
    grad_bags: torch.Tensor,
    weights: torch.Tensor | None,
    one_per_bag: bool,
    num_ids: int,
) -> torch.Tensor:
    """Each of the N ids' share of its bag's gradient (N x D)."""
    num_bags = grad_bags.shape[0]
    if one_per_bag or (num_ids == num_bags and bool((offsets == torch.arange(num_bags + 1)).all())):
        contributions = grad_bags.clone() if weights is not None else grad_bags
    else:
        lengths = offsets[1:] - offsets[:-1]
        bag_of_id = torch.repeat_interleave(torch.arange(num_bags), lengths, output_size=num_ids)
        contributions = grad_bags.index_select(0, bag_of_id)
    if weights is not None:
        contributions.mul_(weights.unsqueeze(1))
    return contributions


def init_table(num_rows: int, dim: int, seed: int) -> torch.Tensor:
    """A table's initial rows, uniform in +-0.05/sqrt(dim), from its own seed: a row's start
    value depends on (seed, row) only, so any sharding of the table starts from the same rows."""
    gen = torch.Generator().manual_seed(seed)
    bound = 0.05 / dim**0.5
    table: torch.Tensor = (torch.rand(num_rows, dim, generator=gen) * 2 - 1) * bound
    return table
