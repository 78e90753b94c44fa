"""libSVM / libFM (`label idx:val ...`) and libffm (`label field:idx:val ...`) lines.

Tokens are separated by whitespace; anything after `#` is a comment. The label is the first
token: 0/1 or -1/+1 (-1 maps to 0); "1.0"-style spellings of these values are accepted.
Values must be finite numbers ("bad_value", "nan_value").

libSVM mapping (`LibSVMSchema`):
- the indices in `dense_indices` are dense: the value of index dense_indices[j] becomes dense
  feature j; a dense index absent from the line is 0 (libSVM's sparse convention).
- every other index is an id of ONE multi-hot categorical feature: id = idx % table_rows.
  Its value only says whether it is present: 0 means absent (sparse convention), any other
  finite value means present.
- an index occurring twice on a line: "duplicate_index".

libffm mapping (`LibFFMSchema`): fields are numbered 0 .. num_fields-1 with
num_fields = len(table_rows) + len(dense_fields).
- field dense_fields[j] is dense: its token's value becomes dense feature j (the index is
  checked but unused); it may occur once per line ("duplicate_index"), absent means 0.
- the other fields, in increasing order, are the categorical features 0 .. F-1, F =
  len(table_rows): id = idx % table_rows[f]; several tokens of one field form a multi-hot
  bag; a value of 0 means absent; the same (field, idx) twice is "duplicate_index".
- a field number outside [0, num_fields): "bad_field".

With `keyed` on either schema, an id is the key of idx for its categorical feature
(data/keys.py) instead of idx % table_rows; table_rows then only counts the features.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from recsync.data.batch import Batch
from recsync.data.keys import check_features, integer_id, key
from recsync.data.records import Example, parse_lines
from recsync.data.skips import Rejected, SkipReport

_NON_NEGATIVE = re.compile(r"[0-9]+")
_LABELS = {1.0: 1.0, 0.0: 0.0, -1.0: 0.0}


@dataclass(frozen=True)
class LibSVMSchema:
    """Which libSVM indices are dense features; the rest hash into one table of table_rows
    (or, `keyed`, become keys of feature 0: data/keys.py)."""

    table_rows: int
    dense_indices: tuple[int, ...] = ()
    keyed: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "dense_indices", tuple(int(i) for i in self.dense_indices))
        if self.table_rows < 1:
            raise ValueError(f"libsvm table_rows must be >= 1, got {self.table_rows}")
        if len(set(self.dense_indices)) != len(self.dense_indices):
            raise ValueError(f"libsvm dense_indices repeat an index: {self.dense_indices}")


@dataclass(frozen=True)
class LibFFMSchema:
    """Rows of each categorical field's table, and which field numbers are dense instead
    (`keyed`: ids are feature-prefixed keys, data/keys.py; table_rows only counts them)."""

    table_rows: tuple[int, ...]
    dense_fields: tuple[int, ...] = ()
    keyed: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "table_rows", tuple(int(r) for r in self.table_rows))
        object.__setattr__(self, "dense_fields", tuple(int(f) for f in self.dense_fields))
        if any(r < 1 for r in self.table_rows):
            raise ValueError(f"libffm table_rows must be >= 1: {self.table_rows}")
        fields = self.dense_fields
        if len(set(fields)) != len(fields) or any(not 0 <= f < self.num_fields for f in fields):
            raise ValueError(f"libffm dense_fields must be distinct, in [0, {self.num_fields})")
        if self.keyed:
            check_features(len(self.table_rows), "libffm schema")

    @property
    def num_fields(self) -> int:
        return len(self.table_rows) + len(self.dense_fields)


def _tokens(text: str) -> tuple[float, list[str]]:
    """Label and feature tokens of a line; raises Rejected for empty lines and bad labels."""
    tokens = text.split("#", 1)[0].split()
    if not tokens:
        raise Rejected("empty_line", "", "the line has no tokens")
    first = tokens[0]
    if ":" in first:
        raise Rejected("missing_label", "label", f"the line starts with feature {first!r}")
    try:
        label = _LABELS.get(float(first))
    except ValueError:
        label = None
    if label is None:
        raise Rejected("bad_label", "label", f"label {first!r} is not 0/1 or -1/+1")
    return label, tokens[1:]


def _number(text: str, field: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise Rejected("bad_value", field, f"value {text!r} is not a number") from None
    if not math.isfinite(value):
        raise Rejected("nan_value", field, f"value {text!r} is not finite")
    return value


def _index(text: str, field: str) -> int:
    if not _NON_NEGATIVE.fullmatch(text):
        raise Rejected("bad_index", field, f"index {text!r} is not a non-negative integer")
    return int(text)


class LibSVMLineParser:
    """Parses one libSVM line into an Example (F = 1 categorical feature), or raises Rejected."""

    def __init__(self, schema: LibSVMSchema):
        self.schema = schema
        self._dense_slot = {index: j for j, index in enumerate(schema.dense_indices)}

    def __call__(self, text: str) -> Example:
        label, tokens = _tokens(text)
        dense = [0.0] * len(self._dense_slot)
        bag: list[int] = []
        seen: set[int] = set()
        rows, keyed = self.schema.table_rows, self.schema.keyed
        for position, token in enumerate(tokens, start=1):
            field = f"token {position} {token!r}"
            parts = token.split(":")
            if len(parts) != 2:
                raise Rejected("bad_token", field, "expected index:value")
            index = _index(parts[0], field)
            value = _number(parts[1], field)
            if index in seen:
                raise Rejected("duplicate_index", field, f"index {index} occurs twice")
            seen.add(index)
            slot = self._dense_slot.get(index)
            if slot is not None:
                dense[slot] = value
            elif value != 0.0:
                bag.append(key(0, integer_id(index)) if keyed else index % rows)
        return dense, [bag], label


class LibFFMLineParser:
    """Parses one libFM/libffm line into an Example, or raises Rejected."""

    def __init__(self, schema: LibFFMSchema):
        self.schema = schema
        self._dense_slot = {field: j for j, field in enumerate(schema.dense_fields)}
        categorical = [f for f in range(schema.num_fields) if f not in self._dense_slot]
        self._feature = {field: f for f, field in enumerate(categorical)}

    def __call__(self, text: str) -> Example:
        label, tokens = _tokens(text)
        dense = [0.0] * len(self._dense_slot)
        bags: list[list[int]] = [[] for _ in self._feature]
        seen: set[tuple[int, int]] = set()
        dense_seen: set[int] = set()
        rows, keyed = self.schema.table_rows, self.schema.keyed
        for position, token in enumerate(tokens, start=1):
            where = f"token {position} {token!r}"
            parts = token.split(":")
            if len(parts) != 3:
                raise Rejected("bad_token", where, "expected field:index:value")
            if not _NON_NEGATIVE.fullmatch(parts[0]) or int(parts[0]) >= self.schema.num_fields:
                raise Rejected("bad_field", where, self._field_outside(parts[0]))
            field = int(parts[0])
            index = _index(parts[1], where)
            value = _number(parts[2], where)
            slot = self._dense_slot.get(field)
            if slot is not None:
                if field in dense_seen:
                    raise Rejected("duplicate_index", where, f"dense field {field} occurs twice")
                dense_seen.add(field)
                dense[slot] = value
                continue
            if (field, index) in seen:
                raise Rejected("duplicate_index", where, f"{field}:{index} occurs twice")
            seen.add((field, index))
            if value != 0.0:
                f = self._feature[field]
                bags[f].append(key(f, integer_id(index)) if keyed else index % rows[f])
        return dense, bags, label

    def _field_outside(self, field: str) -> str:
        n = self.schema.num_fields
        if not _NON_NEGATIVE.fullmatch(field):
            return f"field {field!r} is not a non-negative integer"
        return (
            f"field {field} not in [0, {n}): {n} fields are model.num_tables categorical ones "
            "and data.libffm.dense_fields (with no model.num_tables, as many as the file's "
            "first lines show); set model.num_tables to read more"
        )


def libsvm_batches(
    lines: Iterable[str],
    schema: LibSVMSchema,
    *,
    source: str = "<libsvm>",
    batch_size: int,
    strict: bool = False,
    skips: SkipReport | None = None,
    first_line: int = 1,
) -> Iterator[Batch]:
    """Batches of the good libSVM lines, in order; skipped lines are counted in `skips`."""
    parser = LibSVMLineParser(schema)
    return parse_lines(
        lines,
        parser,
        source=source,
        batch_size=batch_size,
        strict=strict,
        skips=skips,
        first_line=first_line,
    )


def libffm_batches(
    lines: Iterable[str],
    schema: LibFFMSchema,
    *,
    source: str = "<libffm>",
    batch_size: int,
    strict: bool = False,
    skips: SkipReport | None = None,
    first_line: int = 1,
) -> Iterator[Batch]:
    """Batches of the good libFM/libffm lines, in order; skipped lines counted in `skips`."""
    parser = LibFFMLineParser(schema)
    return parse_lines(
        lines,
        parser,
        source=source,
        batch_size=batch_size,
        strict=strict,
        skips=skips,
        first_line=first_line,
    )
