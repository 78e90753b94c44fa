"""``independent``: no dense sync at all; each trainer trains its own replica.

The lower bound of the replica strategies in ShadowSync (Zheng et al. 2020, arXiv
2003.03477): the same system with the shadow thread switched off. Nothing to apply, so
there is no policy class; the driver checks ``needs == "none"`` and starts no sync.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from recsync.sync.replica import Needs, ReplicaStrategyMixin, Timing


@dataclass(frozen=True)
class IndependentConfig(ReplicaStrategyMixin):
    """No sync. ``timing`` is accepted for a uniform config shape and ignored."""

    timing: Timing = field(default_factory=Timing)

    name: ClassVar[str] = "independent"
    label: ClassVar[str] = "independent"
    needs: ClassVar[Needs] = "none"

    def __post_init__(self) -> None:
        self._check_timing()

    def describe(self) -> str:
        return "independent (no dense sync)"
