"""Magnitude sparsification: keep the k largest |x|, send them with their flat indices."""

from __future__ import annotations

import math

import torch

from recsync.families.hierarchical.compress.encoded import Encoded


class TopK:
    """Keeps ceil(`fraction` x numel) elements of largest magnitude (ties: the lower
    index first, so the choice is deterministic), as float32 values and int32 indices;
    the rest decode as zeros."""

    name = "topk"
    flops_per_element = 8.0  # |x| and a partial selection

    def __init__(self, fraction: float):
        if not 0.0 < fraction <= 1.0:
            raise ValueError(f"top-k fraction must be in (0, 1], got {fraction}")
        self.fraction = fraction

    def kept(self, numel: int) -> int:
        return max(1, math.ceil(self.fraction * numel)) if numel else 0

    def encode(self, x: torch.Tensor) -> Encoded:
        flat = x.reshape(-1).float()
        k = self.kept(flat.numel())
        order = torch.sort(flat.abs(), descending=True, stable=True).indices[:k]
        indices = torch.sort(order).values
        return Encoded(flat[indices].contiguous(), tuple(x.shape), indices=indices.int())

    def decode(self, encoded: Encoded) -> torch.Tensor:
        assert encoded.indices is not None
        flat = torch.zeros(encoded.num_elements, dtype=torch.float32)
        flat[encoded.indices.long()] = encoded.values
        return flat.reshape(encoded.shape)
