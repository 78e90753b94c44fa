"""[cluster] and [strategy]: how many nodes of each role, and how they synchronize."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from recsync.app.config.base import Section
from recsync.coordinator.job import ClusterSpec
from recsync.errors import ConfigError
from recsync.sync import REPLICA_STRATEGIES, replica_strategy_config
from recsync.sync.gradient_registry import GRADIENT_STRATEGIES, gradient_strategy_config
from recsync.sync.replica import Timing

STRATEGIES = ("reference", *REPLICA_STRATEGIES, *GRADIENT_STRATEGIES)
REPLICA_FIELDS = ("alpha", "block_lr", "block_momentum", "nesterov")
GRADIENT_FIELDS = (
    "staleness",
    "num_backup",
    "num_aggregate",
    "iota",
    "decay",
    "push_count",
    "push_wait_s",
    "pull_fraction",
    "pull_wait_s",
    "linear_scaling",
    "staleness_norm",
)


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


class StalenessNormSection(Section):
    """[strategy.staleness_norm]: scale stale gradients by rho(tau) (async family)."""

    rule: Literal["rho", "inverse"] = "rho"
    mu_prime: float = Field(default=0.0, ge=0.0)
    kappa: float = Field(default=2.0, gt=0.0)
    sigmoid_lambda: float | None = Field(default=None, gt=0.0)


class StrategySection(Section):
    """[strategy]: `reference` (single process), a replica strategy and its timing, or a
    gradient strategy and its parameters (docs/strategies.md)."""

    name: Literal[STRATEGIES] = "easgd"  # type: ignore[valid-type]
    timing: Literal["shadow", "fixed"] = "shadow"
    every_iterations: int | None = None
    every_seconds: float | None = None
    shadow_min_gap: float = Field(default=1.0, ge=0.0)
    alpha: float | None = None
    block_lr: float | None = None
    block_momentum: float | None = None
    nesterov: bool | None = None
    staleness: int | None = None
    num_backup: int | None = None
    num_aggregate: int | None = None
    iota: int | None = None
    decay: str | None = None
    push_count: int | None = None
    push_wait_s: float | None = None
    pull_fraction: float | None = None
    pull_wait_s: float | None = None
    linear_scaling: bool | None = None
    staleness_norm: StalenessNormSection | None = None

    def to_spec(self):
        """The strategy's config dataclass; None for the single-process reference."""
        if self.name == "reference":
            return None
        gradient = self.name in GRADIENT_STRATEGIES
        own, other = (GRADIENT_FIELDS, REPLICA_FIELDS) if gradient else (REPLICA_FIELDS, ())
        wrong = [key for key in other if getattr(self, key) is not None]
        if wrong:
            raise ConfigError(f"strategy: {wrong} do not apply to {self.name!r}")
        params = {key: getattr(self, key) for key in own if getattr(self, key) is not None}
        if gradient:
            if "staleness_norm" in params:
                params["staleness_norm"] = self.staleness_norm.model_dump()
            try:
                return gradient_strategy_config(self.name, **params)
            except (TypeError, ValueError) as error:
                raise ConfigError(f"strategy: {error}") from None
        wrong = [key for key in GRADIENT_FIELDS if getattr(self, key) is not None]
        if wrong:
            raise ConfigError(f"strategy: {wrong} do not apply to {self.name!r}")
        try:
            timing = Timing(
                self.timing, self.every_iterations, self.every_seconds, self.shadow_min_gap
            )
            return replica_strategy_config(self.name, timing=timing, **params)
        except (TypeError, ValueError) as error:
            raise ConfigError(f"strategy: {error}") from None


def check_cluster_fits(cluster, strategy) -> None:
    """Cluster keys a strategy cannot run with, named before any node starts."""
    if strategy is None:  # the single-process reference trainer
        return
    needs = strategy.needs
    if strategy.gradient_allreduce and cluster.workers_per_trainer != 1:
        raise ConfigError(
            f"cluster.workers_per_trainer: {strategy.describe()} runs one worker per "
            f"trainer (a rank), got {cluster.workers_per_trainer}"
        )
    if needs in ("center", "dense_servers") and cluster.num_sync_servers < 1:
        role = "dense servers" if needs == "dense_servers" else "sync servers"
        raise ConfigError(
            f"cluster.num_sync_servers: {strategy.describe()} needs at least one of its "
            f"{role}, got {cluster.num_sync_servers}"
        )
