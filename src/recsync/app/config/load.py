"""Loading a run configuration: the embedded default, a TOML file, replaced sections and
`--set` overrides layered in that order, validated by `Config` with errors that name the
source and the full dotted key."""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any

import pyarrow as pa
from pydantic import ValidationError

from recsync.app.config.data import TABULAR_FORMATS, file_paths
from recsync.app.config.job import refuse_retired_keys
from recsync.app.config.schema import Config
from recsync.app.config.strategy import SECTIONS, unknown_key_message
from recsync.errors import ConfigError, DataError
from recsync.io.columns import infer_columns, table_sample
from recsync.io.libffm_fields import libffm_fields
from recsync.io.storage import exists
from recsync.io.urls import shown

DEFAULT_SOURCE = "<embedded default.toml>"


def merge_tables(base: dict[str, Any], update: Mapping[str, Any]) -> dict[str, Any]:
    """`base` updated by `update`, tables merged key by key at every depth."""
    merged = dict(base)
    for key, value in update.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), dict):
            merged[key] = merge_tables(merged[key], value)
        else:
            merged[key] = value
    return merged


def _apply_override(tree: dict[str, Any], dotted: str, value: Any) -> None:
    *parents, leaf = dotted.split(".")
    node = tree
    for depth, part in enumerate(parents):
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise ConfigError(f"{'.'.join(parents[: depth + 1])}: is a value, not a table")
        node = child
    node[leaf] = value


def _read_toml(text: str, source: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"{source}: invalid TOML: {error}") from None


