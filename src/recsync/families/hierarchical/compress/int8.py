"""INT8 quantization with one symmetric scale per row (for forward activations: the paper
found gradients too sensitive for 8 bits)."""

from __future__ import annotations

import torch

from recsync.families.hierarchical.compress.encoded import Encoded, rows_view

LEVELS = 127


class Int8Rows:
    """q = round(x / s) with s = max|x| / 127 over each row; decoded q * s. Each element's
    error is at most s / 2; a row of zeros stays exact."""

    name = "int8"
    flops_per_element = 5.0  # |x|, max, divide, round, clamp; a multiply back

    def encode(self, x: torch.Tensor) -> Encoded:
        rows = rows_view(x.float())
        scale = rows.abs().amax(dim=1, keepdim=True) / LEVELS
        safe = torch.where(scale > 0, scale, torch.ones_like(scale))
        q = torch.round(rows / safe).clamp_(-LEVELS, LEVELS).to(torch.int8)
        return Encoded(q, tuple(x.shape), scale=scale.squeeze(1))

    def decode(self, encoded: Encoded) -> torch.Tensor:
        assert encoded.scale is not None
        rows = encoded.values.float() * encoded.scale.unsqueeze(1)
        return rows.reshape(encoded.shape)
