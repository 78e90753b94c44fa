"""``ma``: elastic model averaging over an all-reduce, no sync servers.

ShadowSync (Zheng et al. 2020, arXiv 2003.03477) Algorithm 3, after model averaging (Zhang
et al. 2016). One sync of trainer i:

1. ``w_g <- allreduce(snapshot of w_i) / n`` (the driver runs the all-reduce);
2. ``w_i <- (1-a) w_i + a w_g`` on the CURRENT replica.

With ``alpha = 1`` this is plain model averaging; the paper's shadow variant interpolates
because the workers kept training while the all-reduce ran, and copying w_g back would lose
those updates.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import torch

from recsync.families.synced_replicas.strategy import (
    CollectiveStrategy,
    ElasticPull,
    Timing,
    check_fraction,
)


@dataclass(frozen=True)
class MaConfig(CollectiveStrategy):
    """MA: the trainers' dense replicas averaged over an all-reduce, each pulled toward the
    average.

    The paper uses the same hyper-parameters for S-EASGD, S-MA and S-BMUF, hence the same
    default alpha 0.1."""

    alpha: float = field(
        default=0.1,
        metadata={
            "doc": "The elastic parameter: how far a replica moves toward the average at a "
            "sync (1: copies it).",
            "values": "(0, 1]",
        },
    )
    timing: Timing = field(
        default_factory=Timing,
        metadata={"doc": "When the replicas sync: shadow (background) or fixed rate."},
    )

    name: ClassVar[str] = "ma"
    label: ClassVar[str] = "MA"

    def __post_init__(self) -> None:
        check_fraction("alpha", self.alpha)
        self._check_timing()

    def _params(self) -> str:
        return f"alpha={self.alpha:g}"

    def make_replica(self, initial: torch.Tensor | None = None) -> ElasticPull:
        return ElasticPull(self)
