"""``backup_workers``: each global step applies the first N-b gradients of the current version.

Hop-BW (Luo et al., ASPLOS 2019, after the backup workers of Chen et al. 2016, "Revisiting
distributed synchronous SGD"), as a baseline of the GBA paper (001, section 5): it "ignores
the pre-set number of gradients from the slowest workers during each gradient aggregation".
With N workers and b backups the server waits for the first N-b gradients computed on its
current version, averages them and applies once; a gradient computed on an older version
arrives too late and is dropped (reason ``"late"``). Workers wait for the next version before
they start a step, as in ``sync``. When fewer than N-b workers remain active, a step needs as
many gradients as there are active workers; when all are done, a partial buffer is applied as
a last step.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from recsync.families.gradient.strategy import GradientStrategy
from recsync.strategy.gradient import Action, Drop, GradientPolicy, Push, check_positive_int


@dataclass(frozen=True)
class BackupWorkersConfig(GradientStrategy):
    """Backup workers (Hop-BW): every step applies the first gradients to arrive and ignores
    the slowest few.

    ``num_backup`` must be below the number of workers (checked by ``make_server``)."""

    num_backup: int = field(
        default=1,
        metadata={
            "doc": "b, the slowest gradients ignored per step; below the number of workers.",
            "values": ">= 0",
        },
    )

    name: ClassVar[str] = "backup_workers"
    label: ClassVar[str] = "Hop-BW"
    holds_workers: ClassVar[bool] = True
    barrier: ClassVar[bool] = True  # every step waits for the first N-b workers' gradients

    def __post_init__(self) -> None:
        check_positive_int("num_backup", self.num_backup, minimum=0)

    def _params(self) -> str:
        return f"b={self.num_backup}"

    def make_server(self, num_workers: int, sparse: bool) -> BackupWorkersServer:
        return BackupWorkersServer(num_workers, sparse, self.num_backup)

    def batches_per_step(self, num_workers: int) -> int:
        return num_workers


class BackupWorkersServer(GradientPolicy):
    """Buffers the current version's gradients; applies their mean once it holds N-b of
    them (fewer only when fewer workers can still push this version); drops gradients of
    older versions."""

    def __init__(self, num_workers: int, sparse: bool = False, num_backup: int = 1) -> None:
        super().__init__(num_workers, sparse)
        check_positive_int("num_backup", num_backup, minimum=0)
        if num_backup >= num_workers:
            raise ValueError(
                f"num_backup must be below the number of workers ({num_workers}), got {num_backup}"
            )
        self.num_backup = num_backup
        self.buffer: list[int] = []  # grad ids of version self.version, arrival order
        self.answered: set[int] = set()  # the workers of those gradients (one each)

    @property
    def needed(self) -> int:
        """Gradients that complete the current step: N-b, or fewer once so few workers can
        still push this version (those in the buffer, finished or not, and the active rest)."""
        waiting = sum(1 for w in range(self.num_workers) if w not in self.done | self.answered)
        return min(self.num_workers - self.num_backup, len(self.answered) + waiting)

    def on_push(self, push: Push) -> list[Action]:
        assert push.version <= self.version, (
            f"backup_workers: version {push.version} pushed, server at {self.version}"
        )
        if push.version < self.version:
            return [Drop(push.grad_id, "late")]
        assert push.worker not in self.answered, f"backup_workers: {push.worker} pushed twice"
        self.buffer.append(push.grad_id)
        self.answered.add(push.worker)
        return self._maybe_step()

    def on_worker_done(self, worker: int) -> list[Action]:
        super().on_worker_done(worker)
        return self._maybe_step()

    def may_start(self, worker: int, last_version: int | None) -> bool:
        return last_version is None or self.version > last_version

    def _maybe_step(self) -> list[Action]:
        if not self.buffer or len(self.buffer) < self.needed:
            return []
        grads = [(grad_id, 1.0) for grad_id in self.buffer]
        self.buffer.clear()
        self.answered.clear()
        return [self._apply(grads, len(grads))]
