"""``independent``: no dense sync at all; each trainer trains its own replica.

The lower bound of the replica strategies in ShadowSync (Zheng et al. 2020, arXiv
2003.03477): the same system with the shadow thread switched off. A plain `ReplicaStrategy`:
no sync round, no policy. The job ends with trainer 0's replica (averaging replicas that
were never synced is meaningless).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import ClassVar

import torch

from recsync.families.synced_replicas.strategy import ReplicaStrategy, Timing


@dataclass(frozen=True)
class IndependentConfig(ReplicaStrategy):
    """Independent replicas: each trainer trains its own dense replica, never synced (a lower
    bound to compare the others with).

    ``timing`` is accepted for a uniform config shape and ignored."""

    timing: Timing = field(
        default_factory=Timing,
        metadata={"doc": "Accepted for the shape of the replica strategies' config; ignored."},
    )

    name: ClassVar[str] = "independent"
    label: ClassVar[str] = "independent"
    lower_bound: ClassVar[bool] = True

    def __post_init__(self) -> None:
        self._check_timing()

    def describe(self) -> str:
        return "independent (no dense sync)"

    def combine_replicas(self, replicas: Sequence[torch.Tensor]) -> torch.Tensor:
        return replicas[0]
