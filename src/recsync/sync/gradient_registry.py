"""The gradient strategies (dense parameters on dense servers; design.md section 3) by name.

``async`` (Downpour), ``sync``, ``bsp``, ``bounded_staleness`` (Hop-BS), ``backup_workers``
(Hop-BW), ``gba`` and ``psp``; ``gradient_strategy_config`` builds one from keyword fields,
like ``replica_strategy_config`` for the replica strategies.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields
from typing import Any

from recsync.sync.allreduce import AllReduceConfig
from recsync.sync.asynchronous import AsyncConfig
from recsync.sync.backup_workers import BackupWorkersConfig
from recsync.sync.bounded_staleness import BoundedStalenessConfig
from recsync.sync.bsp import BspConfig
from recsync.sync.gba import GbaConfig
from recsync.sync.psp import PspConfig
from recsync.sync.staleness_norm import StalenessNorm
from recsync.sync.synchronous import SyncConfig

GradientStrategyConfig = (
    AllReduceConfig
    | AsyncConfig
    | SyncConfig
    | BspConfig
    | BoundedStalenessConfig
    | BackupWorkersConfig
    | GbaConfig
    | PspConfig
)

GRADIENT_STRATEGIES: dict[str, type] = {
    cls.name: cls
    for cls in (
        AllReduceConfig,
        AsyncConfig,
        SyncConfig,
        BspConfig,
        BoundedStalenessConfig,
        BackupWorkersConfig,
        GbaConfig,
        PspConfig,
    )
}


def gradient_strategy_config(name: str, **fields_: Any) -> GradientStrategyConfig:
    """The config of gradient strategy ``name`` built from keyword fields; ``staleness_norm``
    may be a StalenessNorm or a mapping of its fields. ValueError for an unknown name or
    field."""
    try:
        cls = GRADIENT_STRATEGIES[name]
    except (KeyError, TypeError):
        raise ValueError(
            f"unknown gradient strategy {name!r}; known: {sorted(GRADIENT_STRATEGIES)}"
        ) from None
    known = [f.name for f in fields(cls)]
    unknown = sorted(set(fields_) - set(known))
    if unknown:
        raise ValueError(f"{name}: unknown field(s) {unknown}; known: {known}")
    norm = fields_.get("staleness_norm")
    if isinstance(norm, Mapping):
        norm_known = [f.name for f in fields(StalenessNorm)]
        bad = sorted(set(norm) - set(norm_known))
        if bad:
            raise ValueError(f"{name}.staleness_norm: unknown field(s) {bad}; known: {norm_known}")
        fields_["staleness_norm"] = StalenessNorm(**norm)
    return cls(**fields_)


__all__ = ["GRADIENT_STRATEGIES", "GradientStrategyConfig", "gradient_strategy_config"]
