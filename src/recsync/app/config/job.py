"""[cluster] and [strategy]: how many nodes of each role, and how they synchronize."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from recsync.app.config.base import Section
from recsync.coordinator.family import family_of
from recsync.coordinator.spec import ClusterSpec
from recsync.coordinator.topology import split_workers
from recsync.errors import ConfigError
from recsync.families import STRATEGIES, strategy_config, strategy_fields
from recsync.sync.family import StrategyFamily
from recsync.sync.timing import Timing

STRATEGY_NAMES = ("reference", *STRATEGIES)
TIMING_KEYS = ("timing", "every_iterations", "every_seconds", "shadow_min_gap")


class ClusterSection(Section):
    """[cluster]: node counts, and the Ray cluster to join (none: start a local one).
    `num_sync_servers`: EASGD's sync servers (default 1); `num_dense_servers`: a gradient
    strategy's dense servers (default 1). `worker_processes`: each worker of a trainer in a
    process of its own, sharing the trainer's replica in shared memory (Ray engine); false:
    threads of one process; unset: processes where the strategy allows and the cluster has
    a CPU per worker. `trainer_slowdown`: per trainer, how many times slower it computes
    (emulated stragglers, both drivers), from `slowdown_from_s` until `slowdown_until_s`
    seconds into the job (unset: to its end); `server_slowdown`: servers by name (e.g.
    embedding-server-0) and how many times slower they answer (both drivers)."""

    num_trainers: int = Field(default=2, ge=1)
    workers_per_trainer: int = Field(default=2, ge=1)
    num_embedding_servers: int = Field(default=2, ge=1)
    num_sync_servers: int | None = Field(default=None, ge=0)
    num_dense_servers: int | None = Field(default=None, ge=0)
    address: str | None = None
    num_cpus: int | None = Field(default=None, ge=1)
    trainer_slowdown: list[float] = []
    slowdown_from_s: float = Field(default=0.0, ge=0)
    slowdown_until_s: float | None = Field(default=None, gt=0)
    server_slowdown: dict[str, float] = {}
    worker_processes: bool | None = None

    def dense_servers(self, strategy: StrategyFamily | None) -> int:
        """The dense servers: the key, or (deprecated) num_sync_servers for a gradient
        strategy, or 1."""
        if self.num_dense_servers is not None:
            return self.num_dense_servers
        if _on_dense_servers(strategy) and self.num_sync_servers is not None:
            return self.num_sync_servers
        return 1

    def deprecations(self, strategy: StrategyFamily | None) -> list[str]:
        """What the section says in a deprecated way, and what to say instead."""
        if (
            _on_dense_servers(strategy)
            and self.num_sync_servers is not None
            and self.num_dense_servers is None
        ):
            return [
                "cluster.num_sync_servers is deprecated for the dense servers of a gradient "
                f"strategy: use cluster.num_dense_servers = {self.num_sync_servers} "
                "(num_sync_servers now counts EASGD's sync servers only)"
            ]
        return []

    def to_spec(self, strategy: StrategyFamily | None = None) -> ClusterSpec:
        try:
            return ClusterSpec(
                self.num_trainers,
                self.workers_per_trainer,
                self.num_embedding_servers,
                1 if self.num_sync_servers is None else self.num_sync_servers,
                self.dense_servers(strategy),
                tuple(self.trainer_slowdown),
                self.worker_processes,
                (self.slowdown_from_s, self.slowdown_until_s or float("inf")),
                tuple(sorted(self.server_slowdown.items())),
            )
        except ValueError as error:
            raise ConfigError(str(error)) from None


class StalenessNormSection(Section):
    """[strategy.staleness_norm]: scale stale gradients by rho(tau) (async family)."""

    rule: Literal["rho", "inverse"] = "rho"
    mu_prime: float = Field(default=0.0, ge=0.0)
    kappa: float = Field(default=2.0, gt=0.0)
    sigmoid_lambda: float | None = Field(default=None, gt=0.0)
    source_mean: float | None = Field(default=None, ge=0.0)
    source_std: float | None = Field(default=None, gt=0.0)
    target_std: float | None = Field(default=None, gt=0.0)


class StrategySection(Section):
    """[strategy]: `reference` (single process), a replica strategy and its timing, a
    gradient strategy and its parameters, or hierarchical training and its groups
    (docs/strategies.md)."""

    name: Literal[STRATEGY_NAMES] = "easgd"  # type: ignore[valid-type]
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
    groups: int | None = None
    group_servers: int | None = None
    cross_group: Literal["easgd", "ma", "bmuf"] | None = None
    fc_split: bool | None = None
    tagging: bool | None = None
    refinement: bool | None = None
    activations: Literal["none", "bf16", "int8"] | None = None
    gradients: Literal["none", "bf16", "int8"] | None = None
    topk_fraction: float | None = None
    error_feedback: bool | None = None
    staleness_norm: StalenessNormSection | None = None

    def to_spec(self) -> StrategyFamily | None:
        """The strategy's config dataclass; None for the single-process reference."""
        if self.name == "reference":
            return None
        known = strategy_fields(self.name)
        keys = [k for k in type(self).model_fields if k != "name" and k not in TIMING_KEYS]
        wrong = [k for k in keys if getattr(self, k) is not None and k not in known]
        if wrong:
            raise ConfigError(f"strategy: {wrong} do not apply to {self.name!r}")
        params: dict[str, Any] = {k: getattr(self, k) for k in keys if getattr(self, k) is not None}
        if self.staleness_norm is not None:
            params["staleness_norm"] = self.staleness_norm.model_dump()
        if "shadow_min_gap" in known and "timing" not in known:  # hierarchical's group PSs
            params["shadow_min_gap"] = self.shadow_min_gap
        try:
            if "timing" in known:
                params["timing"] = Timing(
                    self.timing, self.every_iterations, self.every_seconds, self.shadow_min_gap
                )
            return strategy_config(self.name, **params)
        except (TypeError, ValueError) as error:
            raise ConfigError(f"strategy: {error}") from None


def _on_dense_servers(strategy: StrategyFamily | None) -> bool:
    """A strategy whose dense part is on dense servers (the gradient family)."""
    return strategy is not None and strategy.dense_servers_key == "num_dense_servers"


def check_cluster_fits(cluster: ClusterSpec, strategy: StrategyFamily | None) -> None:
    """Cluster keys a strategy cannot run with, named before any node starts."""
    if strategy is None:  # the single-process reference trainer
        return
    try:
        family_of(strategy).check_cluster(strategy, cluster)
    except ValueError as error:
        raise ConfigError(str(error)) from None
    try:
        split_workers(cluster, strategy)
    except ValueError as error:
        raise ConfigError(str(error)) from None
