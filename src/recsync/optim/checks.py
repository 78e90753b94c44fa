"""Checks on gradients before an optimizer sees them."""

from __future__ import annotations

import math

import torch


def all_finite(values: torch.Tensor) -> bool:
    """No NaN or infinity in `values` (one reduction: either would make the sum non-finite)."""
    return math.isfinite(float(values.sum())) if values.numel() else True
