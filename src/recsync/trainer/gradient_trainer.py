"""The trainer of the gradient family: m worker threads, each pulling the dense blocks and
pushing gradients (gradient_worker.py); the servers' policies decide what is applied."""

from __future__ import annotations

from collections.abc import Callable

import torch

from recsync.protocol.effects import Target
from recsync.protocol.node import LoopSpec, Node
from recsync.ps.layout import EmbeddingLayout
from recsync.sync.gradient import GradientStrategy
from recsync.trainer.gradient_worker import GradientWorker
from recsync.trainer.replica import DenseReplica
from recsync.trainer.stats import TrainerReport, TrainerStats, Wiring


class GradientTrainer(Node):
    """One trainer of a gradient strategy: its worker threads and their stats."""

    def __init__(
        self,
        index: int,
        num_workers: int,
        layout: EmbeddingLayout,
        strategy: GradientStrategy,
        wiring: Wiring,
        workspace: Callable[[], DenseReplica],
        initial: torch.Tensor | None = None,
    ):
        """`workspace()`: the dense module a worker computes on (a driver whose workers run
        one at a time hands every worker the same one). `initial`: the dense parameters the
        job starts from (a block a partial pull never waited for keeps them)."""
        if num_workers < 1:
            raise ValueError(f"trainer needs >= 1 worker thread, got {num_workers}")
        self.index, self.name, self.num_workers = index, f"trainer-{index}", num_workers
        self.stats = TrainerStats([0] * num_workers, [0] * num_workers)
        self.workers = [
            GradientWorker(
                index * num_workers + w,
                index,
                w,
                layout,
                strategy,
                wiring,
                self.stats,
                workspace(),
                initial,
            )
            for w in range(num_workers)
        ]

    def loops(self) -> list[LoopSpec]:
        return [LoopSpec(w.loop(), w.worker) for w in self.workers]

    def leave(self, worker: int) -> list[Target]:
        return self.workers[worker - self.index * self.num_workers].leave()

    def report(self) -> TrainerReport:
        return TrainerReport(self.stats)
