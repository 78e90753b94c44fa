"""A dense replica: the DLRM dense part with all parameters as views of one flat vector."""

from __future__ import annotations

import torch
import torch.nn.functional as F_

from recsync.data.batch import Batch
from recsync.model.dlrm import build_dense, dense_num_params
from recsync.model.priced import PricedTensor, priced_math, pricing, writable_alias
from recsync.model.spec import ModelSpec
from recsync.optim.dense import DenseOptimizerSpec, FlatOptimizer


class DenseReplica:
    """The dense part of one trainer, trained lock-free by several worker threads.

    `flat` is the P-vector every parameter is a view of. Writes (optimizer steps, sync
    updates) go through `writer`, an alias of the same memory with its own autograd version
    counter, so a worker's backward never trips over another worker's in-place update: the
    races are real and intended (Hogwild), the version check would only forbid them.
    """

    def __init__(self, spec: ModelSpec, seed: int, optimizer: DenseOptimizerSpec):
        self.module = build_dense(spec, seed)
        self.params = list(self.module.parameters())
        self._bind(torch.cat([p.detach().reshape(-1) for p in self.params]))
        self.optimizer = optimizer.build(self.flat.numel())

    def _bind(self, flat: torch.Tensor) -> None:
        """Make every parameter a view of `flat` (which holds their values)."""
        self.flat = flat
        offset = 0
        for p in self.params:
            n = p.numel()
            p.data = flat[offset : offset + n].view_as(p)
            offset += n
        self.writer = writable_alias(flat)

    def tensors(self) -> dict[str, torch.Tensor]:
        """Its parameters and optimizer state, by name (what worker processes share)."""
        optimizer = {f"optimizer.{k}": v for k, v in self.optimizer.tensors().items()}
        return {"flat": self.flat, **optimizer}

    def rebind(self, tensors: dict[str, torch.Tensor]) -> None:
        """Keep parameters and optimizer state in `tensors` (as `tensors()` names them,
        holding the same values): e.g. memory shared with other processes."""
        self._bind(tensors["flat"])
        prefix = "optimizer."
        self.optimizer.rebind(
            {k[len(prefix) :]: v for k, v in tensors.items() if k.startswith(prefix)}
        )

    @property
    def num_params(self) -> int:
        return int(self.flat.numel())

    def gradients(
        self, batch: Batch, pooled: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(mean loss, flat P-gradient, B x F x D gradient w.r.t. the pooled embeddings)."""
        pooled = pooled.detach().requires_grad_()
        logits = self.module(batch.dense, pooled)
        loss = F_.binary_cross_entropy_with_logits(logits, batch.labels)
        *grads, grad_pooled = torch.autograd.grad(loss, [*self.params, pooled])
        return loss.detach(), torch.cat([g.reshape(-1) for g in grads]), grad_pooled

    def apply(self, flat_grad: torch.Tensor) -> None:
        """One optimizer step with a flat gradient, in place."""
        self.optimizer.step(self.writer, flat_grad)

    def load_flat(self, flat: torch.Tensor) -> None:
        """Overwrite every parameter with a flat P-vector (e.g. the average of replicas)."""
        self.writer.copy_(flat)

    def predict(self, batch: Batch, pooled: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            return torch.sigmoid(self.module(batch.dense, pooled))


class PricedReplica:
    """A dense replica of priced math (model/priced.py): the shapes of `DenseReplica`'s
    parameters, gradients and optimizer state, no values, no arithmetic. Its loss is NaN
    (priced math has none)."""

    module = None  # no module: nothing to predict with or export

    def __init__(self, spec: ModelSpec, seed: int, optimizer: DenseOptimizerSpec):
        size = dense_num_params(spec)
        self.flat: torch.Tensor = PricedTensor((size,))
        self.writer = self.flat
        with priced_math():
            self.optimizer: FlatOptimizer = optimizer.build(size)

    def tensors(self) -> dict[str, torch.Tensor]:
        optimizer = {f"optimizer.{k}": v for k, v in self.optimizer.tensors().items()}
        return {"flat": self.flat, **optimizer}

    def rebind(self, tensors: dict[str, torch.Tensor]) -> None:
        raise AssertionError("a priced replica is never shared with worker processes")

    @property
    def num_params(self) -> int:
        return int(self.flat.numel())

    def gradients(
        self, batch: Batch, pooled: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(NaN, a priced P-gradient, a priced gradient of `pooled`'s shape)."""
        nan = torch.full((), float("nan"))
        return nan, PricedTensor(self.flat.shape), PricedTensor(pooled.shape)

    def apply(self, flat_grad: torch.Tensor) -> None:
        """Nothing to update (the step's cost is the cost model's)."""

    def load_flat(self, flat: torch.Tensor) -> None:
        """Nothing to overwrite."""

    def predict(self, batch: Batch, pooled: torch.Tensor) -> torch.Tensor:
        raise ValueError('priced math makes no predictions (simulate with math = "real")')


def new_replica(spec: ModelSpec, seed: int, optimizer: DenseOptimizerSpec) -> DenseReplica:
    """The dense replica a job is built with: a `PricedReplica` while the job is assembled
    under `priced_math()`, else a `DenseReplica`."""
    if pricing():
        return PricedReplica(spec, seed, optimizer)  # type: ignore[return-value]
    return DenseReplica(spec, seed, optimizer)
