"""bfloat16: float32's exponent with an 8-bit mantissa, half the bytes (the paper's
choice for gradients)."""

from __future__ import annotations

import torch

from recsync.families.hierarchical.compress.encoded import Encoded

RELATIVE_ERROR = 2.0**-8  # round to nearest with 8 significant bits


class Bf16:
    """x rounded to bfloat16 (to nearest): each element's relative error at most 2^-8."""

    name = "bf16"
    flops_per_element = 2.0  # a cast each way

    def encode(self, x: torch.Tensor) -> Encoded:
        return Encoded(x.to(torch.bfloat16).contiguous(), tuple(x.shape))

    def decode(self, encoded: Encoded) -> torch.Tensor:
        return encoded.values.float()
