"""The trainer of the gradient family: m worker threads, each pulling the dense blocks and
pushing gradients (gradient_worker.py); the servers' policies decide what is applied."""

from __future__ import annotations

from collections.abc import Callable

import torch

from recsync.families.gradient.strategy import GradientStrategy
from recsync.families.gradient.worker import GradientWorker
from recsync.protocol.effects import Target
from recsync.protocol.node import LoopSpec
from recsync.trainer.replica import DenseReplica
from recsync.trainer.stats import ReceivingTrainer, TrainerReport, TrainerSetup, TrainerStats


class GradientTrainer(ReceivingTrainer):
    """One trainer of a gradient strategy: its worker threads and their stats."""

    def __init__(
        self,
        setup: TrainerSetup,
        strategy: GradientStrategy,
        workspace: Callable[[], DenseReplica],
    ):
        """`workspace()`: the dense module a worker computes on (a driver whose workers run
        one at a time hands every worker the same one). A block a partial pull never waited
        for keeps the job's starting value (`setup.initial`, or the model's)."""
        m = setup.num_workers
        self.index, self.name, self.num_workers = setup.index, setup.name, m
        self.first_worker = setup.first_worker
        self.stats = TrainerStats(m)
        start = None if setup.initial is None else setup.initial[0]
        self.workers = [
            GradientWorker(
                self.first_worker + w,
                setup.index,
                w,
                setup.layout,
                strategy,
                setup.wiring,
                self.stats,
                workspace(),
                start,
            )
            for w in range(m)
        ]

    def loops(self) -> list[LoopSpec]:
        return [LoopSpec(w.loop(), w.worker) for w in self.workers]

    def leave(self, worker: int) -> list[Target]:
        return self.workers[worker - self.first_worker].leave()

    def shared_tensors(self) -> dict[str, torch.Tensor]:
        """Only the stats: each worker keeps its own copy of the dense part."""
        return {"stats": self.stats.table}

    def share(self, tensors: dict[str, torch.Tensor]) -> None:
        self.stats.table = tensors["stats"]

    def report(self) -> TrainerReport:
        return TrainerReport(self.stats.detached())
