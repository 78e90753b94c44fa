"""The all-reduce family (design.md section 3): the dense part replicated on the trainers,
one rank each, gradients all-reduced every step; the embedding shards run the strategy's
policy for the rows."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from recsync.coordinator.measures import policy_measures, trainer_replicas
from recsync.coordinator.node_specs import BuildContext, Collectives, NodeSpec, TrainerSpec
from recsync.coordinator.spec import ClusterSpec, JobSpec
from recsync.families.allreduce.strategy import AllReduceConfig, AllReduceStrategy
from recsync.families.allreduce.trainer import AllReduceTrainer
from recsync.protocol.node import Node
from recsync.strategy.config import StrategyConfig
from recsync.strategy.family import Family, Reports
from recsync.strategy.gradient import ServerPolicies


class AllReduceFamily(Family):
    """``allreduce``: every trainer one rank, all of them in one collective."""

    base = AllReduceStrategy
    strategies = (AllReduceConfig,)
    ranks_are_trainers = True

    def trainer(self, spec: TrainerSpec, context: BuildContext) -> Node:
        return AllReduceTrainer(spec.setup, _allreduce(spec.strategy))

    def shard_policy(self, strategy: StrategyConfig) -> ServerPolicies | None:
        return _allreduce(strategy)

    def collectives(
        self, spec: JobSpec, servers: Sequence[NodeSpec], trainers: Sequence[NodeSpec]
    ) -> Collectives:
        return (tuple(t.address for t in trainers),)

    def process_refusal(self, strategy: StrategyConfig) -> str | None:
        return "each trainer is one rank of one worker"

    def check_cluster(self, strategy: StrategyConfig, cluster: ClusterSpec) -> None:
        if cluster.workers_per_trainer != 1:
            raise ValueError(
                f"cluster.workers_per_trainer: {strategy.describe()} runs one worker per "
                f"trainer (a rank), got {cluster.workers_per_trainer}"
            )

    def final_dense(self, spec: JobSpec, reports: Reports) -> torch.Tensor:
        """The replicas' average (they are equal)."""
        return _allreduce(spec.strategy).combine_replicas(trainer_replicas(reports))

    def measures(self, spec: JobSpec, reports: Reports, train_seconds: float) -> dict[str, Any]:
        return policy_measures(spec, reports, train_seconds, [])


def _allreduce(strategy: StrategyConfig) -> AllReduceStrategy:
    assert isinstance(strategy, AllReduceStrategy), strategy
    return strategy
