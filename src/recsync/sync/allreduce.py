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

from dataclasses import dataclass
from typing import ClassVar, Literal

from recsync.sync.gradient import GradientPolicy, GradientStrategyMixin
from recsync.sync.synchronous import SyncConfig


@dataclass(frozen=True)
class AllReduceConfig(GradientStrategyMixin):
    """No parameters: all-reduce every step; embedding rows aggregated per step."""

    name: ClassVar[str] = "allreduce"
    label: ClassVar[str] = "all-reduce"
    needs: ClassVar[Literal["allreduce"]] = "allreduce"  # type: ignore[assignment]
    gradient_allreduce: ClassVar[bool] = True

    def make_server(self, num_workers: int, sparse: bool) -> GradientPolicy:
        if not sparse:
            raise ValueError("allreduce keeps the dense part on the trainers: no dense servers")
        return SyncConfig().make_server(num_workers, sparse)
