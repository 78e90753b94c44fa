"""[strategy]: one section per strategy, generated from its config dataclass, told apart by
`name` (a discriminated union); `reference` (the single-process trainer) takes no keys.

A replica strategy's timing is the nested table [strategy.timing] (strategy/timing.py), the
async family's staleness normalization [strategy.staleness_norm]. The dataclasses'
`__post_init__` is the one place values are checked; `strategy_spec` turns their
ValueError into a ConfigError naming the full key. Keys of the flat table this replaced
(`timing = "fixed"`, `every_iterations`, ...) are rewritten to their new place by
`rewrite_flat_keys`, which says so.
"""

from __future__ import annotations

import typing
from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, Field, create_model

from recsync.app.config.base import (
    Section,
    build_dataclass,
    dataclass_doc,
    dataclass_of,
    error_key,
    section_from_dataclass,
)
from recsync.errors import ConfigError
from recsync.families import STRATEGIES, strategy_config, strategy_fields
from recsync.strategy.config import StrategyConfig

REFERENCE = "reference"
TIMING = "timing"
# keys of the old flat [strategy] table that now sit in [strategy.timing]
FLAT_TIMING_KEYS = {
    TIMING: "mode",
    "every_iterations": "every_iterations",
    "every_seconds": "every_seconds",
    "shadow_min_gap": "shadow_min_gap",
}


class StrategyTable(Section):
    """A [strategy] table: `distributed`, whether its job runs on a cluster's nodes (a
    registered strategy) or in this process (the reference trainer)."""

    distributed: ClassVar[bool] = True


NAME_DOC = "The strategy; its name decides which other keys [strategy] takes."


class ReferenceSection(StrategyTable):
    """The single-process reference trainer: no cluster, no other key."""

    distributed: ClassVar[bool] = False
    name: Literal["reference"] = Field(default="reference", description=NAME_DOC)


def _strategy_section(name: str, cls: type) -> type[Section]:
    doc = dataclass_doc(cls)
    keys = section_from_dataclass(cls).model_fields
    return create_model(  # type: ignore[call-overload, no-any-return]
        f"{cls.__name__}Strategy",
        __base__=StrategyTable,
        __doc__=doc,
        name=(Literal[name], Field(default=name, description=NAME_DOC)),
        **{key: (field.annotation, field) for key, field in keys.items()},
    )


SECTIONS: dict[str, type[Section]] = {
    REFERENCE: ReferenceSection,
    **{name: _strategy_section(name, cls) for name, cls in STRATEGIES.items()},
}
if typing.TYPE_CHECKING:  # as far as the rest of the app reads a [strategy] section

    class StrategySection(StrategyTable):
        name: str

else:
    StrategySection = Annotated[
        typing.Union[tuple(SECTIONS.values())],  # noqa: UP007
        Field(discriminator="name"),
    ]


def default_strategy() -> StrategySection:
    """The section of the default strategy (EASGD, shadow timing)."""
    return typing.cast(StrategySection, SECTIONS["easgd"]())


def section_keys(name: str) -> list[str]:
    """The keys [strategy] takes when its name is `name` (name itself included)."""
    return list(SECTIONS[name].model_fields)


def rewrite_flat_keys(table: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """[strategy] with the old flat spellings moved to their place, and a deprecation
    message per moved key; a flat timing key of a strategy without timing (which it
    ignored) is dropped, with a message. Other keys are left to the section to accept or
    reject."""
    table, messages = dict(table), list[str]()
    name = table.get("name")
    if name not in SECTIONS or name == REFERENCE:
        return table, messages
    own = strategy_fields(name)
    timing = table.get(TIMING)
    flat = [k for k in FLAT_TIMING_KEYS if k != TIMING and k in table and k not in own]
    if isinstance(timing, str):
        flat.insert(0, TIMING)
    if not flat:
        return table, messages
    if TIMING not in own:
        for key in flat:
            del table[key]
        listed = ", ".join(f"strategy.{k}" for k in flat)
        messages.append(
            f"{listed}: deprecated flat timing key(s), and {name!r} has no timing: ignored; "
            "remove them"
        )
        return table, messages
    nested = dict(timing) if isinstance(timing, Mapping) else {}
    for key in flat:
        new = FLAT_TIMING_KEYS[key]
        nested[new] = table.pop(key)
        messages.append(
            f"strategy.{key} is deprecated: write strategy.timing.{new} "
            f"([strategy.timing] {new} = {nested[new]!r})"
        )
    table[TIMING] = nested
    return table, messages


def unknown_key_message(loc: tuple[str | int, ...]) -> str | None:
    """For pydantic's error location of an unknown key in [strategy] or a table in it
    (`("strategy", <name>, ..., <key>)`): what to say, with the keys that table takes."""
    if len(loc) < 3 or loc[0] != "strategy" or loc[1] not in SECTIONS:
        return None
    name = str(loc[1])
    if len(loc) == 3:
        return f"unknown key for strategy {name!r}; it takes: {', '.join(section_keys(name))}"
    model: type[BaseModel] = SECTIONS[name]
    for part in loc[2:-1]:
        hint = model.model_fields[str(part)].annotation
        members = typing.get_args(hint) or (hint,)
        model = next(m for m in members if isinstance(m, type) and issubclass(m, BaseModel))
    table = ".".join(str(part) for part in ("strategy", *loc[2:-1]))
    return f"unknown key; {table} takes: {', '.join(model.model_fields)}"


def strategy_spec(section: BaseModel) -> StrategyConfig | None:
    """The strategy's config dataclass from its section; None for the reference trainer.
    A value its dataclass rejects raises ConfigError naming the full key."""
    name = getattr(section, "name")  # noqa: B009 (every member of the union has one)
    if name == REFERENCE:
        return None
    hints = typing.get_type_hints(STRATEGIES[name])
    fields = strategy_fields(name)
    values: dict[str, Any] = {}
    for key in fields:
        value = getattr(section, key)
        if isinstance(value, BaseModel):
            value = build_dataclass(dataclass_of(hints[key]), value, f"strategy.{key}")
        values[key] = value
    try:
        return strategy_config(name, **values)
    except ValueError as error:
        raise ConfigError(f"{error_key('strategy', fields, str(error))}: {error}") from None
