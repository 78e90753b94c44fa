"""A worker thread of a gradient strategy: pull, compute, push; the servers decide the rest.

Step: wait until every server lets this worker start -> take a batch (and, for GBA, its
token) -> pooled lookup on the embedding shards (with the rows' versions) -> pull the dense
blocks into this worker's own copy -> forward/backward on exactly the values pulled -> push
the dense gradient blocks and the row gradients, each tagged with the version it was
computed from. A block the partial pull (PSP) did not wait for keeps its previous copy and
previous version. Free of transport: a generator of effects run by a driver.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import torch

from recsync.model.spec import ModelSpec
from recsync.optim.checks import all_finite
from recsync.optim.train_spec import TrainSpec
from recsync.ps.layout import EmbeddingLayout, ShardRequest
from recsync.ps.shard import row_gradients_with_inverse
from recsync.trainer import effects as fx
from recsync.trainer.replica import DenseReplica

EMPTY_ROWS = torch.empty(0, dtype=torch.int64)


def empty_request(shard: int) -> ShardRequest:
    return ShardRequest(shard, EMPTY_ROWS, torch.zeros(1, dtype=torch.int64), None, EMPTY_ROWS)


def unique_row_versions(versions: torch.Tensor, inverse: torch.Tensor, count: int) -> torch.Tensor:
    """Each of `count` unique rows' version at the pull, from the N per-id versions and each
    id's index among the unique rows (an id's duplicates were read at once: same version)."""
    return torch.empty(count, dtype=torch.int64).scatter_(0, inverse, versions)


def pooled_lookup(
    layout: EmbeddingLayout, batch, min_versions: list[int] | None = None
) -> Generator[fx.Effect, Any, tuple[list[ShardRequest], list, torch.Tensor]]:
    """Effects of one lookup on every shard (an empty request where the batch has no row
    there), with the rows' versions -> (requests, answers, B x F x D pooled embeddings)."""
    routed = {r.shard: r for r in layout.route(batch)}
    requests = [routed.get(s) or empty_request(s) for s in range(layout.num_shards)]
    answers = yield fx.Lookup(requests, with_versions=True, min_versions=min_versions)
    used = [i for i, r in enumerate(requests) if r.bag_index.numel()]
    pooled = layout.combine(
        batch.batch_size, [requests[i] for i in used], [answers[i][0] for i in used]
    )
    return requests, answers, pooled


def row_pushes(
    layout: EmbeddingLayout, requests: list[ShardRequest], answers: list, grad_pooled
) -> list[tuple[int, int, torch.Tensor, torch.Tensor, torch.Tensor]]:
    """Per shard: (shard, its version at the lookup, unique rows, their gradients, their
    versions at the lookup); empty where the batch had no row there."""
    sparse = []
    used = [r for r in requests if r.bag_index.numel()]
    grad_bags = iter(layout.requests_gradients(grad_pooled, used))
    for r, (_, row_versions, version) in zip(requests, answers, strict=True):
        if r.bag_index.numel():
            rows, grads, inverse = row_gradients_with_inverse(
                r.rows, r.offsets, next(grad_bags), r.weights, r.one_per_bag
            )
            pulled = unique_row_versions(row_versions, inverse, rows.numel())
        else:
            rows, grads = EMPTY_ROWS, torch.empty(0, layout.tables[0].dim)
            pulled = EMPTY_ROWS
        sparse.append((r.shard, version, rows, grads, pulled))
    return sparse


