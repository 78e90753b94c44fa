"""Payloads cross Ray with their tensors as numpy arrays: Ray serializes numpy zero-copy,
torch tensors through pickle (measured: a 256 x 26 lookup round trip takes 2.5 ms as numpy,
4.4 ms as torch). Works on any message or reply: its tensor fields, and those of nested
payloads (a handed batch), are converted; other fields pass as they are."""

from __future__ import annotations

import dataclasses
import warnings
from typing import Any

import numpy as np
import torch

# Arrays Ray hands over are read-only views of its buffers; recsync never writes to them
# (a server that keeps a message's tensors copies them: `Message.retained`).
warnings.filterwarnings("ignore", message="The given NumPy array is not writable")

_FIELDS: dict[type, tuple[str, ...]] = {}


def _fields(cls: type) -> tuple[str, ...]:
    names = _FIELDS.get(cls)
    if names is None:
        is_payload = dataclasses.is_dataclass(cls)
        names = _FIELDS[cls] = tuple(f.name for f in dataclasses.fields(cls)) if is_payload else ()
    return names


def encode(value: Any) -> Any:
    """`value` with every tensor (also inside nested payloads) as a numpy array."""
    if isinstance(value, torch.Tensor):
        return value.numpy()
    names = _fields(type(value))
    if not names:
        return value
    return dataclasses.replace(value, **{n: encode(getattr(value, n)) for n in names})


def decode(value: Any, copy: bool = False) -> Any:
    """`value` with every numpy array back as a tensor (copied: writable and owned)."""
    if isinstance(value, np.ndarray):
        tensor = torch.from_numpy(value)
        return tensor.clone() if copy else tensor
    names = _fields(type(value))
    if not names:
        return value
    return dataclasses.replace(value, **{n: decode(getattr(value, n), copy) for n in names})
