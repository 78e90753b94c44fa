"""Every strategy by name, as its family registered it.

The kernel imports no family: each family lists its strategies' configs, and the one list of
families (recsync/families/__init__.py) registers them here when it is imported. Importing
any strategy config imports that package first, so a process that unpickled a job has every
family registered; a lookup by name before any of that (the controller's names, one family
naming another's strategy) loads the package by its name, as a plugin is loaded. See
docs/strategies.md for the strategies.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Mapping

from recsync.strategy.config import StrategyConfig
from recsync.strategy.staleness_norm import StalenessNorm
from recsync.strategy.timing import Timing

FAMILIES_PACKAGE = "recsync.families"  # registers every family's strategies on import
STRATEGIES: dict[str, type[StrategyConfig]] = {}
# nested config tables given as mappings of their fields
_NESTED: dict[str, type] = {"timing": Timing, "staleness_norm": StalenessNorm}


def register_strategy(cls: type[StrategyConfig]) -> None:
    """Make strategy `cls` known by its `name` (ValueError for a name another class has)."""
    known = STRATEGIES.get(cls.name)
    if known is not None and known is not cls:
        raise ValueError(f"strategy {cls.name!r} is registered twice: {known} and {cls}")
    STRATEGIES[cls.name] = cls


def load_families() -> None:
    """Import the list of families (which registers them), by its name."""
    importlib.import_module(FAMILIES_PACKAGE)


def strategy_class(name: str) -> type[StrategyConfig]:
    """The config class of strategy `name` (ValueError for an unknown name)."""
    if name not in STRATEGIES:
        load_families()
    try:
        return STRATEGIES[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown strategy {name!r}; known: {sorted(STRATEGIES)}") from None


def forget_strategy(cls: type[StrategyConfig]) -> None:
    """Forget strategy `cls` (a test's, registered for a while)."""
    assert STRATEGIES.get(cls.name) is cls, cls
    del STRATEGIES[cls.name]


def strategy_fields(name: str) -> list[str]:
    """The fields strategy `name` takes (ValueError for an unknown name)."""
    cls = strategy_class(name)
    return [f.name for f in dataclasses.fields(cls)]  # type: ignore[arg-type]


def strategy_config(name: str, **fields_: object) -> StrategyConfig:
    """The config of strategy ``name`` built from keyword fields; ``timing`` and
    ``staleness_norm`` may be given as mappings of their fields. ValueError for an unknown
    name or field, or a value the config rejects."""
    cls = strategy_class(name)
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
    return cls(**fields_)
