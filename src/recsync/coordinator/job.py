"""A distributed job's shape and the measures gathered at its end (no transport here)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from recsync.sync.replica import average_sync_gap
from recsync.trainer.node import TrainerStats


@dataclass(frozen=True)
class ClusterSpec:
    """How many nodes of each role a job runs."""

    num_trainers: int = 2
    workers_per_trainer: int = 2
    num_embedding_servers: int = 2
    num_sync_servers: int = 1
    trainer_slowdown: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        for name in ("num_trainers", "workers_per_trainer", "num_embedding_servers"):
            if getattr(self, name) < 1:
                raise ValueError(f"cluster.{name} must be >= 1, got {getattr(self, name)}")
        if self.num_sync_servers < 0:
            raise ValueError(f"cluster.num_sync_servers must be >= 0, got {self.num_sync_servers}")
        if self.trainer_slowdown and len(self.trainer_slowdown) != self.num_trainers:
            raise ValueError(
                f"cluster.trainer_slowdown: {len(self.trainer_slowdown)} factors for "
                f"{self.num_trainers} trainers"
            )
        if any(not factor >= 1.0 for factor in self.trainer_slowdown):
            raise ValueError(
                f"cluster.trainer_slowdown: factors must be >= 1, got {self.trainer_slowdown}"
            )

    def slowdown(self, trainer: int) -> float:
        """How many times slower than the machine allows trainer `trainer` computes."""
        return self.trainer_slowdown[trainer] if self.trainer_slowdown else 1.0

    @property
    def hogwild_threads(self) -> int:
        return self.num_trainers * self.workers_per_trainer

    def elp(self, batch_size: int) -> int:
        """Examples in flight at most: replicas x Hogwild threads x batch size."""
        return self.hogwild_threads * batch_size


def final_dense(replicas: list[torch.Tensor], strategy_needs: str) -> torch.Tensor:
    """The dense model evaluated at the end: the average of the synced replicas (ShadowSync
    section 3.3 allows the average, the best or any replica); trainer 0's replica when the
    replicas were never synced (averaging unrelated replicas is meaningless). For gradient
    strategies the one "replica" is the dense servers' blocks put together."""
    if strategy_needs in ("none", "dense_servers"):
        return replicas[0]
    return torch.stack(replicas).mean(0)


def sync_measures(stats: list[TrainerStats], shadow: bool) -> dict[str, float | None]:
    """Average sync gap = iterations/s of a worker thread over syncs/s (ShadowSync section
    4.2), per trainer then averaged. A shadow sync serves all m worker threads of its
    trainer; a fixed-rate sync is one worker thread's own (FR-k has gap k)."""
    gaps = []
    for s in stats:
        gap = average_sync_gap(s.total_iterations, s.syncs)
        gaps.append(gap / len(s.iterations) if gap is not None and shadow else gap)
    known = [g for g in gaps if g is not None]
    return {
        "syncs": sum(s.syncs for s in stats),
        "average_sync_gap": sum(known) / len(known) if known else None,
    }


def check_one_pass(handed: list[int], trained: list[int], dataset_examples: int | None) -> None:
    """Every example handed out was trained, once; and all of the data was handed out."""
    if handed != trained:
        raise AssertionError(f"examples handed out {handed} != examples trained {trained}")
    if dataset_examples is not None and sum(handed) != dataset_examples:
        raise AssertionError(
            f"examples handed out {sum(handed)} != dataset size {dataset_examples}"
        )
