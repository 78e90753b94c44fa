"""Which loops of a node a node actor runs (a node whose worker loops run in processes of
their own is hosted by several actors)."""

from __future__ import annotations

from dataclasses import dataclass

from recsync.protocol.node import LoopSpec
from recsync.runtime.ray.wakeup import wake_path


@dataclass(frozen=True)
class Part:
    """Which loops of a node whose worker loops run in processes of their own an actor runs:
    `worker` None: the home, which creates the shared state at `path` and runs the node's
    other loops (a shadow sync); else the loop of that (job-wide) worker."""

    path: str
    worker: int | None = None

    def runs(self, loop: LoopSpec) -> bool:
        return loop.worker == self.worker

    @property
    def wake_path(self) -> str:
        return wake_path(self.path)
