"""``async``: Downpour SGD; every gradient is applied on arrival.

Dean et al. (2012), as the baseline of the GBA paper (001) and the subject of the async-SGD
at scale paper (003, Liu & Zhao, AAAI 2021): a worker pulls the current parameters, computes
a gradient and pushes it; the server applies it at once. Its staleness (the updates applied
between the pull and the push) grows with the number of workers. ``staleness_norm`` scales
each gradient by rho(tau) (see staleness_norm.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from recsync.families.gradient.strategy import GradientStrategy
from recsync.strategy.gradient import Action, GradientPolicy, Push
from recsync.strategy.staleness_norm import StalenessNorm


@dataclass(frozen=True)
class AsyncConfig(GradientStrategy):
    """Asynchronous SGD (Downpour): every worker's gradient applied when it arrives, none
    waiting."""

    staleness_norm: StalenessNorm | None = field(
        default=None,
        metadata={
            "doc": "Scale each stale gradient before it is applied (Liu & Zhao).",
            "unset": "off (every gradient at full weight)",
        },
    )

    name: ClassVar[str] = "async"
    label: ClassVar[str] = "async"
    # nothing waits for a push, so one that leaves a reader round trip later changes only
    # its staleness, and its row gradients ride on the next lookups
    defers_pushes: ClassVar[bool] = True

    def __post_init__(self) -> None:
        if self.staleness_norm is not None and not isinstance(self.staleness_norm, StalenessNorm):
            raise ValueError("staleness_norm must be a StalenessNorm or None")

    def _params(self) -> str:
        return "" if self.staleness_norm is None else self.staleness_norm.describe()

    def make_server(self, num_workers: int, sparse: bool) -> AsyncServer:
        return AsyncServer(num_workers, sparse)


class AsyncServer(GradientPolicy):
    """Applies every pushed gradient alone, weight 1."""

    def on_push(self, push: Push) -> list[Action]:
        return [self._apply([(push.grad_id, 1.0)], 1.0)]
