"""[cluster] and [strategy]: how many nodes of each role, and how they synchronize."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from recsync.app.config_base import Section
from recsync.coordinator.job import ClusterSpec
from recsync.errors import ConfigError
from recsync.sync import replica_strategy_config
from recsync.sync.replica import Timing

STRATEGIES = ("reference", "independent", "easgd", "ma", "bmuf")


class ClusterSection(Section):
    """[cluster]: node counts, and the Ray cluster to join (none: start a local one)."""

    num_trainers: int = Field(default=2, ge=1)
    workers_per_trainer: int = Field(default=2, ge=1)
    num_embedding_servers: int = Field(default=2, ge=1)
    num_sync_servers: int = Field(default=1, ge=0)
    address: str | None = None
    num_cpus: int | None = Field(default=None, ge=1)
    trainer_slowdown: list[float] = []

    def to_spec(self) -> ClusterSpec:
        try:
            return ClusterSpec(
                self.num_trainers,
                self.workers_per_trainer,
                self.num_embedding_servers,
                self.num_sync_servers,
                tuple(self.trainer_slowdown),
            )
        except ValueError as error:
            raise ConfigError(str(error)) from None


class StrategySection(Section):
    """[strategy]: `reference` (single process) or a distributed strategy and its timing."""

    name: Literal["reference", "independent", "easgd", "ma", "bmuf"] = "easgd"
    timing: Literal["shadow", "fixed"] = "shadow"
    every_iterations: int | None = None
    every_seconds: float | None = None
    shadow_min_gap: float = Field(default=1.0, ge=0.0)
    alpha: float | None = None
    block_lr: float | None = None
    block_momentum: float | None = None
    nesterov: bool | None = None

    def to_spec(self):
        """The strategy's config dataclass; None for the single-process reference."""
        if self.name == "reference":
            return None
        params = {
            key: getattr(self, key)
            for key in ("alpha", "block_lr", "block_momentum", "nesterov")
            if getattr(self, key) is not None
        }
        try:
            timing = Timing(
                self.timing, self.every_iterations, self.every_seconds, self.shadow_min_gap
            )
            return replica_strategy_config(self.name, timing=timing, **params)
        except (TypeError, ValueError) as error:
            raise ConfigError(f"strategy: {error}") from None
