"""The trainer of `allreduce`: one worker (a rank) on its dense replica.

Step: wait until every embedding shard applied the previous step -> take a batch ->
pooled lookup -> forward/backward on the replica -> all-reduce the dense gradient -> apply
the mean to the replica (every replica applies the same) -> push row gradients (aggregated
per step by the shards). A rank out of data keeps joining the all-reduce rounds with zeros
until every rank is out, so the others are never left waiting; the mean divides by the
ranks that contributed.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import torch

from recsync.families.allreduce.strategy import AllReduceStrategy
from recsync.optim.state import copy_state
from recsync.protocol.effects import (
    AllReduce,
    CallEach,
    Compute,
    Drain,
    Effect,
    Loop,
    Send,
    Target,
)
from recsync.protocol.messages import MayStart, WorkerDone
from recsync.protocol.node import LoopSpec
from recsync.protocol.reading import HandedBatch, NextBatch
from recsync.trainer.stats import ReceivingTrainer, TrainerReport, TrainerSetup, TrainerStats
from recsync.trainer.steps import (
    nothing_to_flush,
    row_gradient_pushes,
    take_batch,
    versioned_lookup,
)


class AllReduceTrainer(ReceivingTrainer):
    """One rank: a dense replica kept equal to the others' by all-reducing gradients."""

    def __init__(self, setup: TrainerSetup, strategy: AllReduceStrategy):
        if setup.num_workers != 1:
            raise ValueError(
                f"{strategy.describe()} runs one worker per trainer (a rank): set "
                f"cluster.workers_per_trainer = 1, got {setup.num_workers}"
            )
        self.index, self.name, self.num_trainers = setup.index, setup.name, setup.num_trainers
        self.layout, self.wiring = setup.layout, setup.wiring
        self.stats = TrainerStats(1)
        self.replica = setup.replica()

    def loops(self) -> list[LoopSpec]:
        return [LoopSpec(self._loop(), self.index)]

    def leave(self, worker: int) -> list[Target]:
        return [(shard, WorkerDone(self.index)) for shard in self.wiring.shards]

    def _loop(self) -> Loop:
        rank, shards = self.index, self.wiring.shards
        last_sparse: list[int] | None = None
        while True:
            versions: list[int | None] = [*last_sparse] if last_sparse else [None] * len(shards)
            yield CallEach([(s, MayStart(rank, v)) for s, v in zip(shards, versions, strict=True)])
            last_sparse = yield from self._step()
            if last_sparse is None:
                break
        yield Drain(rank)
        yield CallEach(self.leave(rank))
        zeros = torch.zeros(self.replica.num_params)
        num_done = 0
        while num_done < self.num_trainers:
            _, num_done = yield AllReduce(zeros, True)
        self.stats.finish(0)

    def _step(self) -> Generator[Effect, Any, list[int] | None]:
        """One step -> its shards' versions at the lookup (None: no batch left). Its tensors
        are let go when it returns, not held while the rank waits for its next batch."""
        layout, replica, n, rank = self.layout, self.replica, self.num_trainers, self.index
        request = NextBatch(rank, with_token=True, worker=rank, pushed=self.stats.pushed(0))
        handed: HandedBatch = yield from take_batch(
            self.wiring.reader, request, rank, nothing_to_flush, self.stats.receipts, 0
        )
        batch = handed.batch
        if batch is None:
            self.stats.note_dry(0)
            return None
        requests, replies, pooled = yield from versioned_lookup(layout, self.wiring.shards, batch)
        loss, flat_grad, grad_pooled = replica.gradients(batch, pooled)
        yield Compute(batch.batch_size)
        mean, num_done = yield AllReduce(flat_grad, False)
        replica.apply(mean * (n / (n - num_done)))  # the mean over the ranks with data
        pushes = row_gradient_pushes(
            layout, self.wiring.shards, requests, replies, grad_pooled, rank, None
        )
        self.stats.count_step(0, batch.batch_size, float(loss))
        yield Send(rank, pushes)
        self.stats.count_sync(0)
        return [reply.version for reply in replies]

    def report(self) -> TrainerReport:
        return TrainerReport(
            self.stats.detached(),
            self.replica.flat.clone(),
            copy_state(self.replica.optimizer.state_dict()),
        )
