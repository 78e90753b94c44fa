"""``gba``: Global Batch gradients Aggregation with token control and staleness decay.

GBA (001, NeurIPS 2022, section 4 and Algorithms 1-2): the reader hands every batch with a
token from the token list 0,0,..(M times),1,1,..(M times),..; a worker pushes its gradient
with the batch's token and immediately takes the next batch (it never waits). Each server
keeps a buffer of M (gradient, token) pairs; when it is full the server aggregates and
applies once, clears it, and its global step k (``self.version``) grows by one. A gradient
with token t has staleness k - t and weight f(k - t), f the staleness decay: the paper's
default ``threshold`` f = 1 if k - t <= iota else 0 (the gradient is excluded: dropped,
reason ``"stale"``); ``exponential`` keeps stale gradients at a weight halved per step past
iota. Dense servers apply the weighted mean of the buffer; embedding shards divide the
weighted sum by the number of gradients aggregated, so one GBA step equals one sync step on
the same global batch (design.md section 3).

Decisions: the weight is computed when the gradient arrives, with k the current global step.
Every gradient buffered while the server is at step k is applied by the Apply that ends step
k, so arrival and aggregation see the same k. A gradient of weight 0 takes its place in the
buffer and is left out of the aggregate (the paper: "we exclude the j-th gradient in the
buffer"); it is forgotten at once (a Drop, reason ``"stale"``), its place counted, so a step
is M pushes, stale ones included (a step of only stale pushes advances k and updates
nothing). ``stale_slot = False`` keeps recsync's earlier rule: a stale gradient is dropped
without a place, so every Apply aggregates exactly M fresh gradients. A final partial
buffer is flushed once every worker is done. Tokens may arrive in any order; a
token ahead of k (t > k) has staleness < 0 and weight f(<0) = 1. A failed worker loses its
batch and token; nothing else changes (its token is simply never pushed).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ClassVar

from recsync.families.gradient.strategy import GradientStrategy
from recsync.strategy.gradient import Action, Drop, GradientPolicy, Push, check_positive_int

Decay = Callable[[int, int], float]


class TokenList:
    """Token control (Alg. 1): the i-th batch handed out (from 0) carries token i // M, so
    tokens run 0 (M times), 1 (M times), ... in hand-out order."""

    def __init__(self, tokens_per_step: int) -> None:
        check_positive_int("tokens_per_step", tokens_per_step)
        self.tokens_per_step = tokens_per_step

    def token(self, batches_handed: int) -> int:
        return batches_handed // self.tokens_per_step  # (staleness k - t, iota) -> weight in [0, 1]


def threshold_decay(staleness: int, iota: int) -> float:
    """The paper's decay: keep (weight 1) up to iota steps of staleness, exclude beyond."""
    return 1.0 if staleness <= iota else 0.0


def exponential_decay(staleness: int, iota: int) -> float:
    """Weight 1 up to iota, then halved per step of staleness beyond iota (never excluded,
    unless the weight underflows to 0)."""
    return 1.0 if staleness <= iota else 0.5 ** (staleness - iota)


DECAYS: dict[str, Decay] = {
    "threshold": threshold_decay,
    "exponential": exponential_decay,
}


@dataclass(frozen=True)
class GbaConfig(GradientStrategy):
    """GBA: workers never wait; servers aggregate a global batch of token-tagged
    gradients, stale ones decayed."""

    num_aggregate: int | None = field(
        default=None,
        metadata={
            "doc": "M = global batch / local batch: the gradients a server aggregates into "
            "one step.",
            "unset": "the number of workers (the global batch of a sync job of as many)",
            "values": ">= 1",
        },
    )
    iota: int = field(
        default=4,
        metadata={
            "doc": "The staleness threshold: a gradient up to iota steps stale keeps its "
            "full weight.",
            "values": ">= 0",
        },
    )
    decay: str = field(
        default="threshold",
        metadata={
            "doc": "The weight of a gradient staler than iota: threshold: excluded; "
            "exponential: halved per step beyond iota.",
            "values": ["threshold", "exponential"],
        },
    )
    stale_slot: bool = field(
        default=True,
        metadata={
            "doc": "An excluded stale gradient still takes its place in the buffer (the "
            "paper); false: it takes none."
        },
    )

    name: ClassVar[str] = "gba"
    label: ClassVar[str] = "GBA"

    def __post_init__(self) -> None:
        if self.num_aggregate is not None:
            check_positive_int("num_aggregate", self.num_aggregate)
        check_positive_int("iota", self.iota, minimum=0)
        if self.decay not in DECAYS:
            raise ValueError(f"decay must be one of {sorted(DECAYS)}, got {self.decay!r}")
        if not isinstance(self.stale_slot, bool):
            raise ValueError(f"stale_slot must be a bool, got {self.stale_slot!r}")

    def tokens_per_step(self, num_workers: int) -> int:
        """M: each token value is handed out this many times."""
        return num_workers if self.num_aggregate is None else self.num_aggregate

    def token_list(self, num_workers: int) -> TokenList:
        return TokenList(self.tokens_per_step(num_workers))

    def _params(self) -> str:
        m = "" if self.num_aggregate is None else f"M={self.num_aggregate} "
        slot = "" if self.stale_slot else " stale-without-slot"
        return f"{m}iota={self.iota} decay={self.decay}{slot}"

    def batches_per_step(self, num_workers: int) -> int:
        return self.tokens_per_step(num_workers)

    def make_server(self, num_workers: int, sparse: bool) -> GbaServer:
        return GbaServer(
            num_workers,
            sparse,
            self.tokens_per_step(num_workers),
            self.iota,
            DECAYS[self.decay],
            self.stale_slot,
        )


class GbaServer(GradientPolicy):
    """The gradient buffer of one server: M weighted gradients, then one Apply."""

    def __init__(
        self,
        num_workers: int,
        sparse: bool = False,
        num_aggregate: int = 1,
        iota: int = 4,
        decay: Decay = threshold_decay,
        stale_slot: bool = True,
    ) -> None:
        super().__init__(num_workers, sparse)
        check_positive_int("num_aggregate", num_aggregate)
        check_positive_int("iota", iota, minimum=0)
        self.num_aggregate = num_aggregate
        self.iota = iota
        self.decay = decay
        self.stale_slot = stale_slot
        self.buffer: list[tuple[int, float]] = []  # (grad_id, weight) for global step k
        self.stale_places = 0  # places in the buffer taken by stale (left-out) gradients

    def weight(self, token: int) -> float:
        """f(k - t) at the current global step k."""
        return float(self.decay(self.version - token, self.iota))

    def on_push(self, push: Push) -> list[Action]:
        assert push.token is not None, f"gba: gradient {push.grad_id} pushed without a token"
        weight = self.weight(push.token)
        actions: list[Action] = []
        if weight <= 0.0:
            actions.append(Drop(push.grad_id, "stale"))
            if not self.stale_slot:
                return actions
            self.stale_places += 1
        else:
            self.buffer.append((push.grad_id, weight))
        if len(self.buffer) + self.stale_places >= self.num_aggregate:
            actions.append(self._flush())
        return actions

    def on_worker_done(self, worker: int) -> list[Action]:
        super().on_worker_done(worker)
        if self.active_workers == 0 and (self.buffer or self.stale_places):
            return [self._flush()]
        return []

    def _flush(self) -> Action:
        grads = list(self.buffer)
        self.buffer.clear()
        self.stale_places = 0
        if not grads:
            return self._advance()
        divisor = len(grads) if self.sparse else sum(w for _, w in grads)
        return self._apply(grads, divisor)
