"""Error feedback (Karimireddy et al. 2019) around a lossy codec: what one message left
out is added to the next, so the bias of sparsification does not accumulate."""

from __future__ import annotations

import torch

from recsync.families.hierarchical.compress.encoded import Codec, Encoded


class ErrorFeedback:
    """p = g + e; send C(p); e <- p - decode(C(p)). One per stream of same-shaped tensors
    (one sender, one tensor of the model): the residual `e` is that stream's state."""

    def __init__(self, codec: Codec):
        self.codec = codec
        self.name = f"{codec.name}+ef"
        self.flops_per_element = codec.flops_per_element + 2.0  # p = g + e; e = p - C(p)
        self.residual: torch.Tensor | None = None

    def encode(self, x: torch.Tensor) -> Encoded:
        if self.residual is not None and self.residual.shape != x.shape:
            raise ValueError(
                f"error feedback holds a residual of shape {tuple(self.residual.shape)}; "
                f"got a tensor of shape {tuple(x.shape)} (one ErrorFeedback per stream)"
            )
        p = x.float() if self.residual is None else x.float() + self.residual
        encoded = self.codec.encode(p)
        self.residual = p - self.codec.decode(encoded)
        return encoded

    def decode(self, encoded: Encoded) -> torch.Tensor:
        return self.codec.decode(encoded)
