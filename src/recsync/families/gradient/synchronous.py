"""``sync``: synchronous SGD on a parameter server (bulk synchronous, one gradient per worker).

The synchronous baseline of the GBA paper (001, "synchronous training", global batch =
local batch x number of workers): a global step aggregates exactly one gradient from every
active worker, all computed on the current version, averages them and applies once; a
worker may begin its next step only once the server moved past the version it pushed for,
so nobody runs ahead. A worker that finishes (data consumed) or fails stops counting: the
step completes with the gradients of the workers still active (plus any the finished worker
pushed for this version before it left).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from recsync.families.gradient.strategy import GradientStrategy
from recsync.strategy.gradient import Action, GradientPolicy, Push


@dataclass(frozen=True)
class SyncConfig(GradientStrategy):
    """Synchronous SGD: every active worker contributes one gradient per global step; no
    other key."""

    name: ClassVar[str] = "sync"
    label: ClassVar[str] = "sync"
    holds_workers: ClassVar[bool] = True
    barrier: ClassVar[bool] = True

    def make_server(self, num_workers: int, sparse: bool) -> SyncServer:
        return SyncServer(num_workers, sparse)

    def batches_per_step(self, num_workers: int) -> int:
        return num_workers


class SyncServer(GradientPolicy):
    """Buffers the current version's gradients, one per worker; applies their mean once every
    active worker has pushed. Workers wait for the next version (``may_start``)."""

    def __init__(self, num_workers: int, sparse: bool = False) -> None:
        super().__init__(num_workers, sparse)
        self.buffer: dict[int, int] = {}  # worker -> grad_id, all of version self.version

    def on_push(self, push: Push) -> list[Action]:
        assert push.version == self.version, (
            f"sync: worker {push.worker} pushed version {push.version}, server at {self.version}"
        )
        assert push.worker not in self.buffer, f"sync: worker {push.worker} pushed twice"
        self.buffer[push.worker] = push.grad_id
        return self._maybe_step()

    def on_worker_done(self, worker: int) -> list[Action]:
        super().on_worker_done(worker)
        return self._maybe_step()

    def may_start(self, worker: int, last_version: int | None) -> bool:
        return last_version is None or self.version > last_version

    def _maybe_step(self) -> list[Action]:
        if not self.buffer:
            return []
        waiting = [
            w for w in range(self.num_workers) if w not in self.done and w not in self.buffer
        ]
        if waiting:
            return []
        grads = [(grad_id, 1.0) for grad_id in self.buffer.values()]
        self.buffer.clear()
        return [self._apply(grads, len(grads))]
