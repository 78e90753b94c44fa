"""Every strategy by name: the one registry a new strategy is added to.

Replica family (ShadowSync): ``independent``, ``easgd``, ``ma``, ``bmuf``, each in ``shadow``
or ``fixed`` timing. Gradient family: ``async`` (Downpour), ``sync``, ``bsp``,
``bounded_staleness`` (Hop-BS), ``backup_workers`` (Hop-BW), ``gba`` and ``psp``. All-reduce
family: ``allreduce``. Hierarchical training: ``hierarchical``. See docs/strategies.md.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from recsync.sync.allreduce import AllReduceConfig
from recsync.sync.asynchronous import AsyncConfig
from recsync.sync.backup_workers import BackupWorkersConfig
from recsync.sync.bmuf import BmufConfig
from recsync.sync.bounded_staleness import BoundedStalenessConfig
from recsync.sync.bsp import BspConfig
from recsync.sync.easgd import EasgdConfig
from recsync.sync.family import StrategyFamily
from recsync.sync.gba import GbaConfig
from recsync.sync.hierarchical import HierarchicalConfig
from recsync.sync.independent import IndependentConfig
from recsync.sync.ma import MaConfig
from recsync.sync.psp import PspConfig
from recsync.sync.staleness_norm import StalenessNorm
from recsync.sync.synchronous import SyncConfig
from recsync.sync.timing import Timing

StrategyConfig = (
    IndependentConfig
    | EasgdConfig
    | MaConfig
    | BmufConfig
    | AsyncConfig
    | SyncConfig
    | BspConfig
    | BoundedStalenessConfig
    | BackupWorkersConfig
    | GbaConfig
    | PspConfig
    | AllReduceConfig
    | HierarchicalConfig
)

STRATEGIES: dict[str, type[StrategyFamily]] = {
    cls.name: cls
    for cls in (
        IndependentConfig,
        EasgdConfig,
        MaConfig,
        BmufConfig,
        AsyncConfig,
        SyncConfig,
        BspConfig,
        BoundedStalenessConfig,
        BackupWorkersConfig,
        GbaConfig,
        PspConfig,
        AllReduceConfig,
        HierarchicalConfig,
    )
}
# nested config tables given as mappings of their fields
_NESTED: dict[str, type] = {"timing": Timing, "staleness_norm": StalenessNorm}


def strategy_fields(name: str) -> list[str]:
    """The fields strategy `name` takes (ValueError for an unknown name)."""
    cls = _strategy_class(name)
    return [f.name for f in dataclasses.fields(cls)]  # type: ignore[arg-type]


def strategy_config(name: str, **fields_: object) -> StrategyConfig:
    """The config of strategy ``name`` built from keyword fields; ``timing`` and
    ``staleness_norm`` may be given as mappings of their fields. ValueError for an unknown
    name or field, or a value the config rejects."""
    cls = _strategy_class(name)
    known = strategy_fields(name)
    unknown = sorted(set(fields_) - set(known))
    if unknown:
        raise ValueError(f"{name}: unknown field(s) {unknown}; known: {known}")
    for key, nested in _NESTED.items():
        value = fields_.get(key)
        if isinstance(value, Mapping):
            nested_known = [f.name for f in dataclasses.fields(nested)]
            bad = sorted(set(value) - set(nested_known))
            if bad:
                raise ValueError(f"{name}.{key}: unknown field(s) {bad}; known: {nested_known}")
            fields_[key] = nested(**value)
    config = cls(**fields_)
    assert isinstance(config, StrategyConfig)
    return config


def _strategy_class(name: str) -> type[StrategyFamily]:
    try:
        return STRATEGIES[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown strategy {name!r}; known: {sorted(STRATEGIES)}") from None
