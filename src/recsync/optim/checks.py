"""Checks on gradients before an optimizer sees them."""

from __future__ import annotations

import math

import torch

from recsync.model.priced import is_priced


def all_finite(values: torch.Tensor) -> bool:
    """No NaN or infinity in `values` (one reduction: either would make the sum non-finite).
    A priced tensor (model/priced.py) has no values: nothing to check."""
    if is_priced(values):
        return True
    return math.isfinite(float(values.sum())) if values.numel() else True