class GradientWorker:
    """One worker thread: its own copy of the dense parameters (the blocks it last pulled).

    The gradient is computed on `workspace`, a dense module loaded with exactly those values
    right before the forward pass. A driver whose workers compute one at a time (the
    simulator) may share one workspace among all of them; threads need one each (None:
    build one).
    """

    def __init__(
        self,
        worker: int,
        trainer: int,
        model: ModelSpec,
        train: TrainSpec,
        layout: EmbeddingLayout,
        strategy,
        dense_ranges: list[tuple[int, int]],
        stats,
        thread: int,
        workspace: DenseReplica | None = None,
        initial: torch.Tensor | None = None,
    ):
        if not dense_ranges:
            raise ValueError(f"{strategy.describe()} needs at least one dense server")
        self.worker, self.trainer, self.thread = worker, trainer, thread
        self.layout = layout
        self.strategy = strategy
        self.dense_ranges = dense_ranges
        if workspace is None:
            workspace = DenseReplica(model, train.seed, train.dense_optimizer)
        self.workspace = workspace
        # only a partial pull (PSP) reads a block pulled at an earlier step: otherwise the
        # blocks are let go after each step (1,000 simulated workers' copies add up)
        self.keep_blocks = strategy.pull_fraction < 1.0
        start_values = None
        if self.keep_blocks:  # a block never pulled yet is the job's starting value
            start_values = (workspace.flat if initial is None else initial).clone()
        self.blocks = [None if start_values is None else start_values[a:b] for a, b in dense_ranges]
        bounds = [0] + [stop for _, stop in dense_ranges]
        assert [start for start, _ in dense_ranges] == bounds[:-1], dense_ranges  # in order
        assert bounds[-1] == workspace.num_params, (bounds[-1], workspace.num_params)
        self.versions = [0] * len(dense_ranges)
        self.stats = stats

    def loop(self) -> Generator[fx.Effect, Any, None]:
        last_dense: list[int] | None = None
        last_sparse: list[int] | None = None
        while True:
            yield fx.AwaitStart(self.worker, last_dense, last_sparse)
            pushed = yield from self._step(last_dense, last_sparse)
            if pushed is None:
                break
            last_dense, last_sparse = pushed
        yield fx.WorkerDone(self.worker)

    def _step(
        self, last_dense: list[int] | None, last_sparse: list[int] | None
    ) -> Generator[fx.Effect, Any, tuple[list[int], list[int]] | None]:
        """One step -> the versions its push carried (None: no batch left). Its tensors are
        let go when it returns, not held while the worker waits for the next batch."""
        layout, strategy, workspace = self.layout, self.strategy, self.workspace
        batch, token = yield fx.NextBatch(self.trainer, with_token=True)
        if batch is None:
            return None
        waits = strategy.pull_waits_for_update
        wanted_rows = [v + 1 for v in last_sparse] if waits and last_sparse else None
        requests, answers, pooled = yield from pooled_lookup(layout, batch, wanted_rows)
        wanted = [v + 1 for v in last_dense] if waits and last_dense else None
        blocks = yield fx.PullDense(strategy.pull_fraction, strategy.pull_wait_s, wanted)
        for b, block in enumerate(blocks):
            if block is not None:
                self.blocks[b], self.versions[b] = block
        torch.cat(self.blocks, out=workspace.writer)  # the blocks tile the dense vector
        if not self.keep_blocks:
            self.blocks = [None] * len(self.blocks)
        loss, flat_grad, grad_pooled = workspace.gradients(batch, pooled)
        if not (all_finite(flat_grad) and all_finite(grad_pooled)):
            raise ValueError(
                f"worker {self.worker}: NaN or infinite gradient (loss {float(loss):g}); the "
                "batch holds NaN or training diverged"
            )
        yield fx.Compute(batch.batch_size)
        sparse = row_pushes(layout, requests, answers, grad_pooled)
        dense = [
            (b, self.versions[b], flat_grad[start:stop])
            for b, (start, stop) in enumerate(self.dense_ranges)
        ]
        # counted as trained once its gradients leave: a crash after this loses nothing
        self.stats.iterations[self.thread] += 1
        self.stats.examples[self.thread] += batch.batch_size
        self.stats.loss_sum += float(loss) * batch.batch_size
        yield fx.PushGradients(self.worker, token, dense, sparse)
        return list(self.versions), [s[1] for s in sparse]
