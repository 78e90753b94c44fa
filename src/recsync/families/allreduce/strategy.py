"""``allreduce``: synchronous data parallelism in the HPC style (design.md section 3).

The dense part is replicated on the trainers (one worker per trainer: a rank); every step
each trainer computes its gradient, the gradients are all-reduced (averaged over the
trainers that still have data) and every replica applies the same update, so the replicas
stay equal. The embedding gradients of the step go to the embedding servers, which
aggregate one gradient from every worker for the current version and apply once: the
`sync` server policy. With n trainers and local batch b this is the reference trainer at
batch n x b, the baseline that GBA (001) and ShadowSync (000) compare against.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import torch

from recsync.strategy.config import StrategyConfig
from recsync.strategy.gradient import GradientPolicy, ServerPolicies
from recsync.strategy.registry import strategy_config
from recsync.strategy.staleness_norm import StalenessNorm


class AllReduceStrategy(StrategyConfig):
    """The all-reduce family: dense replicas kept equal by all-reducing every step's
    gradient; embedding shards run a gradient policy for the rows (`make_server`)."""

    holds_workers: ClassVar[bool] = True  # a rank waits for the shards' previous step
    barrier: ClassVar[bool] = True  # every step all-reduces every rank's gradient
    staleness_norm: StalenessNorm | None = None

    def make_server(self, num_workers: int, sparse: bool) -> GradientPolicy:
        raise NotImplementedError

    def batches_per_step(self, num_workers: int) -> int:
        return num_workers  # one per rank

    def combine_replicas(self, replicas: Sequence[torch.Tensor]) -> torch.Tensor:
        """The replicas are equal; the job ends with their average."""
        return torch.stack(list(replicas)).mean(0)


@dataclass(frozen=True)
class AllReduceConfig(AllReduceStrategy):
    """All-reduce: the dense gradient all-reduced among the workers every step, embedding
    rows aggregated per step; no other key."""

    name: ClassVar[str] = "allreduce"
    label: ClassVar[str] = "all-reduce"

    def make_server(self, num_workers: int, sparse: bool) -> GradientPolicy:
        """The `sync` policy (the gradient family's, found by name), on embedding shards
        only."""
        if not sparse:
            raise ValueError("allreduce keeps the dense part on the trainers: no dense servers")
        sync = strategy_config("sync")
        assert isinstance(sync, ServerPolicies), sync
        return sync.make_server(num_workers, sparse)
