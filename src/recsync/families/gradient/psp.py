"""``psp``: Partially Synchronous Parallelism SGD, partial pushing with a timeout.

PSP-SGD (004, Algorithm 1, server part): every gradient carries its worker's iteration t,
the newest server version the worker pulled (also on a block it kept from an earlier step).
A gradient with an older timestamp than the server's is dropped (reason ``"old"``); a newer
one (a worker ahead of a lagging server) counts as current. Once at least c gradients of
the current timestamp arrived, the server waits up to tau1 more, or until every worker
answered, then applies the mean of the d gradients it received with the linear scaling
rule (Goyal et al. 2017): the learning rate times d, for embedding rows too
(w - d lr Updater(mean)). The worker side, partial pulling (`PartialPull`): a worker pulls
every block and proceeds once a fraction b of them arrived and tau2 passed (or all
arrived), keeping its previous copy of the blocks that had not; a block (and an embedding
shard's lookup) answers a worker once it applied the step after that worker's last push
there.

Decisions: c counts gradients of the current timestamp (a fast worker may push twice on the
same version, as workers never block on the server); "every worker answered" means every
ACTIVE worker pushed at least one gradient of the current timestamp. c is capped by the
gradients the step can still get (those buffered plus one per active worker that has not
pushed), so finished workers never stall a step and a finished worker's buffered gradient
never stands in for an active worker's; once every worker is done a partial step is
applied. Timer ids increase; only the timer armed for the current step counts, and a timer
firing after its step was applied is ignored. ``push_wait_s == 0`` applies as soon as
c gradients are in (the paper's experiments, "tau1 = 0").
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import ClassVar

from recsync.families.gradient.strategy import GradientStrategy, PullRule
from recsync.protocol.effects import Quorum
from recsync.strategy.gradient import (
    Action,
    Drop,
    GradientPolicy,
    Push,
    StartTimer,
    check_positive_int,
)


def _check_seconds(field: str, value: object) -> None:
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    if not (ok and math.isfinite(value) and value >= 0):  # type: ignore[arg-type, operator]
        raise ValueError(f"{field} must be a finite number >= 0, got {value!r}")


@dataclass(frozen=True)
class PspConfig(GradientStrategy):
    """PSP: partial pushing (a step once enough gradients arrived, with a timeout) and
    partial pulling."""

    push_count: int | None = field(
        default=None,
        metadata={
            "doc": "c, the gradients of the current step a server waits for before its "
            "timeout starts; at most the number of workers.",
            "unset": "all workers",
            "values": ">= 1",
        },
    )
    push_wait_s: float = field(
        default=0.0,
        metadata={
            "doc": "tau1, seconds a server waits for more gradients once c arrived (0: "
            "applies at once).",
            "values": ">= 0",
        },
    )
    pull_fraction: float = field(
        default=1.0,
        metadata={
            "doc": "b, the share of the dense blocks a worker waits for when it pulls; it "
            "keeps its old copy of the others.",
            "values": "(0, 1]",
        },
    )
    pull_wait_s: float = field(
        default=0.0,
        metadata={
            "doc": "tau2, the least seconds a worker's pull waits, unless every block arrived.",
            "values": ">= 0",
        },
    )
    linear_scaling: bool = field(
        default=True,
        metadata={
            "doc": "Multiply the learning rate by d, the gradients a step applied (Goyal et al.)."
        },
    )

    name: ClassVar[str] = "psp"
    label: ClassVar[str] = "PSP"

    def __post_init__(self) -> None:
        if self.push_count is not None:
            check_positive_int("push_count", self.push_count)
        _check_seconds("push_wait_s", self.push_wait_s)
        fraction = self.pull_fraction
        ok = isinstance(fraction, int | float) and not isinstance(fraction, bool)
        if not (ok and 0 < fraction <= 1):
            raise ValueError(f"pull_fraction must be a number in (0, 1], got {fraction!r}")
        _check_seconds("pull_wait_s", self.pull_wait_s)
        if not isinstance(self.linear_scaling, bool):
            raise ValueError(f"linear_scaling must be a bool, got {self.linear_scaling!r}")

    def _params(self) -> str:
        c = "all" if self.push_count is None else str(self.push_count)
        scaling = "" if self.linear_scaling else " no-linear-scaling"
        return (
            f"c={c} tau1={self.push_wait_s:g}s b={self.pull_fraction:g} "
            f"tau2={self.pull_wait_s:g}s{scaling}"
        )

    def batches_per_step(self, num_workers: int) -> int:
        return num_workers

    def pull_rule(self) -> PartialPull:
        return PartialPull(self.pull_fraction, self.pull_wait_s)

    def make_server(self, num_workers: int, sparse: bool) -> PspServer:
        c = num_workers if self.push_count is None else self.push_count
        if c > num_workers:
            raise ValueError(f"push_count must be at most the number of workers ({num_workers})")
        return PspServer(num_workers, sparse, c, self.push_wait_s, self.linear_scaling)


class PspServer(GradientPolicy):
    """Partial pushing: the current timestamp's gradients, then one Apply of their mean."""

    def __init__(
        self,
        num_workers: int,
        sparse: bool = False,
        push_count: int = 1,
        push_wait_s: float = 0.0,
        linear_scaling: bool = True,
    ) -> None:
        super().__init__(num_workers, sparse)
        check_positive_int("push_count", push_count)
        _check_seconds("push_wait_s", push_wait_s)
        self.push_count = push_count
        self.push_wait_s = float(push_wait_s)
        self.linear_scaling = linear_scaling
        self.buffer: list[int] = []  # grad ids of timestamp self.version
        self.answered: set[int] = set()  # workers with a gradient in the buffer
        self.next_timer = 0
        self.armed: int | None = None  # the timer of the current step, if armed

    def on_push(self, push: Push) -> list[Action]:
        if push.version < self.version:  # t' < t: dropped; t' >= t counts (Alg. 1, line 7)
            return [Drop(push.grad_id, "old")]
        self.buffer.append(push.grad_id)
        self.answered.add(push.worker)
        return self._check()

    def on_worker_done(self, worker: int) -> list[Action]:
        super().on_worker_done(worker)
        return self._check()

    def on_timer(self, timer_id: int) -> list[Action]:
        if timer_id != self.armed or not self.buffer:
            return []
        return [self._flush()]

    def _check(self) -> list[Action]:
        if not self.buffer:
            return []
        waiting = sum(1 for w in range(self.num_workers) if w not in self.done | self.answered)
        if not waiting:
            return [self._flush()]
        # c is capped by the gradients this step can still get: a finished worker's gradient
        # already in the buffer counts, a finished worker's missing one never comes
        if self.armed is not None or len(self.buffer) < min(
            self.push_count, len(self.buffer) + waiting
        ):
            return []
        if self.push_wait_s == 0:
            return [self._flush()]
        self.armed = self.next_timer
        self.next_timer += 1
        return [StartTimer(self.armed, self.push_wait_s)]

    def _flush(self) -> Action:
        d = len(self.buffer)
        grads = [(grad_id, 1.0) for grad_id in self.buffer]
        self.buffer.clear()
        self.answered.clear()
        self.armed = None
        return self._apply(grads, d, d if self.linear_scaling else 1.0)


