"""Building blocks of the dense part: MLPs, the data normalization layer, dot interaction."""

from __future__ import annotations

from itertools import pairwise

import torch
from torch import nn


class DataNorm(nn.Module):
    """Liu & Zhao's data normalization (eq. 9-10), alpha (x - E[x]) / E|x| - beta, E over the
    local batch, per output unit of a layer's pre-activation; alpha and beta are trainable
    (initialised 1 and 0).

    For a positive x, E|x| = E[x] and this is exactly the paper's alpha x / E[x] - beta' (beta'
    = alpha + beta; the paper's eq. 9 is alpha = beta' = 1, our initial values). The paper's
    E[x] alone in the denominator is not usable on a pre-activation, whose mean crosses zero:
    measured on the staleness-normalization setting with one worker, it never learned (test
    AUC 0.49-0.52 where the model without it reaches 0.72). E|x| is a scale that cannot change
    sign; one below `eps` is taken as `eps`. The batch statistics are used at evaluation too
    (the paper normalizes per worker, with no running statistics).
    """

    def __init__(self, num_units: int, eps: float = 1e-3):
        super().__init__()
        self.alpha = nn.Parameter(torch.ones(num_units))
        self.beta = nn.Parameter(torch.zeros(num_units))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scale = x.abs().mean(dim=0).clamp(min=self.eps)
        return self.alpha * (x - x.mean(dim=0)) / scale - self.beta


def mlp(sizes: list[int], *, last_activation: bool, data_norm: bool) -> nn.Sequential:
    """Linear layers sizes[0] -> ... -> sizes[-1], ReLU between (and after the last if asked)."""
    layers: list[nn.Module] = []
    for i, (fan_in, fan_out) in enumerate(pairwise(sizes)):
        layers.append(nn.Linear(fan_in, fan_out))
        is_last = i == len(sizes) - 2
        if data_norm and not (is_last and not last_activation):
            layers.append(DataNorm(fan_out))
        if not is_last or last_activation:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


class DotInteraction(nn.Module):
    """Pairwise dot products of n vectors (B x n x D), self pairs excluded: B x n(n-1)/2.

    Pairs are taken from the strictly lower triangle, row by row: (1,0), (2,0), (2,1), ...
    """

    def __init__(self, num_vectors: int):
        super().__init__()
        rows, cols = torch.tril_indices(num_vectors, num_vectors, offset=-1)
        self.flat_index: torch.Tensor
        self.register_buffer("flat_index", rows * num_vectors + cols, persistent=False)
        self.num_vectors = num_vectors

    def forward(self, vectors: torch.Tensor) -> torch.Tensor:
        B, n, _ = vectors.shape
        assert n == self.num_vectors
        gram = torch.bmm(vectors, vectors.transpose(1, 2))
        return gram.reshape(B, n * n).index_select(1, self.flat_index)
