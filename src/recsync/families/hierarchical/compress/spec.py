"""Which codec each direction of trainer <-> group-PS traffic uses."""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

import torch

from recsync.families.hierarchical.compress.bf16 import Bf16
from recsync.families.hierarchical.compress.encoded import Codec, Encoded, Identity
from recsync.families.hierarchical.compress.error_feedback import ErrorFeedback
from recsync.families.hierarchical.compress.int8 import Int8Rows
from recsync.families.hierarchical.compress.topk import TopK

PRECISIONS = ("none", "bf16", "int8")


def _precision(name: str) -> Codec:
    codecs: dict[str, Codec] = {"none": Identity(), "bf16": Bf16(), "int8": Int8Rows()}
    return codecs[name]


@dataclass(frozen=True)
class CompressionSpec:
    """`activations`: the codec of forward activations (the paper: int8); `gradients`: of
    backward gradients (the paper: bf16; int8 hurt its accuracy); `topk_fraction`: if set,
    gradients are sparsified to that fraction of their elements, with error feedback unless
    `error_feedback` is off (then they are sent as float32 values)."""

    activations: str = "none"
    gradients: str = "none"
    topk_fraction: float | None = None
    error_feedback: bool = True

    def __post_init__(self) -> None:
        for field, value in (("activations", self.activations), ("gradients", self.gradients)):
            if value not in PRECISIONS:
                raise ValueError(
                    f"compression {field} must be one of {list(PRECISIONS)}, got {value!r}"
                )
        if self.topk_fraction is not None:
            if not 0.0 < self.topk_fraction <= 1.0:
                raise ValueError(
                    f"compression topk_fraction must be in (0, 1], got {self.topk_fraction}"
                )
            if self.gradients != "none":
                raise ValueError(
                    "compression: top-k sends float32 values; set gradients = 'none' with "
                    f"topk_fraction (got gradients = {self.gradients!r})"
                )

    @property
    def enabled(self) -> bool:
        return (self.activations, self.gradients, self.topk_fraction) != ("none", "none", None)

    def activation_codec(self) -> Codec:
        return _precision(self.activations)

    def gradient_codec(self) -> Codec:
        """A fresh codec for one stream of gradients (error feedback keeps a residual per
        stream, so every sender and tensor takes its own)."""
        if self.topk_fraction is None:
            return _precision(self.gradients)
        topk = TopK(self.topk_fraction)
        return ErrorFeedback(topk) if self.error_feedback else topk


class GradientStreams:
    """The gradient codec of each stream a node sends: one sender's gradient of one tensor
    of the model, of one shape (a smaller last batch is a stream of its own). Error
    feedback keeps its residual per stream; a stateless codec is shared by all."""

    def __init__(self, spec: CompressionSpec):
        self.spec = spec
        self.shared = spec.gradient_codec() if spec.topk_fraction is None else None
        self.streams: dict[Hashable, Codec] = {}
        self.decoder = self.shared or spec.gradient_codec()  # decoding keeps no state
        self.flops_per_element = self.decoder.flops_per_element

    def decode(self, encoded: Encoded) -> torch.Tensor:
        return self.decoder.decode(encoded)

    def codec(self, stream: Hashable) -> Codec:
        if self.shared is not None:
            return self.shared
        codec = self.streams.get(stream)
        if codec is None:
            codec = self.streams[stream] = self.spec.gradient_codec()
        return codec
