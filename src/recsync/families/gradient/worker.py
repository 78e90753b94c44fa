"""A worker thread of a gradient strategy: pull, compute, push; the servers decide the rest.

Step: (if the strategy holds workers) wait until every server lets this worker start ->
take a batch (and its GBA token) -> pooled lookup on the embedding shards (with the rows'
versions) -> pull the dense blocks into this worker's own copy -> forward/backward on
exactly the values pulled -> push the dense gradient blocks and the row gradients, each
tagged with the version it was computed from. When a step's pushes leave is the
strategy's: right after the step (GBA, PSP: a later push would change what the others pull
next); or with the next step's first requests, the step counted as trained then (a crash
before loses the batch, handed out again, not a gradient): a strategy that holds its
workers carries them on the next step's may-start requests (one call per server, the push
applied first); one that `defers_pushes` (async), once the next batch is in hand, sends
the dense blocks' alone and carries the row gradients on the next lookups (one call per
shard a step, not two; each push one round trip to the reader later). A cut that pauses
the reader sends what waits alone. How the pull goes (every block, or PSP's partial pull
that keeps the previous copy of a block it did not wait for) is the strategy's `PullRule`.
When the data runs out: send what is left, wait until the pushes landed, then tell every
server it is done. Free of transport: a generator of effects run by a driver.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass
from typing import Any

import torch

from recsync.families.gradient.messages import DenseBlock, PullDense, PushDenseGradient
from recsync.families.gradient.strategy import GradientStrategy
from recsync.optim.checks import all_finite
from recsync.protocol.effects import CallEach, Compute, Drain, Effect, Loop, Send, Target
from recsync.protocol.messages import MayStart, Message, PushRowGradients, WorkerDone
from recsync.protocol.reading import HandedBatch, NextBatch
from recsync.ps.layout import TableLayout
from recsync.trainer.replica import DenseReplica
from recsync.trainer.stats import TrainerStats, Wiring
from recsync.trainer.steps import (
    fused,
    row_gradient_messages,
    take_batch,
    versioned_lookup,
)


@dataclass
class UnsentPushes:
    """A step's pushes that have not left yet (per dense server, per shard), and what the
    step trained."""

    dense: list[PushDenseGradient]
    sparse: list[PushRowGradients]
    examples: int
    loss: float

    @property
    def in_server_order(self) -> list[Message]:
        """The dense servers' pushes, then the shards' (as `Wiring` lists the servers)."""
        return [*self.dense, *self.sparse]


class GradientWorker:
    """One worker thread: its own copy of the dense parameters (the blocks it last pulled).

    The gradient is computed on `workspace`, a dense module loaded with exactly those values
    right before the forward pass; drivers whose workers compute one at a time (the
    simulator) share one workspace among all of them.
    """

    def __init__(
        self,
        worker: int,
        trainer: int,
        thread: int,
        layout: TableLayout,
        strategy: GradientStrategy,
        wiring: Wiring,
        stats: TrainerStats,
        workspace: DenseReplica,
        initial: torch.Tensor | None = None,
    ):
        if not wiring.dense:
            raise ValueError(f"{strategy.describe()} needs at least one dense server")
        self.worker, self.trainer, self.thread = worker, trainer, thread
        self.layout, self.strategy, self.wiring = layout, strategy, wiring
        self.pull = strategy.pull_rule()
        self.workspace = workspace
        self.stats = stats
        ranges = wiring.dense_ranges
        bounds = [0] + [stop for _, stop in ranges]
        assert [start for start, _ in ranges] == bounds[:-1], ranges  # in order
        assert bounds[-1] == workspace.num_params, (bounds[-1], workspace.num_params)
        # only a partial pull reads a block pulled at an earlier step: otherwise the blocks
        # are let go after each step (1,000 simulated workers' copies add up)
        start: torch.Tensor | None = None
        if self.pull.keeps_blocks:  # a block never pulled yet is the job's starting value
            start = (workspace.flat if initial is None else initial).clone()
        self.blocks: list[torch.Tensor | None] = [
            None if start is None else start[a:b] for a, b in ranges
        ]
        self.versions = [0] * len(ranges)
        self.unsent: UnsentPushes | None = None

    def leave(self) -> list[Target]:
        """What every server must hear when this worker is gone: it pushes no more."""
        return [(server, WorkerDone(self.worker)) for server in self._servers()]

    def _servers(self) -> tuple[Any, ...]:
        return (*self.wiring.dense, *self.wiring.shards)

    def loop(self) -> Loop:
        last_dense: list[int] | None = None
        last_sparse: list[int] | None = None
        holds = self.strategy.holds_workers
        while True:
            if holds:
                yield CallEach(self._may_start(last_dense, last_sparse))
            pushed = yield from self._step(last_dense, last_sparse)
            if pushed is None:
                break
            last_dense, last_sparse = pushed
        assert self.unsent is None, "a step's pushes were never sent"
        yield Drain(self.worker)
        yield CallEach(self.leave())
        self.stats.finish(self.thread)

    def _take_unsent(self) -> UnsentPushes | None:
        """The previous step's pushes, counted as trained now: they leave with the call
        that takes them (a crash after this loses nothing)."""
        unsent, self.unsent = self.unsent, None
        if unsent is not None:
            self.stats.count_step(self.thread, unsent.examples, unsent.loss)
        return unsent

    def _flush(self) -> list[Target]:
        """The previous step's pushes, to send alone (a cut began, or the data ran out)."""
        unsent = self._take_unsent()
        if unsent is None:
            return []
        return list(zip(self._servers(), unsent.in_server_order, strict=True))

    def _may_start(
        self, last_dense: list[int] | None, last_sparse: list[int] | None
    ) -> list[Target]:
        """May-start requests to every server, each carrying the previous step's push there."""
        wiring = self.wiring
        dense: list[int | None] = [*last_dense] if last_dense else [None] * len(wiring.dense)
        sparse: list[int | None] = [*last_sparse] if last_sparse else [None] * len(wiring.shards)
        unsent = self._take_unsent()
        pushes: list[Message | None] = [None] * (len(dense) + len(sparse))
        if unsent is not None:
            pushes = [*unsent.in_server_order]
        return [
            fused(server, push, MayStart(self.worker, version))
            for server, version, push in zip(
                (*wiring.dense, *wiring.shards), (*dense, *sparse), pushes, strict=True
            )
        ]

    def _step(
        self, last_dense: list[int] | None, last_sparse: list[int] | None
    ) -> Generator[Effect, Any, tuple[list[int], list[int]] | None]:
        """One step -> the versions its push carries (None: no batch left). Its tensors are
        let go when it returns, not held while the worker waits for the next batch."""
        layout, workspace, wiring = self.layout, self.workspace, self.wiring
        pushed = self.stats.pushed(self.thread)
        request = NextBatch(self.trainer, with_token=True, worker=self.worker, pushed=pushed)
        handed: HandedBatch = yield from take_batch(
            wiring.reader, request, self.worker, self._flush, self.stats.receipts, self.thread
        )
        batch, token = handed.batch, handed.token
        if batch is None:
            left = self._flush()
            if left:
                yield Send(self.worker, left)
            self.stats.note_dry(self.thread)
            return None
        unsent = self._take_unsent() if self.strategy.defers_pushes else None
        if unsent is not None:
            yield Send(self.worker, list(zip(wiring.dense, unsent.dense, strict=True)))
        requests, replies, pooled = yield from versioned_lookup(
            layout,
            wiring.shards,
            batch,
            self.pull.min_versions(last_sparse),
            None if unsent is None else unsent.sparse,
        )
        wanted = self.pull.min_versions(last_dense)
        order = self.pull.order(len(wiring.dense), self.worker + pushed)
        pulls: list[Target] = [
            (wiring.dense[b], PullDense(0 if wanted is None else wanted[b])) for b in order
        ]
        blocks: list[DenseBlock | None] = yield CallEach(pulls, self.pull.quorum(len(pulls)))
        for b, block in zip(order, blocks, strict=True):
            if block is not None:
                self.blocks[b], self.versions[b] = block.values, block.version
        torch.cat(self.blocks, out=workspace.writer)  # type: ignore[arg-type]
        if not self.pull.keeps_blocks:
            self.blocks = [None] * len(self.blocks)
        loss, flat_grad, grad_pooled = workspace.gradients(batch, pooled)
        if not (all_finite(flat_grad) and all_finite(grad_pooled)):
            raise ValueError(
                f"worker {self.worker}: NaN or infinite gradient (loss {float(loss):g}); the "
                "batch holds NaN or training diverged"
            )
        yield Compute(batch.batch_size, applies=False)
        sparse = row_gradient_messages(layout, requests, replies, grad_pooled, self.worker, token)
        tags = self.pull.push_versions(self.versions)
        dense = [
            PushDenseGradient(self.worker, tags[b], flat_grad[start:stop], token)
            for b, (start, stop) in enumerate(wiring.dense_ranges)
        ]
        pushes = UnsentPushes(dense, sparse, batch.batch_size, float(loss))
        if self.strategy.holds_workers or self.strategy.defers_pushes:
            self.unsent = pushes  # they leave with the next step's first requests
        else:
            self.stats.count_step(self.thread, pushes.examples, pushes.loss)
            servers = self._servers()
            yield Send(self.worker, list(zip(servers, pushes.in_server_order, strict=True)))
        return tags, [reply.version for reply in replies]
