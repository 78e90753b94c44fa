"""The trainer of the replica family (ShadowSync): m Hogwild worker threads over one local
dense replica, synced by the strategy (replica_sync.py).

Worker step: take batch -> pooled lookups on the embedding servers -> dense
forward/backward on the replica -> local dense step -> push row gradients (applied on
arrival) -> maybe a foreground sync (fixed timing). Free of transport: the loops are
generators of effects run by a driver.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from recsync.optim.state import copy_state
from recsync.protocol.effects import (
    Call,
    CallEach,
    Compute,
    Effect,
    Loop,
    Notify,
    Now,
    Send,
    Target,
)
from recsync.protocol.messages import HandedBatch, NextBatch, PushRows
from recsync.protocol.node import LoopSpec, Node
from recsync.ps.shard import row_gradients
from recsync.sync.replica import ReplicaStrategy
from recsync.trainer.replica_sync import PROGRESS, REQUESTS, replica_sync
from recsync.trainer.stats import TrainerReport, TrainerSetup, TrainerStats
from recsync.trainer.steps import lookups


class ReplicaTrainer(Node):
    """One trainer's replica, its worker loops and its strategy's sync."""

    def __init__(self, setup: TrainerSetup, strategy: ReplicaStrategy):
        self.setup, self.strategy = setup, strategy
        self.index, self.name = setup.index, setup.name
        self.num_trainers, self.num_workers = setup.num_trainers, setup.num_workers
        self.layout, self.wiring = setup.layout, setup.wiring
        self.stats = TrainerStats([0] * setup.num_workers, [0] * setup.num_workers)
        self.replica = setup.replica()
        self.sync = replica_sync(self)

    @property
    def workers_finished(self) -> bool:
        return self.stats.workers_done == self.num_workers

    def loops(self) -> list[LoopSpec]:
        first = self.setup.first_worker
        specs = [LoopSpec(self.worker_loop(w), first + w) for w in range(self.num_workers)]
        sync_loop = self.sync.loop()
        if sync_loop is not None:
            specs.append(LoopSpec(sync_loop, None, background=True))
        return specs

    def worker_loop(self, thread: int) -> Loop:
        """One Hogwild worker thread: steps until the reader has no more batches."""
        trigger = self.sync.trigger()
        while (yield from self._step(thread)):
            if trigger is not None and trigger.after_iteration((yield Now())):
                yield from self.sync.foreground()
        self.stats.workers_done += 1
        yield Notify(PROGRESS)
        yield Notify(REQUESTS)

    def _step(self, thread: int) -> Generator[Effect, Any, bool]:
        """One Hogwild step -> False when no batch is left. Its tensors are let go when it
        returns, not held while the thread waits for its next batch."""
        layout, replica, shards = self.layout, self.replica, self.wiring.shards
        yield Notify(PROGRESS)  # the previous iteration is counted by now
        handed: HandedBatch = yield Call(self.wiring.reader, NextBatch(self.index))
        batch = handed.batch
        if batch is None:
            self.stats.note_dry()
            return False
        requests = layout.route(batch)
        replies = yield CallEach(lookups(shards, requests))
        pooled = layout.combine(batch.batch_size, requests, [r.pooled for r in replies])
        loss, flat_grad, grad_pooled = replica.gradients(batch, pooled)
        yield Compute(batch.batch_size)
        replica.apply(flat_grad)
        pushes: list[Target] = []
        for r, grad_bags in zip(
            requests, layout.requests_gradients(grad_pooled, requests), strict=True
        ):
            rows, grads = row_gradients(r.rows, r.offsets, grad_bags, r.weights)
            pushes.append((shards[r.shard], PushRows(rows, grads)))
        self.stats.count_step(thread, batch.batch_size, float(loss))
        yield Send(self.setup.first_worker + thread, pushes)
        return True

    def report(self) -> TrainerReport:
        return TrainerReport(
            self.stats,
            self.replica.flat.clone(),
            copy_state(self.replica.optimizer.state_dict()),
        )
