"""[cluster]: how many nodes of each role, and whether a strategy can run on them
([strategy] itself is app/config/strategy.py)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from recsync.app.config.base import Section
from recsync.coordinator.family import family_of
from recsync.coordinator.spec import ClusterSpec
from recsync.coordinator.topology import split_workers
from recsync.errors import ConfigError
from recsync.model.spec import ModelSpec
from recsync.sync.config import StrategyConfig


class ClusterSection(Section):
    """[cluster]: node counts, and the Ray cluster to join (none: start a local one).
    `num_sync_servers`: EASGD's sync servers (default 1); `num_dense_servers`: a gradient
    strategy's dense servers (default 1). `worker_processes`: each worker of a trainer in a
    process of its own, sharing the trainer's replica in shared memory (Ray engine); false:
    threads of one process; unset: processes where the strategy allows and the cluster has
    a CPU per worker. `trainer_slowdown`: per trainer, how many times slower it computes
    (emulated stragglers, both drivers), from `slowdown_from_s` until `slowdown_until_s`
    seconds into the job (unset: to its end); `server_slowdown`: servers by name (e.g.
    embedding-server-0) and how many times slower they answer (both drivers).
    `num_readers`: reader nodes sharing the stream (docs/readers.md); unset: one per 64
    worker threads, at least one, at most one a trainer. `placement`: roles pinned to
    machines of a multi-machine cluster (role -> machines, each its address or its index,
    the head first), e.g. `trainer = ["10.0.0.12", "10.0.0.13"]`; the rest follow the
    rule of docs/clusters.md."""

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
    num_readers: int | None = Field(default=None, ge=1)
    placement: dict[str, list[Annotated[int, Field(ge=0)] | str]] = {}

    def dense_servers(self, strategy: StrategyConfig | None) -> int:
        """The dense servers: the key, or (deprecated) num_sync_servers for a gradient
        strategy, or 1."""
        if self.num_dense_servers is not None:
            return self.num_dense_servers
        if _on_dense_servers(strategy) and self.num_sync_servers is not None:
            return self.num_sync_servers
        return 1

    def deprecations(self, strategy: StrategyConfig | None) -> list[str]:
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

    def to_spec(self, strategy: StrategyConfig | None = None) -> ClusterSpec:
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
                self.num_readers,
                tuple(
                    (role, tuple(str(m) for m in machines))
                    for role, machines in sorted(self.placement.items())
                ),
            )
        except ValueError as error:
            raise ConfigError(str(error)) from None


def _on_dense_servers(strategy: StrategyConfig | None) -> bool:
    """A strategy whose dense part is on dense servers (the gradient family)."""
    return strategy is not None and strategy.dense_servers_key == "num_dense_servers"


def check_model_fits(model: ModelSpec, strategy: StrategyConfig | None) -> None:
    """Model keys a strategy cannot train, named before any node starts."""
    if strategy is None:  # the single-process reference trainer takes any model
        return
    try:
        family_of(strategy).check_model(strategy, model)
    except ValueError as error:
        raise ConfigError(str(error)) from None


def check_cluster_fits(cluster: ClusterSpec, strategy: StrategyConfig | None) -> None:
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
