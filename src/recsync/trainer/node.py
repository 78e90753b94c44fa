"""A trainer node: m worker loops over one local dense replica, and one sync loop.

Worker loop (one per Hogwild worker thread): take batch -> pull pooled embeddings ->
dense forward/backward on the replica -> local dense step -> push row gradients -> maybe a
foreground sync (fixed timing). Sync loop (the shadow thread): background sync as the
strategy says, never blocking the workers. Both are generators of effects (see effects.py),
run by a driver: the simulator or the Ray engine.
"""

from __future__ import annotations

import math
from collections.abc import Generator
from dataclasses import dataclass
from typing import Any

import torch

from recsync.model.spec import ModelSpec
from recsync.optim.train_spec import TrainSpec
from recsync.ps.layout import EmbeddingLayout
from recsync.ps.shard import row_gradients
from recsync.sync.replica import FixedTrigger
from recsync.trainer.allreduce_worker import allreduce_loop
from recsync.trainer.effects import (
    AllReduce,
    AwaitIterations,
    AwaitSyncRequest,
    Compute,
    Effect,
    Exchange,
    Lookup,
    NextBatch,
    Now,
    PushSparse,
    RequestSync,
    SyncRoundDone,
)
from recsync.trainer.gradient_worker import GradientWorker
from recsync.trainer.replica import DenseReplica

Loop = Generator[Effect, Any, None]


@dataclass
class TrainerStats:
    """What one trainer did: per worker thread iterations and examples, loss, syncs."""

    iterations: list[int]
    examples: list[int]
    loss_sum: float = 0.0
    syncs: int = 0
    workers_done: int = 0

    @property
    def total_examples(self) -> int:
        return sum(self.examples)

    @property
    def total_iterations(self) -> int:
        return sum(self.iterations)


