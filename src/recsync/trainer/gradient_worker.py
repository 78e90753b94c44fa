"""A worker thread of a gradient strategy: pull, compute, push; the servers decide the rest.

Step: (if the strategy holds workers) wait until every server lets this worker start ->
take a batch (and its GBA token) -> pooled lookup on the embedding shards (with the rows'
versions) -> pull the dense blocks into this worker's own copy -> forward/backward on
exactly the values pulled -> push the dense gradient blocks and the row gradients, each
tagged with the version it was computed from. How the pull goes (every block, or PSP's
partial pull that keeps the previous copy of a block it did not wait for) is the strategy's
`PullRule`. When the data runs out: wait until its pushes landed, then tell every server it
is done. Free of transport: a generator of effects run by a driver.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import torch

from recsync.optim.checks import all_finite
from recsync.protocol.effects import Call, CallEach, Compute, Drain, Effect, Loop, Send, Target
from recsync.protocol.messages import (
    DenseBlock,
    HandedBatch,
    MayStart,
    NextBatch,
    PullDense,
    PushDenseGradient,
    WorkerDone,
)
from recsync.ps.layout import EmbeddingLayout
from recsync.sync.gradient import GradientStrategy
from recsync.trainer.replica import DenseReplica
from recsync.trainer.stats import TrainerStats, Wiring
from recsync.trainer.steps import row_gradient_pushes, versioned_lookup


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
        layout: EmbeddingLayout,
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
        yield Drain(self.worker)
        yield CallEach(self.leave())
        self.stats.finish(self.thread)

    def _may_start(
        self, last_dense: list[int] | None, last_sparse: list[int] | None
    ) -> list[Target]:
        wiring = self.wiring
        dense: list[int | None] = [*last_dense] if last_dense else [None] * len(wiring.dense)
        sparse: list[int | None] = [*last_sparse] if last_sparse else [None] * len(wiring.shards)
        return [
            (server, MayStart(self.worker, version))
            for server, version in zip(
                (*wiring.dense, *wiring.shards), (*dense, *sparse), strict=True
            )
        ]

    def _step(
        self, last_dense: list[int] | None, last_sparse: list[int] | None
    ) -> Generator[Effect, Any, tuple[list[int], list[int]] | None]:
        """One step -> the versions its push carried (None: no batch left). Its tensors are
        let go when it returns, not held while the worker waits for the next batch."""
        layout, workspace, wiring = self.layout, self.workspace, self.wiring
        handed: HandedBatch = yield Call(wiring.reader, NextBatch(self.trainer, with_token=True))
        batch, token = handed.batch, handed.token
        if batch is None:
            self.stats.note_dry(self.thread)
            return None
        requests, replies, pooled = yield from versioned_lookup(
            layout, wiring.shards, batch, self.pull.min_versions(last_sparse)
        )
        wanted = self.pull.min_versions(last_dense)
        pulls: list[Target] = [
            (server, PullDense(0 if wanted is None else wanted[b]))
            for b, server in enumerate(wiring.dense)
        ]
        blocks: list[DenseBlock | None] = yield CallEach(pulls, self.pull.quorum(len(pulls)))
        for b, block in enumerate(blocks):
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
        yield Compute(batch.batch_size)
        sparse = row_gradient_pushes(
            layout, wiring.shards, requests, replies, grad_pooled, self.worker, token
        )
        dense: list[Target] = [
            (server, PushDenseGradient(self.worker, self.versions[b], flat_grad[start:stop], token))
            for b, (server, (start, stop)) in enumerate(
                zip(wiring.dense, wiring.dense_ranges, strict=True)
            )
        ]
        self.stats.count_step(self.thread, batch.batch_size, float(loss))
        yield Send(self.worker, [*dense, *sparse])
        return list(self.versions), [reply.version for reply in replies]
