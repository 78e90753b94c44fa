"""The gradient family's servers of the dense part: each holds one block (a contiguous slice)
of the dense parameters, run by the strategy's policy like the embedding shards
(ps/gradient_servers.py), and the small picklable spec a driver builds one from."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from recsync.coordinator.node_specs import BuildContext, NodeSpec
from recsync.families.gradient.messages import DenseBlock, PullDense, PushDenseGradient
from recsync.families.gradient.strategy import GradientStrategy
from recsync.optim.checks import all_finite
from recsync.optim.dense import DenseOptimizerSpec
from recsync.optim.state import copy_state
from recsync.protocol.address import Role
from recsync.protocol.messages import MayStart, Message, WorkerDone
from recsync.ps.gradient_servers import GradientServer, GradientServerStats
from recsync.strategy.gradient import GradientPolicy
from recsync.strategy.roles import RoleTraits
from recsync.strategy.staleness_norm import StalenessNorm

DENSE_SERVER = Role.declare("dense-server")
DENSE_SERVER_TRAITS = RoleTraits(holds_model=True, counted=True)


@dataclass
class DenseBlockReport:
    """A dense server at the end: its stats, its block and its optimizer state (copies)."""

    stats: GradientServerStats
    values: torch.Tensor
    optimizer: dict[str, Any]


class DenseBlockServer(GradientServer):
    """One block (a contiguous slice) of the dense parameters, its optimizer and version."""

    handles: ClassVar[dict[type[Message], str]] = {
        PullDense: "pull",
        PushDenseGradient: "push",
        MayStart: "may_start",
        WorkerDone: "worker_done",
    }
    versioned: ClassVar[type[Message]] = PullDense

    def __init__(
        self,
        index: int,
        values: torch.Tensor,
        optimizer: DenseOptimizerSpec,
        policy: GradientPolicy,
        staleness_norm: StalenessNorm | None = None,
        check_finite: bool = True,
    ):
        super().__init__(f"{DENSE_SERVER.value}-{index}", policy, staleness_norm, check_finite)
        assert values.dim() == 1
        self.index = index
        self.values = values
        self.optimizer = optimizer.build(values.numel())

    def pull(self, message: PullDense) -> DenseBlock:
        """The block and its version. No copy: an update makes a new tensor, so what was
        handed out keeps the values it had."""
        self.stats.pulls += 1
        return DenseBlock(self.values, self.version)

    def push(self, message: PushDenseGradient) -> None:
        grad = message.grad
        if grad.shape != self.values.shape:
            raise ValueError(
                f"{self.name}: gradient of shape {tuple(grad.shape)} for a block of "
                f"{self.values.numel()} parameters"
            )
        if self.check_finite and not all_finite(grad):
            raise ValueError(f"{self.name}: NaN or infinite gradient from {message.worker}")
        self._receive(message.worker, message.version, message.token, (grad, message.version))

    def _update(self, items: list[Any], divisor: float, lr_scale: float) -> None:
        if not items:  # a step with nothing to apply: the optimizer's state stays as it is
            return
        norm = self.staleness_norm
        scaled = []
        for (grad, pulled), weight in items:
            tau = self.version - 1 - pulled  # the policy counted this update already
            self.stats.staleness[tau] += 1
            if norm is not None:
                weight *= norm.scale(tau, self.last_update_abs)
            scaled.append((grad, weight / divisor))
        if len(scaled) == 1 and scaled[0][1] == 1.0:
            total = scaled[0][0]
        else:
            total = torch.zeros_like(self.values)
            for grad, factor in scaled:
                total.add_(grad, alpha=factor)
        before = self.values
        self.values = self.optimizer.updated(before, total, lr_scale)
        if norm is not None and norm.sigmoid_lambda is not None:
            self.last_update_abs = float((self.values - before).abs().mean())

    def report(self) -> DenseBlockReport:
        return DenseBlockReport(
            self.stats, self.values.clone(), copy_state(self.optimizer.state_dict())
        )


@dataclass(frozen=True)
class DenseServerSpec(NodeSpec):
    """One block of the dense part of a gradient strategy."""

    values: torch.Tensor
    optimizer: DenseOptimizerSpec
    state: dict[str, Any] | None
    strategy: GradientStrategy
    num_workers: int

    def build(self, context: BuildContext) -> DenseBlockServer:
        strategy = self.strategy
        policy = strategy.make_server(self.num_workers, False)
        node = DenseBlockServer(
            self.address.index,
            self.values.clone(),
            self.optimizer,
            policy,
            strategy.staleness_norm,
            check_finite=False,
        )
        if self.state is not None:
            node.optimizer.load_state_dict(self.state)
        return node
