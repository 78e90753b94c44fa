"""The dense part of a DLRM as a PyTorch module; the sparse part lives on embedding shards."""

from __future__ import annotations

import functools

import torch
from torch import nn

from recsync.model.layers import DotInteraction, mlp
from recsync.model.spec import ModelSpec


class DenseArch(nn.Module):
    """Bottom MLP, dot interaction and top MLP of a DLRM.

    Takes dense features B x num_dense and pooled embeddings B x F x D and returns B logits.
    It never sees an embedding table: the pooled vectors come from the embedding shards.
    The top MLP sees the pairwise dot products and a first-order input: the bottom MLP's
    output, or, for data with no dense feature, the pooled embeddings themselves (so that
    one categorical feature alone, which has no pair, still trains a model). With no dense
    feature the logit also gets a factorization machine's terms (DeepFM's FM part), read
    off each bag's pooled sum s_f: the last of the D dimensions is each id's first-order
    weight (sum_f s_f[D-1]), the other D-1 give each bag's own second-order term
    0.5 |s_f[:D-1]|^2. That is the FM's in-bag pairwise sum plus 0.5 |v_i|^2 per id, which
    the per-id weight absorbs (for 0/1 ids exactly): one multi-hot bag alone otherwise
    learns its pairs only through the MLP, slowly.

    Tables of different dims (`ModelSpec.interaction_dim`): the pooled embeddings are
    B x F x W, table f's vector in its first d_f entries; `embed` maps each table whose d_f
    is not D to D by a linear projection of its own (d_f x D, no bias: DLRM's way to
    interact tables of different sizes), and the rest reads the B x F x D it makes. The
    projections are dense parameters, registered after the MLPs (a model with one dim has
    none, and its parameters are as they were).
    """

    def __init__(self, spec: ModelSpec):
        super().__init__()
        self.spec = spec
        D = spec.embedding_dim
        self.bottom = (
            mlp(
                [spec.num_dense, *spec.bottom_mlp, D],
                last_activation=True,
                data_norm=spec.data_norm,
            )
            if spec.num_dense
            else None
        )
        num_vectors = spec.num_features + (1 if spec.num_dense else 0)
        self.interaction = DotInteraction(num_vectors)
        self.top = mlp(
            [spec.top_input, *spec.top_mlp, 1], last_activation=False, data_norm=spec.data_norm
        )
        self.projections = Projections(spec) if spec.projected else None

    def forward(self, dense: torch.Tensor, pooled: torch.Tensor) -> torch.Tensor:
        bottom_out = None if self.bottom is None else self.bottom(dense)
        vectors = self.embed(pooled)
        return self.head(self.top(self.top_input(bottom_out, vectors)), vectors)

    def embed(self, pooled: torch.Tensor) -> torch.Tensor:
        """B x F x D vectors from B x F x W pooled embeddings (themselves, with one dim)."""
        return pooled if self.projections is None else self.projections(pooled)

    def top_input(self, bottom_out: torch.Tensor | None, pooled: torch.Tensor) -> torch.Tensor:
        """The top MLP's input: the first-order part and the pairwise dot products."""
        if bottom_out is None:
            return torch.cat([pooled.flatten(1), self.interaction(pooled)], dim=1)
        vectors = torch.cat([bottom_out.unsqueeze(1), pooled], dim=1)
        return torch.cat([bottom_out, self.interaction(vectors)], dim=1)

    def head(self, top_out: torch.Tensor, pooled: torch.Tensor) -> torch.Tensor:
        """B logits from the top MLP's B x 1 output (plus the FM terms with no dense
        feature)."""
        logits: torch.Tensor = top_out.squeeze(1)
        if self.bottom is None:
            first_order = pooled[..., -1].sum(1)
            in_bag = 0.5 * pooled[..., :-1].pow(2).sum((1, 2))
            logits = logits + first_order + in_bag
        return logits


class Projections(nn.Module):
    """Each table whose dim d_f is not the interaction's D, projected to D: x_f W_f with
    W_f of d_f x D. The tables of one dim share one F_d x d x D parameter (one batched
    product per dim); tables already at D pass as they are."""

    def __init__(self, spec: ModelSpec):
        super().__init__()
        D, F = spec.embedding_dim, spec.num_features
        by_dim: dict[int, list[int]] = {}
        for f in spec.projected:
            by_dim.setdefault(spec.tables[f].dim, []).append(f)
        self.dims = sorted(by_dim)
        self.weights = nn.ParameterList()
        order: list[int] = []
        for i, d in enumerate(self.dims):
            tables = by_dim[d]
            bound = 1.0 / d**0.5  # nn.Linear's default initialization
            weight = torch.empty(len(tables), d, D).uniform_(-bound, bound)
            self.weights.append(nn.Parameter(weight))
            self.register_buffer(f"tables{i}", torch.tensor(tables), persistent=False)
            order += tables
        kept = [f for f in range(F) if f not in set(order)]
        self.num_kept = len(kept)
        self.kept: torch.Tensor
        self.register_buffer("kept", torch.tensor(kept, dtype=torch.int64), persistent=False)
        order += kept
        self.D = D
        self.inverse: torch.Tensor  # the parts' order -> table order
        self.register_buffer("inverse", torch.argsort(torch.tensor(order)), persistent=False)

    def forward(self, pooled: torch.Tensor) -> torch.Tensor:
        parts = [
            torch.einsum(
                "bfd,fde->bfe", pooled.index_select(1, getattr(self, f"tables{i}"))[..., :d], weight
            )
            for i, (d, weight) in enumerate(zip(self.dims, self.weights, strict=True))
        ]
        if self.num_kept:
            parts.append(pooled.index_select(1, self.kept)[..., : self.D])
        return torch.cat(parts, dim=1).index_select(1, self.inverse)


def build_dense(spec: ModelSpec, seed: int) -> DenseArch:
    """A DenseArch whose initial parameters depend only on `seed`."""
    state = torch.random.get_rng_state()
    torch.manual_seed(seed)
    try:
        return DenseArch(spec)
    finally:
        torch.random.set_rng_state(state)


@functools.lru_cache(maxsize=64)
def dense_num_params(spec: ModelSpec) -> int:
    """The number of parameters of the model's dense part, counted without making them."""
    with torch.device("meta"):
        module = DenseArch(spec)
    return sum(p.numel() for p in module.parameters())
