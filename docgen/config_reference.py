"""The configuration reference, generated from the pydantic config schema
(`recsync.app.config`): one table per section, every key with its type, its default and
what the embedded default config says of it."""

from __future__ import annotations

import json
import re
import types
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import resources
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from docgen.markdown import cell
from recsync.app.config.schema import Config
from recsync.app.config.strategy import SECTIONS

_HEADER = re.compile(r"^\[([\w.]+)\]\s*(?:#.*)?$")
_KEY_COMMENT = re.compile(r"^(\w+)\s*=.*?\s#\s*(.+)$")


@dataclass(frozen=True)
class Key:
    """One key of the reference: its dotted name and what the table says of it."""

    dotted: str
    type: str
    default: str
    note: str


@dataclass(frozen=True)
class SectionDoc:
    """A table of the config file ([run.checkpoint]) and its keys."""

    title: str
    doc: str
    keys: tuple[Key, ...]


def default_comments() -> dict[str, str]:
    """The inline comment of each key in the embedded default.toml, by dotted key."""
    text = resources.files("recsync.app.config").joinpath("default.toml").read_text()
    comments, table = {}, ""
    for line in text.splitlines():
        header = _HEADER.match(line.strip())
        if header:
            table = header[1]
            continue
        key = _KEY_COMMENT.match(line.strip())
        if key:
            comments[f"{table}.{key[1]}"] = key[2].strip()
    return comments


def _type_name(hint: Any) -> str:
    args = typing.get_args(hint)
    origin = typing.get_origin(hint)
    if origin is typing.Literal:
        return " or ".join(json.dumps(a) for a in args)
    if origin is typing.Annotated:
        return _type_name(args[0])
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_name(a) for a in args)
    if args:
        return f"{getattr(origin, '__name__', str(origin))}[{', '.join(map(_type_name, args))}]"
    if hint is type(None):
        return "none"
    if isinstance(hint, type) and issubclass(hint, BaseModel):
        return "table"
    return getattr(hint, "__name__", str(hint))


def _section_of(hint: Any) -> type[BaseModel] | None:
    members = typing.get_args(hint) or (hint,)
    if typing.get_origin(hint) is typing.Annotated:
        members = typing.get_args(members[0]) or (members[0],)
    found = [m for m in members if isinstance(m, type) and issubclass(m, BaseModel)]
    return found[0] if len(found) == 1 else None


def _default(field: FieldInfo) -> str:
    if field.is_required():
        return "required"
    value = field.get_default(call_default_factory=True)
    if isinstance(value, BaseModel):
        return "the table below"
    if value is None:
        return "unset"
    return f"`{json.dumps(value)}`"


def _doc(model: type[BaseModel]) -> str:
    return " ".join((model.__doc__ or "").split())


def sections(
    model: type[BaseModel], name: str, strategy: str | None = None
) -> Iterator[SectionDoc]:
    """The section `name` of `model` and every table nested in it, depth first; a
    [strategy] section is titled by the strategy's name."""
    comments = default_comments()
    keys, nested = [], []
    for key, field in model.model_fields.items():
        toml_key = field.alias or key
        dotted = f"{name}.{toml_key}"
        inner = _section_of(field.annotation)
        if inner is not None:
            nested.append((inner, dotted))
        description = field.description or comments.get(dotted, "")
        keys.append(Key(dotted, _type_name(field.annotation), _default(field), description))
    title = f"[{name}]" if strategy is None else f'[{name}] name = "{strategy}"'
    yield SectionDoc(title, _doc(model), tuple(keys))
    for inner, dotted in nested:
        yield from sections(inner, dotted)


def all_sections() -> list[SectionDoc]:
    """Every table of a config file: the sections of `Config`, and [strategy] once for each
    strategy name (its keys differ by name)."""
    found: list[SectionDoc] = []
    for key, field in Config.model_fields.items():
        inner = _section_of(field.annotation)
        if inner is not None:
            found.extend(sections(inner, key))
    for name, section in SECTIONS.items():
        found.extend(sections(section, "strategy", name))
    return found


def render() -> str:
    """The reference page, Markdown."""
    lines = [
        "# Configuration reference",
        "",
        "Generated from the config schema (`src/recsync/app/config/`) when the site is",
        "built. A job config is TOML, layered on the embedded default",
        "(`src/recsync/app/config/default.toml`): a file given with `--config` sets only",
        "the keys it names, then every `--set KEY=VALUE` applies. An unknown key or a",
        "wrong type stops the run with a message naming the dotted key. `[strategy]` takes",
        "the keys of the strategy its `name` picks; each is listed below.",
        "",
    ]
    for section in all_sections():
        lines += [f"## `{section.title}`", ""]
        if section.doc:
            lines += [section.doc, ""]
        if not section.keys:
            lines += ["No other key.", ""]
            continue
        lines += ["| key | type | default | note |", "| --- | --- | --- | --- |"]
        for key in section.keys:
            lines.append(
                f"| `{key.dotted}` | {cell(key.type)} | {cell(key.default)} | {cell(key.note)} |"
            )
        lines.append("")
    return "\n".join(lines)
