"""The single-process reference trainer: synchronous mini-batch training of the split model.

Every distributed strategy is compared against it. One step: pooled lookup on the local
shards -> dense forward/backward -> dense optimizer step -> row-wise sparse update.
"""

from __future__ import annotations

import torch

from recsync.data.batch import Batch
from recsync.metrics.quality import Quality, evaluate_predictions
from recsync.model.dlrm import DenseArch
from recsync.model.spec import ModelSpec
from recsync.optim.train_spec import TrainSpec
from recsync.ps.local import LocalEmbeddings, build_shards
from recsync.ps.placement import single_shard_layout
from recsync.trainer.replica import DenseReplica

EVAL_CHUNK = 16384


def predict(dense: DenseArch, embeddings: LocalEmbeddings, batch: Batch) -> torch.Tensor:
    """Click probabilities for a batch of any size (evaluated in chunks)."""
    probs = []
    with torch.no_grad():
        for start in range(0, batch.batch_size, EVAL_CHUNK):
            part = batch.slice(start, min(start + EVAL_CHUNK, batch.batch_size))
            pooled = embeddings.peek(part)
            probs.append(torch.sigmoid(dense(part.dense, pooled)))
    return torch.cat(probs) if probs else torch.empty(0)


class ReferenceTrainer:
    """Dense part + all embedding shards in one process, trained step by step."""

    def __init__(self, model: ModelSpec, train: TrainSpec):
        self.replica = DenseReplica(model, train.seed, train.dense_optimizer)
        self.dense = self.replica.module
        layout = single_shard_layout(model)
        self.embeddings = LocalEmbeddings(
            layout, build_shards(layout, train.sparse_optimizer, train.seed)
        )
        self.examples_trained = 0

    def train_step(self, batch: Batch) -> torch.Tensor:
        """One synchronous step on `batch`; returns the (detached) mean loss."""
        pooled, requests = self.embeddings.lookup(batch)
        loss, flat_grad, grad_pooled = self.replica.gradients(batch, pooled)
        self.replica.apply(flat_grad)
        self.embeddings.apply(grad_pooled, requests)
        self.examples_trained += batch.batch_size
        return loss

    def predict(self, batch: Batch) -> torch.Tensor:
        return predict(self.dense, self.embeddings, batch)

    def evaluate(self, batch: Batch) -> Quality:
        return evaluate_predictions(batch.labels, self.predict(batch))
