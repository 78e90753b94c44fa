"""The trainer of the replica family (ShadowSync): m Hogwild worker threads over one local
dense replica, synced by the strategy (replica_sync.py).

Worker step: take batch -> pooled lookups on the embedding servers, each call carrying
the previous step's row gradients for that server (applied on arrival, before the lookup)
-> dense forward/backward on the replica -> local dense step -> maybe a foreground sync
(fixed timing). The last step's row gradients are sent when the data runs out. Free of
transport: the loops are generators of effects run by a driver.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator
from dataclasses import dataclass
from typing import Any

import torch

from recsync.families.replica.replica_sync import PROGRESS, REQUESTS, process_refusal, replica_sync
from recsync.families.synced_replicas.strategy import ReplicaStrategy
from recsync.optim.state import copy_state
from recsync.protocol.address import Address
from recsync.protocol.effects import (
    CallEach,
    Compute,
    Effect,
    Loop,
    Notify,
    Now,
    Send,
    Target,
)
from recsync.protocol.messages import PushRows
from recsync.protocol.node import LoopSpec
from recsync.protocol.reading import HandedBatch, NextBatch
from recsync.ps.shard import row_gradients_with_inverse
from recsync.trainer.stats import ReceivingTrainer, TrainerReport, TrainerSetup, TrainerStats
from recsync.trainer.steps import pushes_with_lookups, take_batch


@dataclass
class UnsentStep:
    """A worker's step whose row gradients (per shard) have not left yet."""

    pushes: dict[int, PushRows]
    examples: int
    loss: float


def _targets(shards: tuple[Address, ...], step: UnsentStep) -> Iterator[Target]:
    """The step's row gradients alone (the worker's data ran out: no lookup follows)."""
    return ((shards[s], push) for s, push in step.pushes.items())


class ReplicaTrainer(ReceivingTrainer):
    """One trainer's replica, its worker loops and its strategy's sync."""

    def __init__(self, setup: TrainerSetup, strategy: ReplicaStrategy):
        self.setup, self.strategy = setup, strategy
        self.index, self.name = setup.index, setup.name
        self.num_trainers, self.num_workers = setup.num_trainers, setup.num_workers
        self.layout, self.wiring = setup.layout, setup.wiring
        self.stats = TrainerStats(setup.num_workers)
        self.replica = setup.replica()
        self.unsent: list[UnsentStep | None] = [None] * setup.num_workers
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
                yield from self.sync.foreground(thread)
        self.stats.finish(thread)
        yield Notify(PROGRESS)
        yield Notify(REQUESTS)

    def _step(self, thread: int) -> Generator[Effect, Any, bool]:
        """One Hogwild step -> False when no batch is left. Its row gradients leave with the
        next step's lookups (one call per shard per step); its tensors are let go when they
        have left, not held while the thread waits for its next batch."""
        layout, replica, shards = self.layout, self.replica, self.wiring.shards
        worker = self.setup.first_worker + thread
        request = NextBatch(
            self.index,
            worker=worker,
            pushed=self.stats.pushed(thread),
            incarnation=self.setup.incarnation,
        )
        handed: HandedBatch = yield from take_batch(
            self.wiring.reader,
            request,
            worker,
            lambda: self._flush(thread),
            self.stats.receipts,
            thread,
        )
        batch = handed.batch
        previous, self.unsent[thread] = self.unsent[thread], None
        if batch is None:
            if previous is not None:
                self._count(thread, previous)
                yield Send(self.setup.first_worker + thread, list(_targets(shards, previous)))
            self.stats.note_dry(thread)
            return False
        requests = layout.route(batch)
        pushes = {} if previous is None else previous.pushes
        calls, alone = pushes_with_lookups(shards, requests, pushes)
        if previous is not None:
            self._count(thread, previous)
        if alone:
            yield Send(self.setup.first_worker + thread, alone)
        replies = yield CallEach(calls)
        yield Notify(PROGRESS)  # the previous step is counted by now
        pooled = layout.combine(batch.batch_size, requests, [reply.pooled for reply in replies])
        loss, flat_grad, grad_pooled = replica.gradients(batch, pooled)
        yield Compute(batch.batch_size)
        replica.apply(flat_grad)
        step = UnsentStep({}, batch.batch_size, float(loss))
        for r, grad_bags in zip(
            requests, layout.requests_gradients(grad_pooled, requests), strict=True
        ):
            rows, grads, _ = row_gradients_with_inverse(
                r.rows, r.offsets, grad_bags, r.weights, r.one_per_bag
            )
            step.pushes[r.shard] = PushRows(rows, layout.wire_grads(r.shard, rows, grads))
        self.unsent[thread] = step
        return True

    def _flush(self, thread: int) -> list[Target]:
        """The thread's last step's row gradients, to send alone (a cut began)."""
        previous, self.unsent[thread] = self.unsent[thread], None
        if previous is None:
            return []
        self._count(thread, previous)
        return list(_targets(self.wiring.shards, previous))

    def _count(self, thread: int, step: UnsentStep) -> None:
        """A step whose row gradients leave now: trained (a crash after this loses nothing)."""
        self.stats.count_step(thread, step.examples, step.loss)

    def shared_tensors(self) -> dict[str, torch.Tensor]:
        """The replica, its optimizer state and the stats: what worker processes share
        (the sync's own state stays with the loop that syncs)."""
        refusal = process_refusal(self.strategy)
        assert refusal is None, refusal
        return {**self.replica.tensors(), "stats": self.stats.table}

    def share(self, tensors: dict[str, torch.Tensor]) -> None:
        self.replica.rebind({k: v for k, v in tensors.items() if k != "stats"})
        self.stats.table = tensors["stats"]

    def report(self) -> TrainerReport:
        return TrainerReport(
            self.stats.detached(),
            self.replica.flat.clone(),
            copy_state(self.replica.optimizer.state_dict()),
        )
