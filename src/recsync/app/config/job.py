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
    """[cluster]: the nodes of a distributed run by role, the Ray cluster it runs on, and
    emulated slow nodes."""

    num_trainers: int = Field(
        default=2, ge=1, description="Trainer nodes, each with its workers and data stream."
    )
    workers_per_trainer: int = Field(
        default=2, ge=1, description="Worker threads (or processes) of each trainer."
    )
    num_embedding_servers: int = Field(
        default=2, ge=1, description="Embedding servers the tables' rows are sharded over."
    )
    num_sync_servers: int | None = Field(
        default=None,
        ge=0,
        description="EASGD's sync servers, the shards of the center variable.",
        json_schema_extra={"unset": "1"},
    )
    num_dense_servers: int | None = Field(
        default=None,
        ge=0,
        description="A gradient strategy's dense servers, the blocks of the dense part.",
        json_schema_extra={"unset": "1"},
    )
    address: str | None = Field(
        default=None,
        description='A running Ray cluster to join: "auto" or its head\'s address, e.g. '
        '"10.0.0.11:6379".',
        json_schema_extra={"unset": "a local Ray cluster, started for the run"},
    )
    num_cpus: int | None = Field(
        default=None,
        ge=1,
        description="CPUs of the local Ray cluster (not with address).",
        json_schema_extra={"unset": "the machine's cores (os.cpu_count())"},
    )
    trainer_slowdown: list[float] = Field(
        default=[],
        description="Per trainer, how many times slower it computes (emulated stragglers, "
        "both drivers); [] or 1.0: full speed.",
    )
    slowdown_from_s: float = Field(
        default=0.0,
        ge=0,
        description="Seconds into the job when trainer_slowdown begins.",
    )
    slowdown_until_s: float | None = Field(
        default=None,
        gt=0,
        description="Seconds into the job when trainer_slowdown ends.",
        json_schema_extra={"unset": "the job's end"},
    )
    server_slowdown: dict[str, float] = Field(
        default={},
        description='Servers by name (e.g. "embedding-server-0") and how many times slower '
        "each answers (both drivers).",
    )
    worker_processes: bool | None = Field(
        default=None,
        description="true: each worker of a trainer in a process of its own, sharing the "
        "trainer's replica in shared memory (Ray engine); false: threads of one process.",
        json_schema_extra={
            "unset": "processes where the strategy allows and the cluster has a CPU per "
            "worker, else threads"
        },
    )
    num_readers: int | None = Field(
        default=None,
        ge=1,
        description="Reader nodes sharing the data stream, each serving whole trainers.",
        json_schema_extra={
            "unset": "one per 64 worker threads, at least one, at most one per trainer"
        },
    )
    placement: dict[str, list[Annotated[int, Field(ge=0)] | str]] = Field(
        default={},
        description="Roles pinned to machines (role = machines, each an address or an index, "
        'the head 0), e.g. trainer = ["10.0.0.12", "10.0.0.13"].',
        json_schema_extra={"unset": "every role placed by the engine's rule"},
    )

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
