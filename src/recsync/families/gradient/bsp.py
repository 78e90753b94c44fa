"""``bsp``: aggregate any M gradients, whatever their version, and apply once.

"Bulk synchronous parallel (BSP)" as the GBA paper (001, section 5 baselines and Insight 1)
uses it: the server "aggregates a pre-set number of gradients when applying gradients to the
parameters, regardless of the gradient version". Workers never wait for the server, so the
aggregated gradients may be stale. When every worker is done, a partial buffer (fewer than M)
is applied as a last, smaller step, so no gradient is left pending.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from recsync.families.gradient.strategy import GradientStrategy
from recsync.strategy.gradient import Action, GradientPolicy, Push, check_positive_int


@dataclass(frozen=True)
class BspConfig(GradientStrategy):
    """BSP: every update aggregates a fixed number of gradients, whichever workers sent
    them."""

    num_aggregate: int | None = field(
        default=None,
        metadata={
            "doc": "M, the gradients aggregated into one update.",
            "unset": "the number of workers",
            "values": ">= 1",
        },
    )

    name: ClassVar[str] = "bsp"
    label: ClassVar[str] = "BSP"

    def __post_init__(self) -> None:
        if self.num_aggregate is not None:
            check_positive_int("num_aggregate", self.num_aggregate)

    def aggregate(self, num_workers: int) -> int:
        """M for a job of ``num_workers`` workers."""
        return num_workers if self.num_aggregate is None else self.num_aggregate

    def _params(self) -> str:
        return "" if self.num_aggregate is None else f"M={self.num_aggregate}"

    def batches_per_step(self, num_workers: int) -> int:
        return self.aggregate(num_workers)

    def make_server(self, num_workers: int, sparse: bool) -> BspServer:
        return BspServer(num_workers, sparse, self.aggregate(num_workers))


class BspServer(GradientPolicy):
    """Buffers gradients in arrival order; every M-th applies their mean."""

    def __init__(self, num_workers: int, sparse: bool = False, num_aggregate: int = 1) -> None:
        super().__init__(num_workers, sparse)
        check_positive_int("num_aggregate", num_aggregate)
        self.num_aggregate = num_aggregate
        self.buffer: list[int] = []

    def on_push(self, push: Push) -> list[Action]:
        self.buffer.append(push.grad_id)
        if len(self.buffer) >= self.num_aggregate:
            return [self._flush()]
        return []

    def on_worker_done(self, worker: int) -> list[Action]:
        super().on_worker_done(worker)
        if self.active_workers == 0 and self.buffer:
            return [self._flush()]
        return []

    def _flush(self) -> Action:
        grads = [(grad_id, 1.0) for grad_id in self.buffer]
        self.buffer.clear()
        return self._apply(grads, len(grads))
