"""Copies of optimizer and shard states (nested dicts of tensors), for reports and
checkpoints."""

from __future__ import annotations

from typing import Any

import torch


def copy_state(state: dict[str, Any]) -> dict[str, Any]:
    """A deep copy of a (nested) state dict's tensors."""
    out: dict[str, Any] = {}
    for key, value in state.items():
        if isinstance(value, torch.Tensor):
            out[key] = value.clone()
        elif isinstance(value, dict):
            out[key] = copy_state(value)
        else:
            out[key] = value
    return out