class PartialPull(PullRule):
    """PSP's worker side (004, Alg. 1): proceed once `fraction` of the blocks arrived and
    `wait_s` passed (or all arrived), keeping the previous copy of the missing blocks; a
    block or shard answers once it applied the step after the worker's last push there."""

    def __init__(self, fraction: float, wait_s: float) -> None:
        self.fraction = fraction
        self.wait_s = wait_s

    @property
    def keeps_blocks(self) -> bool:
        return self.fraction < 1.0

    def min_versions(self, last_pushed: list[int] | None) -> list[int] | None:
        return [v + 1 for v in last_pushed] if last_pushed else None

    def quorum(self, count: int) -> Quorum | None:
        need = max(1, math.ceil(self.fraction * count))
        return None if need >= count else Quorum(need, self.wait_s)

    def order(self, count: int, turn: int) -> list[int]:
        """Each pull starts one block further on: the first b% to arrive (requests leave and
        answers come back in order) are then not always the same blocks, so no block's copy
        is skipped at every step and left at its first value."""
        start = turn % count
        return [*range(start, count), *range(start)]

    def push_versions(self, versions: list[int]) -> list[int]:
        """Every block's gradient carries the worker's iteration t (Alg. 1, worker line 17):
        the newest version it pulled, also for a block it kept from an earlier step."""
        return [max(versions)] * len(versions)
