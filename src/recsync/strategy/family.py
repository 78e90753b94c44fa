"""The interface every strategy family implements, and the registry of the families.

A family is a package under recsync/families/ with one `Family` subclass: its strategies'
configs, the servers of the dense part its jobs run (and what each trainer talks to), its
trainer, the reader's tokens, its collectives, why its workers cannot be processes, its
final dense model and optimizer state (and any state of its own a resumed job needs), its
measures in the summary, its cluster checks, its rows of `recsync plan` and the recoveries
it supports. Nothing below the families (this package, protocol/, ps/, trainer/,
coordinator/) imports one: `register_family` (called by the one list of families,
recsync/families/__init__.py) makes a family known, and `family_of` finds a strategy's
family by the most specific registered base type of its config.

The hooks name the specs a family builds and reads (the job's, its nodes', its plan), which
sit above this package: they are imported for the type checker alone, so the kernel runs
below the servers, the trainers and the coordinator that call it.
"""

from __future__ import annotations

import importlib
import os
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import torch

from recsync.model.spec import ModelSpec
from recsync.protocol.address import Role
from recsync.protocol.node import Node
from recsync.strategy.config import StrategyConfig
from recsync.strategy.gradient import ServerPolicies, Tokens
from recsync.strategy.registry import forget_strategy, load_families, register_strategy
from recsync.strategy.roles import RoleTraits, declare_roles, forget_roles

if TYPE_CHECKING:  # the specs a family builds and reads, named by its hooks alone
    from recsync.coordinator.node_specs import BuildContext, Collectives, NodeSpec, TrainerSpec
    from recsync.coordinator.spec import ClusterSpec, JobSpec
    from recsync.ps.placement import JobPlan
    from recsync.trainer.stats import TrainerReport, Wiring

PLUGIN_FAMILIES = "RECSYNC_FAMILIES"  # modules of families outside recsync's package
Reports = Callable[[Role], list[Any]]  # the nodes' reports of one role, in index order


class Family(ABC):
    """A strategy family: `base` the type every config of it derives from, `strategies`
    the configs registered by name (a new strategy of the family: one module and its entry
    here). The defaults are what a family without servers of the dense part does: its
    trainers hold replicas, its shards are Hogwild, its workers may be processes."""

    base: ClassVar[type[StrategyConfig]]
    strategies: ClassVar[tuple[type[StrategyConfig], ...]]
    roles: ClassVar[Mapping[Role, RoleTraits]] = {}  # its own servers' roles (Role.declare)
    # the role of the servers that hold the dense part (None: none, or a hook says more)
    dense_role: ClassVar[Role | None] = None

    @abstractmethod
    def trainer(self, spec: TrainerSpec, context: BuildContext) -> Node:
        """The trainer node `spec` describes."""

    def dense_servers(self, spec: JobSpec, plan: JobPlan, initial: torch.Tensor) -> list[NodeSpec]:
        """The servers of the dense part (none: the trainers hold it)."""
        return []

    def trainer_wiring(self, spec: JobSpec, trainer: int, wiring: Wiring) -> Wiring:
        """What trainer `trainer` talks to (by default what every trainer does)."""
        return wiring

    def shard_policy(self, strategy: StrategyConfig) -> ServerPolicies | None:
        """The strategy whose policy the embedding shards run (None: Hogwild shards)."""
        return None

    def tokens(self, strategy: StrategyConfig, workers: int) -> Tokens | None:
        """The tokens the reader hands with the batches (None: none)."""
        return None

    def collectives(
        self, spec: JobSpec, servers: Sequence[NodeSpec], trainers: Sequence[NodeSpec]
    ) -> Collectives:
        """Which nodes all-reduce together, in rank order (none by default)."""
        return ()

    def process_refusal(self, strategy: StrategyConfig) -> str | None:
        """Why its trainers' workers cannot run in processes of their own (None: they can)."""
        return None

    def check_cluster(self, strategy: StrategyConfig, cluster: ClusterSpec) -> None:
        """A ValueError naming the `cluster.<key>` the strategy cannot run with (none by
        default)."""
        return None

    def check_model(self, strategy: StrategyConfig, model: ModelSpec) -> None:
        """A ValueError naming the `model.<key>` the strategy cannot train (none by
        default)."""
        return None

    @abstractmethod
    def final_dense(self, spec: JobSpec, reports: Reports) -> torch.Tensor:
        """The dense model the job ends with."""

    def final_optimizer(self, spec: JobSpec, reports: Reports) -> tuple[dict[str, Any], int]:
        """The dense part's optimizer state at the end, and the global steps the job took
        (by default trainer 0's state and every trainer's iterations)."""
        trainers: list[TrainerReport] = reports(Role.TRAINER)
        assert trainers[0].optimizer is not None
        return trainers[0].optimizer, sum(t.stats.total_iterations for t in trainers)

    def state(self, spec: JobSpec, reports: Reports) -> dict[str, Any] | None:
        """What a job of this family resumes from beyond the dense model and its optimizer
        state (`JobState.family_state`; None: nothing)."""
        return None

    def state_roles(self, strategy: StrategyConfig) -> tuple[Role, ...]:
        """The roles, besides those that hold the model, whose reports `state` reads (a cut
        asks them too)."""
        return ()

    @abstractmethod
    def measures(self, spec: JobSpec, reports: Reports, train_seconds: float) -> dict[str, Any]:
        """Its own measures in the run's summary."""

    def plan_view(self, spec: JobSpec) -> list[Any]:
        """More of `recsync plan` than the placement table (rich renderables; none)."""
        return []

    def partial_shards(self, strategy: StrategyConfig) -> bool:
        """An embedding shard lost may come back alone from the last cut (recovery
        `partial`): its shards run no policy the workers wait on."""
        return False

    def restarts_trainer(self, strategy: StrategyConfig) -> bool:
        """A trainer lost may restart alone (recovery `restart`): nothing waits for every
        worker."""
        return False

    def restart_roles(self, strategy: StrategyConfig) -> tuple[Role, ...]:
        """The roles whose reports a lost trainer's next replica is made from (none: from
        the last cut)."""
        return ()

    def restarted_dense(self, spec: JobSpec, reports: Reports) -> torch.Tensor | None:
        """A lost trainer's next replica from the reports of `restart_roles` (None: from
        the last cut)."""
        return None

    # what the app asks of a job without knowing its family (advice, calibration, the
    # simulator's math modes)

    ranks_are_trainers: ClassVar[bool] = False  # one worker a trainer (a rank): advice
    # gives it a grid point's worker threads as that many one-worker trainers

    def check_job(self, spec: JobSpec) -> None:
        """A ValueError naming the key where the job cannot be placed (none by default)."""
        return None

    def dense_nodes(self, spec: JobSpec) -> int:
        """The nodes the dense part's servers take (by default one a block of the job
        plan: `cluster.num_dense_servers` for a strategy `dense_in_blocks`, else none)."""
        return spec.dense_blocks

    def first_dense_server(self, spec: JobSpec) -> str | None:
        """The name of the first server holding the dense part (the one a slow-server
        condition slows; None: the trainers hold it)."""
        role = self.dense_role
        return f"{role.value}-0" if role is not None and self.dense_nodes(spec) else None

    def dense_server_work(
        self, values: torch.Tensor, optimizer: Any
    ) -> Callable[[], object] | None:
        """One request of its dense servers on the flat dense `values` (`optimizer`: the
        job's dense optimizer for them), which the calibration times (None: its servers,
        if any, do no per-value work of their own)."""
        return None

    def values_needed_by(self, strategy: StrategyConfig) -> str | None:
        """The strategy option that needs the model's values, which priced math does not
        keep (None: none)."""
        return None


