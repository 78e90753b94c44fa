"""The base of every config section, and sections generated from the spec dataclasses.

Every key carries a one-line description: `Field(description=...)` in a section, the
`"doc"` entry of a dataclass field's metadata in a spec dataclass. Two more entries, in a
Field's `json_schema_extra` or a field's metadata, serve the generated references:
`"unset"`, what is in effect when an optional key is left unset, and `"values"`, the values
a key takes where its type does not say (a list of names, or a range as text).
"""

from __future__ import annotations

import dataclasses
import functools
import re
import types
import typing
from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, create_model

from recsync.errors import ConfigError


class Section(BaseModel):
    """Base of every config section: unknown keys and loosely typed values are rejected."""

    model_config = ConfigDict(
        extra="forbid", strict=True, frozen=True, validate_by_name=True, serialize_by_alias=True
    )


def _toml_type(hint: Any) -> Any:
    """The TOML-side type of a dataclass field's type: tuples become lists, dataclasses
    become generated sections."""
    args = typing.get_args(hint)
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return section_from_dataclass(hint)
    if typing.get_origin(hint) is tuple:
        item = _toml_type(args[0])
        if len(args) == 2 and args[1] is Ellipsis:
            return list[item]  # type: ignore[valid-type]
        return Annotated[
            list[item],  # type: ignore[valid-type]
            Field(min_length=len(args), max_length=len(args)),
        ]
    if typing.get_origin(hint) in (types.UnionType, typing.Union):
        return typing.Union[tuple(_toml_type(a) for a in args)]  # noqa: UP007
    return hint


def _toml_value(value: Any) -> Any:
    if dataclasses.is_dataclass(value):
        return {f.name: _toml_value(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, tuple | list):
        return [_toml_value(v) for v in value]
    return value


DOC, UNSET, VALUES = "doc", "unset", "values"  # the metadata entries a field's key reads


def dataclass_doc(cls: type) -> str:
    """The first paragraph of `cls`'s docstring: what the section made of it is."""
    paragraph = (cls.__doc__ or "").strip().split("\n\n")[0]
    return " ".join(paragraph.split())


def _key_field(f: dataclasses.Field[Any], hint: Any) -> Any:
    """The pydantic Field of the dataclass field `f`: its default, and its description
    (and "unset", "values") from its metadata."""
    extra = {k: f.metadata[k] for k in (UNSET, VALUES) if k in f.metadata}
    described: dict[str, Any] = {
        "description": f.metadata.get(DOC),
        "json_schema_extra": extra or None,
    }
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return Field(default_factory=section_from_dataclass(hint), **described)
    if f.default is not dataclasses.MISSING:
        return Field(default=_toml_value(f.default), **described)
    if f.default_factory is not dataclasses.MISSING:
        return Field(default=_toml_value(f.default_factory()), **described)
    return Field(..., **described)


@functools.cache
def section_from_dataclass(cls: type) -> type[Section]:
    """A section with one key per field of the spec dataclass `cls`, defaulting to its
    defaults (fields without a default are required), each described by its metadata."""
    hints = typing.get_type_hints(cls)
    fields: dict[str, Any] = {
        f.name: (_toml_type(hints[f.name]), _key_field(f, hints[f.name]))
        for f in dataclasses.fields(cls)
    }
    doc = dataclass_doc(cls)
    return create_model(f"{cls.__name__}Section", __base__=Section, __doc__=doc, **fields)


def dataclass_of(hint: Any) -> type:
    """The dataclass a field's type names (`Timing`, or the one of `StalenessNorm | None`)."""
    members = typing.get_args(hint) or (hint,)
    return next(m for m in members if isinstance(m, type) and dataclasses.is_dataclass(m))


_FIRST_WORD = re.compile(r"^(?:\w+: |\w+\.)?(\w+)\b")


def error_key(key: str, fields: list[str], message: str) -> str:
    """`key.field` when a dataclass's error message begins with one of its `fields`
    (optionally after "<name>: " or "<name>."), else `key`."""
    match = _FIRST_WORD.match(message)
    return f"{key}.{match[1]}" if match and match[1] in fields else key


def _spec_value(hint: Any, value: Any, key: str) -> Any:
    if value is None:
        return None
    if isinstance(value, BaseModel):
        return build_dataclass(dataclass_of(hint), value, key)
    if isinstance(value, list) and typing.get_origin(hint) is tuple:
        return tuple(value)
    return value


def build_dataclass(cls: type, values: BaseModel | Mapping[str, Any], key: str) -> Any:
    """An instance of the spec dataclass `cls` from a section (or a dict of ready values);
    its ValueError becomes a ConfigError naming `key`."""
    if isinstance(values, BaseModel):
        hints = typing.get_type_hints(cls)
        values = {
            name: _spec_value(hints[name], getattr(values, name), f"{key}.{name}")
            for name in type(values).model_fields
        }
    try:
        return cls(**values)
    except ConfigError:
        raise
    except ValueError as error:
        fields = [f.name for f in dataclasses.fields(cls)]
        raise ConfigError(f"{error_key(key, fields, str(error))}: {error}") from None
