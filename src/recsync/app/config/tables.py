"""[[model.tables]] checked: each table's kind (its own, or model.table_kind's), the
entries against the data and the rest of [model], a hash table's own admission and
eviction, and the rows of a job whose tables mix hash and fixed. `Config` builds the
ModelSpec from them (app/config/schema.py)."""

from __future__ import annotations

import dataclasses
from typing import Any

from recsync.app.config.base import build_dataclass
from recsync.app.config.model import ModelSection, TableSection
from recsync.errors import ConfigError
from recsync.model.hash_spec import Admission, Eviction, HashTables


def default_kind(model: ModelSection, source: str) -> str:
    """The kind of a table that gives none: model.table_kind's; "auto": the one kind
    [[model.tables]] gives, else hash for file data without table_rows, fixed otherwise."""
    kind = model.table_kind
    if kind != "auto":
        return kind
    given = {t.kind for t in model.tables or () if t.kind is not None}
    if len(given) == 1:
        return given.pop()
    fixed = source == "synthetic" or model.table_rows is not None
    return "fixed" if fixed else "hash"


def table_kinds(model: ModelSection, source: str) -> list[str]:
    """Each listed table's kind, its own or the default (one entry, the default's, when
    [[model.tables]] is not given)."""
    default = default_kind(model, source)
    return [t.kind or default for t in model.tables or ()] or [default]


def listed_tables(
    model: ModelSection, source: str, num_tables: int | None, names: list[str] | None
) -> list[TableSection] | None:
    """[[model.tables]] checked against the data (its `num_tables` categorical columns,
    their `names` where it has them) and the rest of [model] (None: not given)."""
    listed = model.tables
    if listed is None:
        return None
    if not listed:
        raise ConfigError("model.tables: give at least one table, or leave it out")
    if num_tables is not None and len(listed) != num_tables:
        raise ConfigError(
            f"model.tables: {len(listed)} tables, but the data has {num_tables} "
            "categorical columns (one table each)"
        )
    seen: dict[str, int] = {}
    for i, (t, kind) in enumerate(zip(listed, table_kinds(model, source), strict=True)):
        key = f"model.tables[{i}]"
        if not t.name:
            raise ConfigError(f"{key}.name: must not be empty")
        if t.name in seen:
            raise ConfigError(f"{key}.name: {t.name!r} is model.tables[{seen[t.name]}]'s too")
        seen[t.name] = i
        if names is not None and t.name != names[i]:
            raise ConfigError(
                f"{key}.name: {t.name!r}, but the data's categorical column {i} is "
                f"{names[i]!r} (the tables follow the columns' order)"
            )
        if t.dim is not None and t.dim < 1:
            raise ConfigError(f"{key}.dim: must be >= 1, got {t.dim}")
        if t.rows is not None and t.rows < 1:
            raise ConfigError(f"{key}.rows: must be >= 1, got {t.rows}")
        if t.rows is not None and model.table_rows is not None:
            raise ConfigError(f"{key}.rows: give the rows either here or in model.table_rows")
        for name in ("admission", "eviction"):
            if getattr(t, name) is not None and kind != "hash":
                raise ConfigError(
                    f"{key}.{name}: only hash tables admit and evict rows (this one is fixed)"
                )
    return listed


def own_policies(
    i: int, t: TableSection, hash_tables: HashTables
) -> tuple[Admission | None, Eviction | None]:
    """Table i's own admission and eviction: its keys over model.hash_tables' (None where
    it sets none)."""
    own: list[Any] = []
    for name, cls in (("admission", Admission), ("eviction", Eviction)):
        section = getattr(t, name)
        if section is None:
            own.append(None)
            continue
        given = {k: v for k, v in section.model_dump().items() if v is not None}
        values = dataclasses.asdict(getattr(hash_tables, name)) | given
        own.append(build_dataclass(cls, values, f"model.tables[{i}].{name}"))
    return own[0], own[1]


def mixed_rows(
    entries: list[TableSection], kinds: list[str], data_rows: tuple[int, ...] | None
) -> list[int]:
    """The rows of tables of both kinds where some give none: the data's (synthetic), a
    fixed table's own (required), a hash table's own or 1 (its expected ids unknown)."""
    rows = []
    for i, (t, kind) in enumerate(zip(entries, kinds, strict=True)):
        if t.rows is not None:
            rows.append(t.rows)
        elif data_rows is not None:
            rows.append(data_rows[i])
        elif kind == "fixed":
            raise ConfigError(
                f"model.tables[{i}].rows: a fixed table among hash tables needs its rows "
                "(here, or every table's in model.table_rows)"
            )
        else:
            rows.append(1)
    return rows
