"""[cluster]: how many nodes of each role, and whether a strategy can run on them
([strategy] itself is app/config/strategy.py)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import Field

from recsync.app.config.base import Section
from recsync.coordinator.spec import ClusterSpec
from recsync.coordinator.topology import split_workers
from recsync.errors import ConfigError
from recsync.model.spec import ModelSpec
from recsync.strategy.config import StrategyConfig
from recsync.strategy.family import family_of


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
    num_dense_servers: int = Field(
        default=1,
        ge=0,
        description="The servers holding the dense part, for every strategy that has them: "
        "a gradient strategy's dense servers (blocks of the dense part), EASGD's sync servers "
        "(shards of the center variable), hierarchical training's group PSs of each group "
        "(p). Strategies whose trainers hold the dense part ignore it.",
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

    def to_spec(self) -> ClusterSpec:
        try:
            return ClusterSpec(
                self.num_trainers,
                self.workers_per_trainer,
                self.num_embedding_servers,
                self.num_dense_servers,
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


# keys that once counted servers of the dense part, each refused by name: every strategy's
# count is cluster.num_dense_servers
RETIRED_KEYS = {
    ("cluster", "num_sync_servers"): "EASGD's sync servers",
    ("strategy", "group_servers"): "hierarchical training's group PSs of each group",
}


def refuse_retired_keys(tree: Mapping[str, Any]) -> None:
    """ConfigError naming a retired key of the config's tables, and the key to write."""
    for (section, key), what in RETIRED_KEYS.items():
        table = tree.get(section)
        if isinstance(table, Mapping) and key in table:
            raise ConfigError(
                f"{section}.{key} is no longer a key: {what} are counted by "
                "cluster.num_dense_servers, the one count of the servers holding the dense "
                f"part for every strategy; write cluster.num_dense_servers = {table[key]!r}"
            )


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
