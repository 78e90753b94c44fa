"""The candidates of an advice: every registered strategy at every point of the cluster
file's grid (trainers, embedding servers, dense servers) that fits its machines, each as
the user's job with its [strategy] and [cluster] counts replaced; the others listed with
the reason they do not apply (the key at fault named, as the config's own checks say it).

A strategy keeps the user's [strategy] keys when the job names it; any other runs with its
defaults. `allreduce` runs one worker per trainer (a rank): it gets the grid point's worker
threads as that many one-worker trainers, so it uses the same cores as the others.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from recsync.app.advise.cluster import ClusterFile
from recsync.app.config.load import load_config
from recsync.app.config.schema import Config
from recsync.app.runs.distributed import job_spec
from recsync.coordinator.spec import JobSpec
from recsync.errors import ConfigError
from recsync.families import STRATEGIES
from recsync.strategy.family import family_of, family_of_type


@dataclass(frozen=True)
class JobSource:
    """The user's job: its config file (None: the embedded default) and --set overrides."""

    path: Path | None = None
    overrides: dict[str, Any] = field(default_factory=dict)

    def config(
        self, changes: dict[str, Any] | None = None, strategy: dict[str, Any] | None = None
    ) -> Config:
        """The job with `changes` (dotted keys) over its overrides and its [strategy]
        replaced by `strategy` (and its strategy.* overrides dropped: the job's own
        strategy's table holds them; ConfigError naming the key at fault)."""
        overrides = dict(self.overrides)
        sections = None
        if strategy is not None:
            sections = {"strategy": strategy}
            overrides = {k: v for k, v in overrides.items() if not k.startswith("strategy.")}
        return load_config(self.path, {**overrides, **(changes or {})}, sections)


@dataclass(frozen=True)
class Candidate:
    """One strategy at one point of the grid: its job's changes to the user's config."""

    strategy: str
    trainers: int
    workers_per_trainer: int
    embedding_servers: int
    dense_servers: int | None  # sync or dense servers; None: the strategy has none
    changes: dict[str, Any]
    strategy_table: dict[str, Any]
    cores: int  # cores the job's nodes take: a worker thread each, one for any other node
    readers: int | None = None  # reader nodes; None: the job's own (its count or the rule)

    @property
    def label(self) -> str:
        dense = "" if self.dense_servers is None else f" d{self.dense_servers}"
        readers = "" if self.readers is None else f" r{self.readers}"
        return (
            f"{self.strategy} {self.trainers}x{self.workers_per_trainer} "
            f"e{self.embedding_servers}{dense}{readers}"
        )

    def config(self, job: JobSource, more: dict[str, Any] | None = None) -> Config:
        return job.config({**self.changes, **(more or {})}, self.strategy_table)


@dataclass(frozen=True)
class Refusal:
    """A strategy (at a grid point, or all of them) that does not apply, and why."""

    strategy: str
    point: str
    reason: str


def grid_of(cluster: ClusterFile, base: Config) -> tuple[list[int], list[int], list[int]]:
    """Trainers, embedding servers and servers of the dense part tried: the file's [grid],
    or the job's counts and twice them (servers of the dense part: the job's count)."""
    c, grid = base.cluster, cluster.grid
    trainers = grid.trainers or [c.num_trainers, 2 * c.num_trainers]
    embedding = grid.embedding_servers or [c.num_embedding_servers, 2 * c.num_embedding_servers]
    dense = grid.dense_servers or [c.num_dense_servers]
    return sorted(set(trainers)), sorted(set(embedding)), sorted(set(dense))


def readers_of(cluster: ClusterFile) -> list[int | None]:
    """Reader nodes tried: the file's `grid.readers`, or the job's own (None)."""
    readers = cluster.grid.readers
    return [None] if not readers else list(sorted(set(readers)))


def strategy_names(wanted: list[str] | None) -> list[str]:
    """The strategies to try: `wanted` (ConfigError naming --strategies for an unknown
    one), or every registered one."""
    known = list(STRATEGIES)
    if not wanted:
        return known
    unknown = [name for name in wanted if name not in known]
    if unknown:
        raise ConfigError(f"--strategies: unknown strategy {unknown}; known: {known}")
    return list(dict.fromkeys(wanted))


