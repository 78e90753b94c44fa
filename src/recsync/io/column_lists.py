"""Which columns of a table sample hold lists of ids (multi-hot bags), for columns.py:

- a list column (Parquet `list<...>`) of integers is a bag of integer ids, of strings a bag
  of hashed ids; a list of any other type is left out;
- a text column is a list when one separator of SEPARATORS ("^", "|", ";", ",") splits
  at least one in LIST_EVERY (1000) of its non-empty sampled values (and at least one),
  and splitting every value at it leaves no empty element and no element holding
  whitespace (free text such as "red, blue shoes" is not a list); with several, the one
  found in most values. Its elements are integer ids when every sampled element is
  decimal digits, hashed ids otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from recsync.io.formats.tabular.rows import SEPARATORS

LIST_EVERY = 1000


@dataclass(frozen=True)
class ListColumn:
    """A column read as bags: its separator (None for a list column) and whether its
    elements are strings to hash."""

    separator: str | None
    hashed: bool
    why: str


def list_type(kind: pa.DataType) -> bool:
    return bool(pa.types.is_list(kind) or pa.types.is_large_list(kind))


def list_column(kind: pa.DataType) -> ListColumn | None:
    """What a list column's elements are (None: neither integers nor text)."""
    element = kind.value_type
    if pa.types.is_integer(element):
        return ListColumn(None, False, f"list of {element}: a multi-hot bag of integer ids")
    if pa.types.is_string(element) or pa.types.is_large_string(element):
        return ListColumn(None, True, "list of text: a multi-hot bag of hashed ids")
    return None


def separated_list(values: pa.ChunkedArray) -> ListColumn | None:
    """The separator that makes a text column a list of ids, by the rule above, or None."""
    present = pc.drop_null(values.combine_chunks())
    present = present.filter(pc.greater(pc.utf8_length(present), 0))
    if len(present) == 0:
        return None
    best: tuple[int, str] | None = None
    for separator in SEPARATORS:
        splitting = int(pc.sum(pc.match_substring(present, separator)).as_py() or 0)
        if splitting < max(1, len(present) / LIST_EVERY):
            continue
        elements = pc.list_flatten(pc.split_pattern(present, separator))
        empty = pc.any(pc.equal(pc.utf8_length(elements), 0)).as_py()
        spaced = pc.any(pc.match_substring_regex(elements, r"\s")).as_py()
        if not empty and not spaced and (best is None or splitting > best[0]):
            best = (splitting, separator)
    if best is None:
        return None
    splitting, separator = best
    elements = pc.list_flatten(pc.split_pattern(present, separator))
    digits = pc.all(pc.match_substring_regex(elements, r"^[0-9]+$")).as_py()
    kind = "integer ids" if digits else "hashed ids"
    why = (
        f"text lists: {separator!r} splits {splitting:,} of {len(present):,} values: a "
        f"multi-hot bag of {kind}"
    )
    return ListColumn(separator, not digits, why)
