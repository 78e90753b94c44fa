"""``bounded_staleness``: async updates, but no worker runs more than s steps ahead (Hop-BS).

Hop-BS (Luo et al., "Hop: Heterogeneity-aware decentralized training", ASPLOS 2019), the
stale synchronous parallel rule, as a baseline of the GBA paper (001, section 5): it
"restricts the maximal differences of gradient version between the fastest and the slowest
workers, controlled by s". The server applies every gradient on arrival, like ``async``; it
counts the gradients each worker pushed here (the worker's clock) and a worker may begin a
step only while its clock is at most s ahead of the slowest ACTIVE worker's clock. A finished
(or failed) worker no longer holds the others back. ``staleness_norm`` scales each gradient
by rho(tau) as in ``async`` (the server node applies it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from recsync.families.gradient.strategy import GradientStrategy
from recsync.strategy.gradient import Action, GradientPolicy, Push, check_positive_int
from recsync.strategy.staleness_norm import StalenessNorm


@dataclass(frozen=True)
class BoundedStalenessConfig(GradientStrategy):
    """Bounded staleness (Hop-BS): a worker runs ahead of the slowest active worker by a
    bounded number of steps."""

    staleness: int = field(
        default=4,
        metadata={
            "doc": "s, how many steps a worker may run ahead of the slowest active worker "
            "(0: lock step).",
            "values": ">= 0",
        },
    )
    staleness_norm: StalenessNorm | None = field(
        default=None,
        metadata={
            "doc": "Scale each stale gradient before it is applied (Liu & Zhao).",
            "unset": "off (every gradient at full weight)",
        },
    )

    name: ClassVar[str] = "bounded_staleness"
    label: ClassVar[str] = "Hop-BS"
    holds_workers: ClassVar[bool] = True

    def __post_init__(self) -> None:
        check_positive_int("staleness", self.staleness, minimum=0)
        if self.staleness_norm is not None and not isinstance(self.staleness_norm, StalenessNorm):
            raise ValueError("staleness_norm must be a StalenessNorm or None")

    def _params(self) -> str:
        norm = "" if self.staleness_norm is None else self.staleness_norm.describe()
        return f"s={self.staleness} {norm}" if norm else f"s={self.staleness}"

    def make_server(self, num_workers: int, sparse: bool) -> BoundedStalenessServer:
        return BoundedStalenessServer(num_workers, sparse, self.staleness)


class BoundedStalenessServer(GradientPolicy):
    """Applies each gradient alone on arrival; gates the start of steps on the clocks."""

    def __init__(self, num_workers: int, sparse: bool = False, staleness: int = 4) -> None:
        super().__init__(num_workers, sparse)
        check_positive_int("staleness", staleness, minimum=0)
        self.staleness = staleness
        self.clock = [0] * num_workers  # gradients pushed here by each worker

    def on_push(self, push: Push) -> list[Action]:
        self.clock[push.worker] += 1
        return [self._apply([(push.grad_id, 1.0)], 1.0)]

    def slowest_clock(self) -> int | None:
        """The smallest clock of the active workers (None when all are done)."""
        active = [c for w, c in enumerate(self.clock) if w not in self.done]
        return min(active) if active else None

    def may_start(self, worker: int, last_version: int | None) -> bool:
        slowest = self.slowest_clock()
        if slowest is None or worker in self.done:
            return True
        return self.clock[worker] - slowest <= self.staleness
