"""The payload a codec puts on the wire, and the interface every codec keeps."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import torch


@dataclass(frozen=True, slots=True, eq=False)
class Encoded:
    """A coded tensor of `shape`: `values` (in the codec's dtype), and where the codec
    needs them a per-row `scale` (float32, one per row of the 2-D view) and the flat
    `indices` (int32) of the values kept. Its tensors are its wire bytes."""

    values: torch.Tensor
    shape: tuple[int, ...]
    scale: torch.Tensor | None = None
    indices: torch.Tensor | None = None

    @property
    def num_elements(self) -> int:
        """Elements of the tensor it stands for (what coding it costs is proportional to)."""
        count = 1
        for size in self.shape:
            count *= size
        return count


class Codec(Protocol):
    """Turns a float32 tensor into an `Encoded` payload and back (lossy or not)."""

    name: str
    flops_per_element: float  # CPU work of coding one element (encode and decode)

    def encode(self, x: torch.Tensor) -> Encoded: ...

    def decode(self, encoded: Encoded) -> torch.Tensor: ...


class Identity:
    """No compression: the tensor itself, float32."""

    name = "none"
    flops_per_element = 0.0

    def encode(self, x: torch.Tensor) -> Encoded:
        return Encoded(x.contiguous(), tuple(x.shape))

    def decode(self, encoded: Encoded) -> torch.Tensor:
        return encoded.values


def rows_view(x: torch.Tensor) -> torch.Tensor:
    """The 2-D view a per-row codec works on: B x rest (a vector is one row)."""
    if x.dim() == 0:
        return x.reshape(1, 1)
    if x.dim() == 1:
        return x.reshape(1, -1)
    return x.reshape(x.shape[0], -1)
