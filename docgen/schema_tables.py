"""Reference tables generated from a pydantic schema (a config file's sections): one table
per TOML table, each key with its type, the default in effect, the values it takes and its
description, all read from the schema (`Field(description=...)`, and the `"unset"` and
`"values"` entries of `json_schema_extra`; recsync.app.config.base)."""

from __future__ import annotations

import json
import math
import re
import types
import typing
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import annotated_types
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from docgen.markdown import cell
from recsync.app.config.base import UNSET, VALUES


@dataclass(frozen=True)
class Key:
    """One key of a table: its dotted name and what the reference says of it."""

    dotted: str
    type: str
    default: str
    values: str
    description: str


@dataclass(frozen=True)
class Table:
    """A TOML table of a file ([run.checkpoint], [[condition]] kind = "stragglers") and its
    keys."""

    title: str
    doc: str
    keys: tuple[Key, ...]

    @property
    def anchor(self) -> str:
        """The id of the table's heading on the page."""
        return anchor(self.title)


def anchor(title: str) -> str:
    """The id Markdown's table of contents gives the heading of the table `title` (its
    default slugify: word characters, spaces and hyphens kept, lower case, runs of spaces
    and hyphens one hyphen)."""
    text = re.sub(r"[^\w\s-]", "", title).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def extra(info: FieldInfo) -> dict[str, Any]:
    """The `json_schema_extra` entries of a key (its "unset" and "values")."""
    found = info.json_schema_extra
    return dict(found) if isinstance(found, dict) else {}


def _members(hint: Any) -> tuple[Any, ...]:
    """The members of a union (or of an Annotated union), else the hint alone."""
    if typing.get_origin(hint) is typing.Annotated:
        hint = typing.get_args(hint)[0]
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return typing.get_args(hint)
    return (hint,)


def _is_model(hint: Any) -> bool:
    return isinstance(hint, type) and issubclass(hint, BaseModel)


def nested(hint: Any) -> tuple[list[type[BaseModel]], bool]:
    """The sections a key's type holds, and whether it is an array of tables
    (`list[Section]`, `list[A | B]`)."""
    for member in _members(hint):
        if typing.get_origin(member) is list:
            items = [m for m in _members(typing.get_args(member)[0]) if _is_model(m)]
            if items:
                return items, True
    return [m for m in _members(hint) if _is_model(m)], False


def _type_name(hint: Any) -> str:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Literal:
        return " or ".join(sorted({_type_name(type(a)) for a in args}))
    if origin is typing.Annotated:
        return _type_name(args[0])
    if origin in (typing.Union, types.UnionType):
        names = list(dict.fromkeys(_type_name(a) for a in args))
        return " or ".join(names)
    if args:
        return f"{getattr(origin, '__name__', str(origin))}[{', '.join(map(_type_name, args))}]"
    if hint is type(None):
        return "none"
    if _is_model(hint):
        return "table"
    name = str(getattr(hint, "__name__", hint))
    return "string" if name == "str" else name


def _literal_values(hint: Any) -> tuple[list[Any], list[Any]]:
    """The Literal members of a (union) type, and its other members but None."""
    literals: list[Any] = []
    others: list[Any] = []
    for member in _members(hint):
        if typing.get_origin(member) is typing.Literal:
            literals.extend(typing.get_args(member))
        elif member is not type(None):
            others.append(member)
    return literals, others


