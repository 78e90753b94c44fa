"""A DLRM written the way a PyTorch user would: one nn.EmbeddingBag(sparse=True) per table,
the same MLPs, torch.optim.Adagrad on everything. The baseline of bench_step.py."""

from __future__ import annotations

import torch
import torch.nn.functional as F_
from torch import nn

from recsync.data.batch import Batch
from recsync.model.dlrm import DenseArch
from recsync.model.spec import ModelSpec


class PlainDLRM(nn.Module):
    def __init__(self, spec: ModelSpec, dense: DenseArch):
        super().__init__()
        self.tables = nn.ModuleList(
            nn.EmbeddingBag(t.num_rows, t.dim, mode=t.pooling, sparse=True) for t in spec.tables
        )
        self.dense = dense

    def forward(self, batch: Batch) -> torch.Tensor:
        B = batch.batch_size
        pooled = []
        for f, table in enumerate(self.tables):
            start, stop = int(batch.offsets[f * B]), int(batch.offsets[(f + 1) * B])
            offsets = batch.offsets[f * B : (f + 1) * B] - start
            pooled.append(table(batch.ids[start:stop], offsets))
        return self.dense(batch.dense, torch.stack(pooled, dim=1))


class PlainTrainer:
    """Sparse and dense parameters under two torch.optim.Adagrad instances."""

    def __init__(self, model: PlainDLRM, sparse_lr: float, dense_lr: float):
        self.model = model
        self.sparse_opt = torch.optim.Adagrad(list(model.tables.parameters()), lr=sparse_lr)
        self.dense_opt = torch.optim.Adagrad(list(model.dense.parameters()), lr=dense_lr)

    def train_step(self, batch: Batch) -> torch.Tensor:
        loss = F_.binary_cross_entropy_with_logits(self.model(batch), batch.labels)
        self.sparse_opt.zero_grad()
        self.dense_opt.zero_grad()
        loss.backward()
        self.sparse_opt.step()
        self.dense_opt.step()
        return loss.detach()