class TrainerNode:
    """One trainer's replica, strategy policy and loops; free of any transport."""

    def __init__(
        self,
        index: int,
        num_trainers: int,
        num_workers: int,
        model: ModelSpec,
        train: TrainSpec,
        layout: EmbeddingLayout,
        strategy,
        dense_ranges: list[tuple[int, int]] | None = None,
        workspace: DenseReplica | None = None,
        initial: tuple[torch.Tensor, dict] | None = None,
    ):
        """`workspace`: for gradient strategies, a dense module all worker threads may share
        (drivers whose workers compute one at a time); None gives each thread its own.
        `initial`: dense parameters and optimizer state to start the replica from (resume)."""
        if num_workers < 1:
            raise ValueError(f"trainer needs >= 1 worker thread, got {num_workers}")
        self.index = index
        self.num_trainers = num_trainers
        self.num_workers = num_workers
        self.layout = layout
        self.strategy = strategy
        self.dense_ranges = dense_ranges or []
        self.stats = TrainerStats([0] * num_workers, [0] * num_workers)
        self.replica = self.policy = self._shared_trigger = None
        self.gradient_workers: list[GradientWorker] = []
        if strategy.needs == "dense_servers":
            self.gradient_workers = [
                GradientWorker(
                    index * num_workers + w,
                    index,
                    model,
                    train,
                    layout,
                    strategy,
                    self.dense_ranges,
                    self.stats,
                    w,
                    workspace,
                    None if initial is None else initial[0],
                )
                for w in range(num_workers)
            ]
            return
        self.replica = DenseReplica(model, train.seed, train.dense_optimizer)
        if initial is not None:
            self.replica.load_flat(initial[0])
            self.replica.optimizer.load_state_dict(initial[1])
        if self.gradient_allreduce:
            if num_workers != 1:
                raise ValueError(
                    f"{strategy.describe()} runs one worker per trainer (a rank): set "
                    f"cluster.workers_per_trainer = 1, got {num_workers}"
                )
            return
        if strategy.needs != "none":
            self.policy = strategy.make_replica(self.replica.flat.clone())
        if strategy.needs == "center" and not dense_ranges:
            raise ValueError(f"{strategy.describe()} needs at least one sync server")
        timing = strategy.timing
        # every P seconds is a per-trainer rate: one trigger shared by the worker threads
        if timing.every_seconds is not None:
            self._shared_trigger = FixedTrigger(timing)

    @property
    def gradient_allreduce(self) -> bool:
        return self.strategy.gradient_allreduce

    @property
    def fixed(self) -> bool:
        if self.replica is None or self.gradient_allreduce:
            return False
        return self.strategy.timing.mode == "fixed"

    @property
    def workers_finished(self) -> bool:
        return self.stats.workers_done == self.num_workers

    def worker_loop(self, thread: int) -> Loop:
        """One Hogwild worker thread: steps until the reader has no more batches."""
        if self.gradient_workers or self.gradient_allreduce:
            loop = self.gradient_workers[thread].loop() if self.gradient_workers else None
            yield from loop or allreduce_loop(self)
            self.stats.workers_done += 1
            return
        trigger = self._shared_trigger
        if trigger is None and self.fixed:
            trigger = FixedTrigger(self.strategy.timing)
        while (yield from self._replica_step(thread)):
            if trigger is not None and trigger.after_iteration((yield Now())):
                if self.strategy.needs == "center":
                    yield from self.easgd_round()
                elif self.strategy.needs == "allreduce":
                    yield RequestSync()
        self.stats.workers_done += 1

    def _replica_step(self, thread: int) -> Generator[Effect, Any, bool]:
        """One Hogwild step -> False when no batch is left. Its tensors are let go when it
        returns, not held while the thread waits for its next batch."""
        layout, replica = self.layout, self.replica
        batch = yield NextBatch(self.index)
        if batch is None:
            return False
        requests = layout.route(batch)
        partials = yield Lookup(requests)
        pooled = layout.combine(batch.batch_size, requests, partials)
        loss, flat_grad, grad_pooled = replica.gradients(batch, pooled)
        yield Compute(batch.batch_size)
        replica.apply(flat_grad)
        updates = []
        for r, grad_bags in zip(
            requests, layout.requests_gradients(grad_pooled, requests), strict=True
        ):
            rows, grads = row_gradients(r.rows, r.offsets, grad_bags, r.weights)
            updates.append((r.shard, rows, grads))
        # counted as trained once its updates leave: a crash after this loses nothing
        self.stats.iterations[thread] += 1
        self.stats.examples[thread] += batch.batch_size
        self.stats.loss_sum += float(loss) * batch.batch_size
        yield PushSparse(updates)
        return True

    def sync_loop(self) -> Loop:
        """The shadow thread. For collectives it also serves fixed-rate requests, and keeps
        joining rounds after its workers finish until every trainer's workers have."""
        needs = self.strategy.needs
        if needs in ("none", "dense_servers") or self.gradient_allreduce:
            return
        if needs == "center" and self.fixed:
            return
        pace = math.ceil(self.strategy.timing.shadow_min_gap * self.num_workers)
        if needs == "center":
            while not self.workers_finished:
                target = self.stats.total_iterations + pace
                yield from self.easgd_round()
                if pace:
                    yield AwaitIterations(target)
            return
        while True:
            target = self.stats.total_iterations + pace
            if self.fixed:
                yield AwaitSyncRequest()
            done = self.workers_finished
            average, num_done = yield AllReduce(self.replica.flat.clone(), done)
            self.policy.apply(self.replica.writer, average)
            self.stats.syncs += 1
            if self.fixed:
                yield SyncRoundDone()
            if num_done == self.num_trainers:
                return
            if pace and not self.fixed and not self.workers_finished:
                yield AwaitIterations(target)

    def easgd_round(self) -> Loop:
        """Exchange every slice of the replica with its sync server (ShadowSync Alg. 2)."""
        for server, (start, stop) in enumerate(self.dense_ranges):
            center = yield Exchange(server, self.replica.flat[start:stop].clone())
            self.policy.apply(self.replica.writer[start:stop], center)
        self.stats.syncs += 1

    def state(self) -> torch.Tensor | None:
        """A copy of the trainer's dense replica (None: the dense part is on dense servers)."""
        return None if self.replica is None else self.replica.flat.clone()