_FAMILIES: dict[type[StrategyConfig], Family] = {}


def register_family(family: Family) -> None:
    """Make `family` and its strategies known (recsync/families/__init__.py calls this)."""
    known = _FAMILIES.get(family.base)
    assert known is None or type(known) is type(family), (known, family)
    _FAMILIES[family.base] = family
    declare_roles(family.roles)
    for strategy in family.strategies:
        add_strategy(strategy)


def unregister_family(family: Family) -> None:
    """Forget a family registered with `register_family` (a test's), its strategies and its
    roles."""
    assert _FAMILIES.get(family.base) is family, family
    del _FAMILIES[family.base]
    forget_roles(family.roles, [f.roles for f in _FAMILIES.values()])
    for strategy in family.strategies:
        forget_strategy(strategy)


def add_strategy(cls: type[StrategyConfig]) -> None:
    """Make strategy `cls` known by its name: the extension point of a registered family (a
    strategy defined outside its package, such as a test's, is added with this)."""
    family_of_type(cls)
    register_strategy(cls)


def families() -> list[Family]:
    """The registered families, in the order they were registered."""
    if not _FAMILIES:
        load_families()
    return list(_FAMILIES.values())


def family_of(strategy: StrategyConfig) -> Family:
    """The registered family of a strategy (its most specific registered base type)."""
    return family_of_type(type(strategy))


def family_of_type(cls: type[StrategyConfig]) -> Family:
    """The registered family of strategy config class `cls` (a family outside recsync's
    package is looked for in `$RECSYNC_FAMILIES`'s modules first)."""
    if not _FAMILIES:
        load_families()
    family = _registered(cls)
    if family is None:
        load_plugin_families()
        family = _registered(cls)
    if family is None:
        raise ValueError(f"{cls.__name__} is of no registered strategy family")
    return family


def _registered(cls: type[StrategyConfig]) -> Family | None:
    """The family registered for the most specific base type of `cls`, if any."""
    return next((_FAMILIES[kind] for kind in cls.__mro__ if kind in _FAMILIES), None)


def load_plugin_families() -> None:
    """Register the families of the modules `$RECSYNC_FAMILIES` names (comma-separated, each
    importable and holding its `Family` as `FAMILY`): a family outside recsync's package,
    which every process of a job (each Ray worker) must know to build its nodes."""
    for name in filter(None, (n.strip() for n in os.environ.get(PLUGIN_FAMILIES, "").split(","))):
        family = importlib.import_module(name).FAMILY
        if _FAMILIES.get(family.base) is not family:
            register_family(family)
