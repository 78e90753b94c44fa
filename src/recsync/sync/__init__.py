"""Synchronization policies: pure state machines (events in, decisions out), no clocks,
threads or transport; both drivers execute them.

Replica strategies (dense part replicated on the trainers; ShadowSync, Zheng et al. 2020):
``independent``, ``easgd``, ``ma``, ``bmuf``, each in ``shadow`` or ``fixed`` timing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields
from typing import Any

from recsync.sync.bmuf import BmufConfig, BmufReplica
from recsync.sync.easgd import EasgdCenter, EasgdConfig
from recsync.sync.independent import IndependentConfig
from recsync.sync.ma import MaConfig
from recsync.sync.timing import FixedTrigger, Timing, average_sync_gap

ReplicaStrategyConfig = IndependentConfig | EasgdConfig | MaConfig | BmufConfig

REPLICA_STRATEGIES: dict[str, type[ReplicaStrategyConfig]] = {
    "independent": IndependentConfig,
    "easgd": EasgdConfig,
    "ma": MaConfig,
    "bmuf": BmufConfig,
}


def replica_strategy_config(name: str, **fields_: Any) -> ReplicaStrategyConfig:
    """The config of replica strategy ``name`` built from keyword fields; ``timing`` may be a
    Timing or a mapping of its fields. ValueError for an unknown name or field."""
    try:
        cls = REPLICA_STRATEGIES[name]
    except (KeyError, TypeError):
        raise ValueError(
            f"unknown replica strategy {name!r}; known: {sorted(REPLICA_STRATEGIES)}"
        ) from None
    known = [f.name for f in fields(cls)]
    unknown = sorted(set(fields_) - set(known))
    if unknown:
        raise ValueError(f"{name}: unknown field(s) {unknown}; known: {known}")
    timing = fields_.get("timing")
    if isinstance(timing, Mapping):
        timing_known = [f.name for f in fields(Timing)]
        bad = sorted(set(timing) - set(timing_known))
        if bad:
            raise ValueError(f"{name}.timing: unknown field(s) {bad}; known: {timing_known}")
        fields_["timing"] = Timing(**timing)
    return cls(**fields_)


__all__ = [
    "REPLICA_STRATEGIES",
    "BmufConfig",
    "BmufReplica",
    "EasgdCenter",
    "EasgdConfig",
    "FixedTrigger",
    "IndependentConfig",
    "MaConfig",
    "ReplicaStrategyConfig",
    "Timing",
    "average_sync_gap",
    "replica_strategy_config",
]