def read_toml_file(path: str | Path, what: str) -> dict[str, Any]:
    """The tables of the TOML file at `path`; ConfigError naming `what` ("cost profile",
    "cluster file") and the file where it cannot be read or is not TOML."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as error:
        raise ConfigError(f"{what} {path}: cannot read it: {error.strerror}") from None
    except UnicodeDecodeError as error:
        raise ConfigError(f"{what} {path}: invalid TOML: {error}") from None
    return _read_toml(text, f"{what} {path}")


def _dotted(loc: tuple[str | int, ...]) -> str:
    """'train.sparse_optimizer.lr' from a pydantic error location (union tags dropped:
    type names, and the strategy's name after "strategy")."""
    key = ""
    for index, part in enumerate(loc):
        if index == 1 and loc[0] == "strategy" and part in SECTIONS:
            continue
        if isinstance(part, int):
            key += f"[{part}]"
        elif part.isidentifier() and part not in ("int", "float", "str", "bool", "list"):
            key += f".{part}" if key else part
    return key


def validation_message(error: ValidationError, source: str) -> str:
    """One line naming `source` and each rejected key with what is wrong with it."""
    messages: dict[str, list[str]] = {}
    for detail in error.errors():
        kind = detail["type"]
        message = {"extra_forbidden": "unknown key", "missing": "required key is missing"}.get(
            kind, detail["msg"]
        )
        key = _dotted(detail["loc"])
        if kind == "extra_forbidden":
            message = unknown_key_message(detail["loc"]) or message
        if kind == "union_tag_invalid":  # a table told apart by a key (strategy.name)
            context = detail.get("ctx", {})
            key += "." + str(context.get("discriminator", "")).strip("'")
            message = f"{context.get('tag')!r} is none of {context.get('expected_tags')}"
        messages.setdefault(key, []).append(message)
    return f"{source}: " + "; ".join(f"{k}: {' or '.join(v)}" for k, v in messages.items())


def default_toml() -> str:
    """The text of the embedded default configuration."""
    return (
        resources.files("recsync.app.config").joinpath("default.toml").read_text(encoding="utf-8")
    )


def parse_overrides(assignments: list[str]) -> dict[str, Any]:
    """{'train.batch_size': 128} from ['train.batch_size=128']; a value is read as TOML
    (numbers, booleans, lists, quoted strings) or else taken as a bare string."""
    overrides: dict[str, Any] = {}
    for assignment in assignments:
        key, sep, text = assignment.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set {assignment!r}: expected key=value")
        try:
            value = tomllib.loads(f"value = {text}")["value"]
        except tomllib.TOMLDecodeError:
            value = text
        overrides[key.strip()] = value
    return overrides


def load_config(
    path: str | Path | None = None,
    overrides: Mapping[str, Any] | None = None,
    sections: Mapping[str, dict[str, Any]] | None = None,
    table: Mapping[str, Any] | None = None,
) -> Config:
    """The embedded default, updated by the file at `path` (if any), then by `table` (a
    config as nested tables, as a file reads), with whole `sections` replaced (e.g. a new
    [strategy] for a resumed run), then by `overrides` (dotted keys); validated, and
    checked by building its specs."""
    source = DEFAULT_SOURCE
    tree = _read_toml(default_toml(), source)
    if path is not None:
        source = str(path)
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as error:
            raise ConfigError(f"{source}: cannot read config: {error.strerror}") from None
        tree = merge_tables(tree, _read_toml(text, source))
    if table:
        source = "the config given" if path is None else f"{source} and the config given"
        tree = merge_tables(tree, table)
    for section, table in (sections or {}).items():
        tree[section] = dict(table)
    if overrides:
        keys = sorted(overrides)
        more = f" and {len(keys) - 4} more" if len(keys) > 4 else ""
        source += f" with {', '.join(keys[:4])}{more} overridden"
        for key, value in overrides.items():
            _apply_override(tree, key, value)
    try:
        refuse_retired_keys(tree)
        config = Config.model_validate(tree)
        columns = _inferred_columns(config)
        if columns:
            tree = merge_tables(tree, {"data": {"schema": columns}})
            config = Config.model_validate(tree)
        tables = _libffm_tables(config)
        if tables is not None:
            config = Config.model_validate(merge_tables(tree, {"model": {"num_tables": tables}}))
        config.to_specs()
    except ValidationError as error:
        raise ConfigError(validation_message(error, source)) from None
    except ConfigError as error:
        raise ConfigError(f"{source}: {error}") from None
    return config


def _first_file(config: Config) -> str | None:
    """data.path's first file (a directory's or a glob's first), if it is there."""
    paths = file_paths(config.data.path, config.data.storage)
    return paths[0] if paths and exists(paths[0]) else None


def _inferred_columns(config: Config) -> dict[str, list[str] | dict[str, str]] | None:
    """[data.schema]'s dense, categorical, hashed and multi-valued columns read from a
    CSV's or Parquet file's header and first rows (io/columns.py) when the config lists
    none; None if it lists some (or the data is not a table, or its file is not there:
    reading it will say so)."""
    data = config.data
    schema = data.table_schema
    if data.source not in TABULAR_FORMATS or schema.dense or schema.categorical:
        return None
    first = _first_file(config)
    if first is None:
        return None
    try:
        found = infer_columns(
            table_sample(first, data.source, schema.delimiter), schema.label, shown(first)
        )
    except (DataError, OSError, pa.ArrowException) as error:
        message = f"data.schema: cannot read the columns of {shown(first)}: {error}"
        raise ConfigError(message) from None
    return {
        "dense": list(found.dense),
        "categorical": list(found.categorical),
        "hashed": list(found.hashed),
        "multi_valued": dict(found.multi_valued),
    }


def _libffm_tables(config: Config) -> int | None:
    """model.num_tables of a libffm run that sets neither it nor a list of table_rows: the
    fields its first file's first lines show (io/libffm_fields.py) less the dense ones;
    None otherwise (or when the file is not there: reading it will say so)."""
    data, model = config.data, config.model
    if data.source != "libffm" or model.num_tables is not None:
        return None
    if isinstance(model.table_rows, list):
        return None
    first = _first_file(config)
    if first is None:
        return None
    try:
        seen = libffm_fields(first)
    except OSError as error:
        message = f"model.num_tables: cannot read the fields of {shown(first)}: {error}"
        raise ConfigError(message) from None
    dense = data.libffm.dense_fields
    num_fields = max(seen.num_fields, max(dense, default=-1) + 1)
    if num_fields == 0:
        raise ConfigError(
            f"model.num_tables: no field:index:value token in the first {seen.lines:,} lines "
            f"of {shown(first)}; set it"
        )
    return num_fields - len(dense)