def _number(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def bounds(metadata: list[Any]) -> str:
    """The range of numbers the constraints (ge, gt, le, lt) allow: ">= 1", "(0, 1]"."""
    low: tuple[str, str, Any] | None = None
    high: tuple[str, str, Any] | None = None
    for item in metadata:
        if isinstance(item, annotated_types.Ge):
            low = ("[", ">=", item.ge)
        elif isinstance(item, annotated_types.Gt):
            low = ("(", ">", item.gt)
        elif isinstance(item, annotated_types.Le):
            high = ("]", "<=", item.le)
        elif isinstance(item, annotated_types.Lt):
            high = (")", "<", item.lt)
    if low and high:
        return f"{low[0]}{_number(low[2])}, {_number(high[2])}{high[0]}"
    if low or high:
        bound = low or high
        assert bound is not None
        return f"{bound[1]} {_number(bound[2])}"
    return ""


def _item_bounds(hint: Any) -> str:
    """'each >= 1' for a list of constrained numbers."""
    for member in _members(hint):
        if typing.get_origin(member) is list:
            item = typing.get_args(member)[0]
            if typing.get_origin(item) is typing.Annotated:
                found = bounds([m for a in typing.get_args(item)[1:] for m in _metadata(a)])
                if found:
                    return f"each {found}"
    return ""


def _metadata(annotation: Any) -> list[Any]:
    """The constraints of an Annotated's extra argument (a FieldInfo or a constraint)."""
    return list(annotation.metadata) if isinstance(annotation, FieldInfo) else [annotation]


def allowed(info: FieldInfo) -> str:
    """The values a key takes, as the reference says them."""
    given = extra(info).get(VALUES)
    if isinstance(given, list):
        return ", ".join(json.dumps(v) for v in given)
    if given:
        return str(given)
    literals, others = _literal_values(info.annotation)
    if literals and not any(_is_model(o) for o in others):
        listed = ", ".join(json.dumps(v) for v in literals)
        return f"a {_type_name(others[0])}, or {listed}" if others else listed
    found = bounds(list(info.metadata)) or _item_bounds(info.annotation)
    pattern = next((m.pattern for m in info.metadata if hasattr(m, "pattern")), None)
    if pattern:
        found = f"matching `{pattern}`"
    return found or _lengths(info.metadata, typing.get_args(info.annotation))


def _lengths(metadata: list[Any], args: tuple[Any, ...]) -> str:
    """'2 items' or 'at least 1 item' from length constraints (of the key or its type)."""
    found = [*metadata, *(m for a in args[1:] for m in _metadata(a))]
    low = next((m.min_length for m in found if getattr(m, "min_length", None)), None)
    high = next((m.max_length for m in found if getattr(m, "max_length", None)), None)
    if low is None:
        return ""
    items = "item" if (high or low) == 1 else "items"
    return f"{low} {items}" if low == high else f"at least {low} {items}"


def _value(value: Any) -> str:
    if isinstance(value, float) and math.isinf(value):
        return "`inf`" if value > 0 else "`-inf`"
    if isinstance(value, float) and (abs(value) >= 1e6 or 0 < abs(value) < 1e-3):
        return f"`{value:g}`"
    if isinstance(value, list) and len(value) > 4 and len(set(map(json.dumps, value))) == 1:
        return f"{len(value)} × `{json.dumps(value[0])}`"
    return f"`{json.dumps(value)}`"


def default_in_effect(info: FieldInfo) -> str:
    """What a key is when a file leaves it out: its default, or for a key whose unset
    value lets something else decide, what does."""
    if info.is_required():
        return "required"
    value = info.get_default(call_default_factory=True)
    unset = extra(info).get(UNSET)
    if isinstance(value, BaseModel):
        return "its table's defaults"
    if value is None:
        return f"unset: {unset}" if unset else "unset"
    if unset and value in ([], {}, ()):
        return f"{_value(value)}: {unset}"
    return _value(value)


def _discriminator(model: type[BaseModel]) -> str:
    """'kind = "stragglers"': the key whose one Literal value tells a member of an array's
    union apart."""
    for key, info in model.model_fields.items():
        args = typing.get_args(info.annotation)
        if typing.get_origin(info.annotation) is typing.Literal and len(args) == 1:
            return f" {info.alias or key} = {json.dumps(args[0])}"
    return ""


_TITLE = re.compile(r"^\[[\w.]+\]:\s*")


def doc_of(model: type[BaseModel]) -> str:
    """A section's docstring on one line, without the "[section]: " it may begin with."""
    doc = _TITLE.sub("", " ".join((model.__doc__ or "").split()))
    return doc[:1].upper() + doc[1:]


@dataclass
class Tables:
    """The tables of one page, each rendered once: a table met again (a strategy's
    [strategy.timing]) is linked to where it first was."""

    found: list[Table] = field(default_factory=list)
    shown: dict[tuple[str, type[BaseModel]], str] = field(default_factory=dict)

    def add(self, model: type[BaseModel], name: str, title: str | None = None) -> str:
        """The table of `model` at dotted path `name` (titled `title`, else `[name]`) and
        every table nested in it, depth first, unless shown already; its heading's anchor."""
        title = title or f"[{name}]"
        if (title, model) in self.shown:
            return self.shown[(title, model)]
        self.shown[(title, model)] = anchor(title)
        keys: list[Key] = []
        index = len(self.found)
        self.found.append(Table(title, doc_of(model), ()))
        for key, info in model.model_fields.items():
            dotted = f"{name}.{info.alias or key}"
            keys.append(self._key(dotted, info))
        self.found[index] = Table(title, doc_of(model), tuple(keys))
        return anchor(title)

    def add_root(self, schema: type[BaseModel], skip: tuple[str, ...] = ()) -> None:
        """The tables of a file whose schema is `schema`: one for each of its keys that is a
        table (or an array of tables), but those in `skip`."""
        for key, info in schema.model_fields.items():
            if key not in skip:
                self._key(info.alias or key, info)

    def _key(self, dotted: str, info: FieldInfo) -> Key:
        kind = _type_name(info.annotation)
        models, array = nested(info.annotation)
        if models and array:
            links = []
            for model in models:
                title = f"[[{dotted}]]{_discriminator(model)}"
                links.append(f"[`{title}`](#{self.add(model, dotted, title)})")
            kind = "array of tables: " + ", ".join(links)
        elif models:
            link = self.add(models[0], dotted)
            kind = kind.replace("table", f"[table](#{link})", 1)
        return Key(dotted, kind, default_in_effect(info), allowed(info), info.description or "")


def keys_of(model: type[BaseModel], name: str = "") -> Iterator[tuple[str, FieldInfo]]:
    """Every key of `model` and of the sections nested in it, depth first, by dotted name."""
    for key, info in model.model_fields.items():
        dotted = f"{name}.{info.alias or key}" if name else info.alias or key
        yield dotted, info
        models, _ = nested(info.annotation)
        for inner in models:
            yield from keys_of(inner, dotted)


def render_tables(tables: list[Table]) -> list[str]:
    """The tables as Markdown lines: a heading, the section's doc and one row per key."""
    lines: list[str] = []
    for table in tables:
        lines += [f"## `{table.title}`", ""]
        if table.doc:
            lines += [table.doc, ""]
        lines += [
            "| key | type | default | values | description |",
            "| --- | --- | --- | --- | --- |",
        ]
        for key in table.keys:
            row = (f"`{key.dotted}`", key.type, key.default, key.values, key.description)
            lines.append("| " + " | ".join(cell(part) for part in row) + " |")
        lines.append("")
    return lines
