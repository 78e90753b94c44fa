"""The gradient family's server of the dense part: one block of the dense parameters, run
by the strategy's policy (a small picklable spec; a driver builds the node where it runs)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from recsync.coordinator.node_specs import BuildContext, NodeSpec
from recsync.families.gradient.strategy import GradientStrategy
from recsync.optim.dense import DenseOptimizerSpec
from recsync.ps.gradient_servers import DenseBlockServer


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
