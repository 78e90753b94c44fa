"""The worker of `allreduce`: a trainer's one worker (a rank) on its dense replica.

Step: wait until every embedding shard applied the previous step -> take a batch -> pooled
lookup -> forward/backward on the replica -> all-reduce the dense gradient -> apply the
mean to the replica (every replica applies the same) -> push row gradients (aggregated per
step by the shards). A trainer out of data keeps joining the all-reduce rounds with zeros
until every trainer is out, so the others are never left waiting; the mean divides by the
trainers that contributed.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import torch

from recsync.trainer import effects as fx
from recsync.trainer.gradient_worker import pooled_lookup, row_pushes


def allreduce_loop(node) -> Generator[fx.Effect, Any, None]:
    """`node`: the TrainerNode (one worker thread, a dense replica, its stats)."""
    n = node.num_trainers
    worker = node.index  # one worker per trainer: its index is the trainer's
    last_sparse: list[int] | None = None
    while True:
        yield fx.AwaitStart(worker, None, last_sparse)
        last_sparse = yield from _step(node, worker)
        if last_sparse is None:
            break
    yield fx.WorkerDone(worker)
    zeros = torch.zeros(node.replica.num_params)
    while True:
        _, num_done = yield fx.AllReduce(zeros, True)
        if num_done == n:
            return


def _step(node, worker: int) -> Generator[fx.Effect, Any, list[int] | None]:
    """One step -> its shards' versions at the lookup (None: no batch left). Its tensors
    are let go when it returns, not held while the rank waits for its next batch."""
    layout, replica, n = node.layout, node.replica, node.num_trainers
    batch, _ = yield fx.NextBatch(worker, with_token=True)
    if batch is None:
        return None
    requests, answers, pooled = yield from pooled_lookup(layout, batch)
    loss, flat_grad, grad_pooled = replica.gradients(batch, pooled)
    yield fx.Compute(batch.batch_size)
    mean, num_done = yield fx.AllReduce(flat_grad, False)
    replica.apply(mean * (n / (n - num_done)))  # the mean over the trainers with data
    sparse = row_pushes(layout, requests, answers, grad_pooled)
    node.stats.iterations[0] += 1
    node.stats.examples[0] += batch.batch_size
    node.stats.loss_sum += float(loss) * batch.batch_size
    yield fx.PushGradients(worker, None, [], sparse)
    node.stats.syncs += 1
    return [s[1] for s in sparse]
