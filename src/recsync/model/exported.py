"""A trained model as one plain `nn.Module`: the dense part and every embedding table in
full, scoring a batch's dense features and bags (the form `recsync export` writes; the
page docs/export.md shows the few lines of plain PyTorch that rebuild it from the state dict)."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F_

from recsync.model.dlrm import DenseArch
from recsync.model.spec import ModelSpec


class ExportedDLRM(nn.Module):
    """Tables (one EmbeddingBag each, the table's pooling) and the dense arch.

    forward(dense B x num_dense, ids N, offsets F*B+1 feature-major, as a Batch holds them)
    returns B click probabilities. Tables of different dims: each table's pooled bags are
    padded with zeros to the widest dim, and the dense arch projects them (`DenseArch`).
    """

    def __init__(self, spec: ModelSpec):
        super().__init__()
        if spec.data_norm:
            raise ValueError(
                "model.data_norm: a data-normalized model scores with its batch's means and "
                "cannot be exported as a plain module"
            )
        self.tables = nn.ModuleList(
            nn.EmbeddingBag(t.num_rows, t.dim, mode=t.pooling) for t in spec.tables
        )
        self.dense = DenseArch(spec)

    def set_rows(self, table: int, start: int, rows: torch.Tensor) -> None:
        """Rows [start, start + len(rows)) of table `table`."""
        bag = self.tables[table]
        assert isinstance(bag, nn.EmbeddingBag)
        with torch.no_grad():
            bag.weight[start : start + rows.shape[0]] = rows

    def forward(
        self, dense: torch.Tensor, ids: torch.Tensor, offsets: torch.Tensor
    ) -> torch.Tensor:
        B = dense.shape[0]
        pooled = []
        for f, table in enumerate(self.tables):
            bags = offsets[f * B : (f + 1) * B + 1]
            first, last = int(bags[0]), int(bags[-1])
            pooled.append(table(ids[first:last], bags[:-1] - first))
        return torch.sigmoid(self.dense(dense, stack_pooled(pooled, self.dense.spec.pooled_dim)))


def stack_pooled(pooled: list[torch.Tensor], width: int) -> torch.Tensor:
    """B x F x W from each table's B x d_f pooled bags (zeros after a table's d_f)."""
    return torch.stack(
        [p if p.shape[1] == width else F_.pad(p, (0, width - p.shape[1])) for p in pooled], dim=1
    )
