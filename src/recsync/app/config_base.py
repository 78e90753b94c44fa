"""The base of every config section."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Section(BaseModel):
    """Base of every config section: unknown keys and loosely typed values are rejected."""

    model_config = ConfigDict(
        extra="forbid", strict=True, frozen=True, validate_by_name=True, serialize_by_alias=True
    )