def check_plan(spec: JobSpec) -> None:
    """ConfigError (naming the key) where the job cannot be placed (its family's check:
    hierarchical training's group plan, say). The rest of the plan is made when the point
    is measured: it samples the data, which takes a second."""
    family_of(spec.strategy).check_job(spec)


def job_cores(spec: JobSpec) -> int:
    """Cores a job takes on a cluster: one a worker thread, one every other node."""
    cluster = spec.cluster
    servers = cluster.readers + cluster.num_embedding_servers
    servers += family_of(spec.strategy).dense_nodes(spec)
    return cluster.hogwild_threads + servers


def candidates(
    job: JobSource, cluster: ClusterFile, wanted: list[str] | None = None
) -> tuple[list[Candidate], list[Refusal]]:
    """Every strategy (or those `wanted`) at every grid point that fits the cluster, and
    what does not apply, with why. ConfigError when nothing fits the cluster's cores
    (naming machines.count and machines.cores), or when a strategy asked for by name
    applies at no grid point (naming the key its check names)."""
    base = job.config()
    workers = base.cluster.workers_per_trainer
    trainers, embedding, dense = grid_of(cluster, base)
    found: list[Candidate] = []
    refused: list[Refusal] = []
    smallest: int | None = None
    for name in strategy_names(wanted):
        table = base.strategy.model_dump() if base.strategy.name == name else {"name": name}
        has_dense = STRATEGIES[name].on_dense_servers
        one_rank = family_of_type(STRATEGIES[name]).ranks_are_trainers
        points = itertools.product(
            trainers, embedding, dense if has_dense else [None], readers_of(cluster)
        )
        for t, e, d, r in points:
            t_run, w_run = (t * workers, 1) if one_rank else (t, workers)
            changes: dict[str, Any] = {
                "cluster.num_trainers": t_run,
                "cluster.workers_per_trainer": w_run,
                "cluster.num_embedding_servers": e,
            }
            if d is not None:
                changes["cluster.num_dense_servers"] = d
            if r is not None:
                changes["cluster.num_readers"] = r
            point = f"{t_run}x{w_run} e{e}" + ("" if d is None else f" d{d}")
            point += "" if r is None else f" r{r}"
            try:
                config = job.config(changes, table)
                spec = job_spec(config)
                check_plan(spec)
            except ConfigError as error:
                refused.append(Refusal(name, point, str(error)))
                continue
            cores = job_cores(spec)
            smallest = cores if smallest is None else min(smallest, cores)
            reason = fits(cluster, cores, w_run)
            if reason is not None:
                refused.append(Refusal(name, point, reason))
                continue
            found.append(Candidate(name, t_run, w_run, e, d, changes, table, cores, r))
    per_machine = [r.reason for r in refused if r.reason.startswith("machines.cores:")]
    if not found and per_machine and len(per_machine) == len(refused):
        raise ConfigError(per_machine[0])
    if not found and smallest is not None:
        m = cluster.machines
        raise ConfigError(
            f"machines.count / machines.cores: {m.count} machine(s) x {m.cores} core(s) = "
            f"{cluster.total_cores} core(s), too few for the smallest job of the grid, which "
            f"takes {smallest} (a core per worker thread, one per other node); raise "
            "machines.count or machines.cores, or lower the job's counts"
        )
    for name in wanted or []:
        if not any(c.strategy == name for c in found):
            reasons = sorted({r.reason for r in refused if r.strategy == name})
            raise ConfigError(
                f"--strategies {name}: applies at no grid point: {'; '.join(reasons)}"
            )
    return found, refused


def fits(cluster: ClusterFile, cores: int, workers_per_trainer: int) -> str | None:
    """Why a job of `cores` cores and trainers of `workers_per_trainer` worker threads
    does not fit the cluster (None: it fits; on a shared machine, any job does)."""
    m = cluster.machines
    if m.shared:  # its nodes queue for its cores: the simulator prices that
        return None
    if workers_per_trainer > m.cores:
        return (
            f"machines.cores: a trainer's {workers_per_trainer} worker threads need as many "
            f"cores on one machine, which has {m.cores}"
        )
    if cores > cluster.total_cores:
        return f"machines.count x machines.cores: takes {cores} cores, the cluster has " + str(
            cluster.total_cores
        )
    return None
