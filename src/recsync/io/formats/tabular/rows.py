"""Schema-driven rows (CSV, Parquet, any table) into examples.

A `TabularSchema` names the label column, the dense columns and the categorical columns
(with one table size each). Rows reach the parser as tuples of python values in
`schema.columns` order (label, dense..., categorical...): `rows_from_columns` and
`rows_from_dicts` build them from column lists or dict records. Values may be python
numbers, bools, strings (CSV text) or None (null); an empty string counts as null.

- label: 0 or 1 (number, bool or its text) — "missing_label" if null, "bad_label" otherwise.
- dense: a finite number (or its text); null -> `null_dense` (0.0 by default; None makes a
  null a "missing_value" skip); NaN/inf -> "nan_value"; anything else -> "bad_value".
- categorical, integer columns: a non-negative integer (int, integral float, decimal
  text, or text of a whole float such as "123.0", as pandas writes ids with nulls);
  id = value % table_rows[f]; otherwise "bad_id" ("nan_value" for NaN). `keyed` takes
  negative integers too (Avazu's -1 codes): their key hashes their decimal text.
- categorical, `hashed` columns: a string or bytes (an int is hashed from its decimal text);
  id = mmh3.hash(value, hash_seed, unsigned) % table_rows[f].
- `keyed`: an id is instead the feature-prefixed key of the integer (one outside [0, 2^56)
  hashed from its decimal text), or of the string hashed with mmh3's 64-bit hash and
  hash_seed (data/keys.py); table_rows only counts the features.
- multi-valued columns (a multi-hot bag of ids per row): a list value (a Parquet list
  column) in any categorical column, or text split at the separator `multi_valued` declares
  for its column (`{"click_sequence": "^"}`); each element becomes an id as above (hashed
  or integer, by the column), in order, a repeated element counted twice (sum pooling). An
  empty element ("1^^2", a trailing separator) or a null in a list is "bad_id"; an empty
  list is an empty bag, as a null is.
- null categorical: an empty bag. A row whose declared columns are all null: "empty_line".
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

import mmh3

from recsync.data.batch import Batch
from recsync.data.keys import check_features, hashed_id, integer_id, key
from recsync.data.records import Example, batch_examples, good_examples
from recsync.data.skips import Rejected, SkipReport
from recsync.errors import DataError

DECIMAL = re.compile(r"[0-9]+")  # an integer id written as text (fullmatch, stripped)
SIGNED = re.compile(r"-?[0-9]+")  # one a keyed column takes (a negative id's key: hashed)
WHOLE_TEXT = re.compile(r"(-?[0-9]+)\.0*")  # one written as a whole float ("123.0", pandas)
SEPARATORS = "^|;,"  # what splits a multi-valued text column (io/columns.py looks for them)


@dataclass(frozen=True)
class TabularSchema:
    """Declared columns of a table: label, dense features, categorical features.

    table_rows[f] is the table size of categorical[f]; `hashed` lists the categorical
    columns holding strings (hashed with mmh3), the others hold integer ids. `keyed`: ids
    are feature-prefixed keys (data/keys.py), table_rows never reduces them.
    `multi_valued` maps a categorical text column to the one character that separates
    the elements of its multi-hot bag.
    """

    label: str
    dense: tuple[str, ...]
    categorical: tuple[str, ...]
    table_rows: tuple[int, ...]
    hashed: tuple[str, ...] = ()
    null_dense: float | None = 0.0
    hash_seed: int = 0
    delimiter: str = ","  # CSV/TSV text only
    keyed: bool = False
    multi_valued: Mapping[str, str] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        if len(self.delimiter) != 1 or self.delimiter in '\r\n"':
            raise ValueError(
                f"tabular schema: delimiter must be one character, got {self.delimiter!r}"
            )
        for name in ("dense", "categorical", "table_rows", "hashed"):
            object.__setattr__(self, name, tuple(getattr(self, name)))
        if len(self.table_rows) != len(self.categorical):
            raise ValueError(
                f"tabular schema: {len(self.categorical)} categorical columns but "
                f"{len(self.table_rows)} table_rows"
            )
        if any(r < 1 for r in self.table_rows):
            raise ValueError(f"tabular schema: table_rows must be >= 1: {self.table_rows}")
        if len(set(self.columns)) != len(self.columns):
            raise ValueError(f"tabular schema: a column is declared twice: {self.columns}")
        if not set(self.hashed) <= set(self.categorical):
            raise ValueError("tabular schema: hashed columns must be categorical columns")
        object.__setattr__(self, "multi_valued", dict(self.multi_valued))
        for column, separator in self.multi_valued.items():
            if column not in self.categorical:
                raise ValueError(
                    f"tabular schema: multi_valued column {column!r} is not a categorical column"
                )
            if len(separator) != 1 or separator.isalnum() or separator in "\r\n":
                raise ValueError(
                    f"tabular schema: multi_valued {column!r}: the separator must be one "
                    f"character, neither a letter nor a digit, got {separator!r}"
                )
        if not 0 <= self.hash_seed < 2**32:
            raise ValueError(
                f"tabular schema: hash_seed must be in [0, 2^32), got {self.hash_seed}"
            )
        if self.null_dense is not None and not math.isfinite(self.null_dense):
            raise ValueError(f"tabular schema: null_dense must be finite, got {self.null_dense}")
        if self.keyed:
            check_features(len(self.categorical), "tabular schema")

    @property
    def columns(self) -> tuple[str, ...]:
        """All declared columns in row order: label, dense..., categorical..."""
        return (self.label, *self.dense, *self.categorical)


def rows_from_columns(
    columns: Mapping[str, Sequence[object]], schema: TabularSchema, *, source: str = ""
) -> Iterator[tuple[object, ...]]:
    """Rows in `schema.columns` order from a dict of equally long column lists."""
    missing = [c for c in schema.columns if c not in columns]
    if missing:
        raise DataError(f"declared columns not found: {missing}", source=source, field=missing[0])
    return zip(*(columns[c] for c in schema.columns), strict=True)


def rows_from_dicts(
    records: Iterable[Mapping[str, object]], schema: TabularSchema
) -> Iterator[tuple[object, ...]]:
    """Rows in `schema.columns` order from dict records; an absent key counts as null."""
    names = schema.columns
    for record in records:
        yield tuple(record.get(c) for c in names)


def _is_null(value: object) -> bool:
    return value is None or value == "" or value == b""


def _label(value: object, column: str) -> float:
    number: object = value
    if isinstance(value, str | bytes):
        try:
            number = float(value)
        except ValueError:
            number = None
    if isinstance(number, int | float) and number in (0, 1):
        return float(number)
    raise Rejected("bad_label", column, f"label {value!r} is not 0 or 1")


def _dense(value: object, column: str) -> float:
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise Rejected("bad_value", column, f"{value!r} is not a number") from None
    if not math.isfinite(number):
        raise Rejected("nan_value", column, f"{value!r} is not finite")
    return number


def _integer_id(value: object, column: str, negative: bool = False) -> int:
    """The integer of an id value; `negative`: a negative one too (hash tables' keys)."""
    number: int
    whole = WHOLE_TEXT.fullmatch(value.strip()) if isinstance(value, str) else None
    if (
        isinstance(value, int)
        or (isinstance(value, float) and value.is_integer())
        or (isinstance(value, str) and SIGNED.fullmatch(value.strip()) is not None)
    ):
        number = int(value)
    elif whole is not None:
        number = int(whole.group(1))
    elif isinstance(value, float) and math.isnan(value):
        raise Rejected("nan_value", column, "categorical id is NaN")
    else:
        hint = _hint(value, column)
        raise Rejected("bad_id", column, f"{value!r} is not a non-negative integer id{hint}")
    if number < 0 and not negative:
        raise Rejected(
            "bad_id",
            column,
            f"{value!r} is a negative id (a fixed table's ids are >= 0: hash tables take "
            f"it, or hash the column's text: data.schema.hashed = [{column!r}])",
        )
    return number


class TabularRowParser:
    """Parses one row (tuple in `schema.columns` order) into an Example, or raises Rejected."""

    def __init__(self, schema: TabularSchema):
        self.schema = schema
        self._num_dense = len(schema.dense)
        hashed = set(schema.hashed)
        self._is_hashed = [c in hashed for c in schema.categorical]
        self._separator = [schema.multi_valued.get(c) for c in schema.categorical]

    def __call__(self, row: Sequence[object]) -> Example:
        schema = self.schema
        if all(_is_null(v) for v in row):
            raise Rejected("empty_line", "", "every declared column is null")
        if _is_null(row[0]):
            raise Rejected("missing_label", schema.label, "the label is null")
        label = _label(row[0], schema.label)
        dense: list[float] = []
        for column, value in zip(schema.dense, row[1 : 1 + self._num_dense], strict=True):
            if not _is_null(value):
                dense.append(_dense(value, column))
            elif schema.null_dense is None:
                raise Rejected("missing_value", column, "dense value is null")
            else:
                dense.append(schema.null_dense)
        bags: list[list[int]] = []
        categorical_values = row[1 + self._num_dense :]
        for f, (column, value) in enumerate(
            zip(schema.categorical, categorical_values, strict=True)
        ):
            if _is_null(value):
                bags.append([])
            elif isinstance(value, list | tuple):
                bags.append([self._id(f, column, _element(v, column)) for v in value])
            elif self._separator[f] is not None and isinstance(value, str | bytes):
                elements = self._split(value, f, column)
                bags.append([self._id(f, column, v) for v in elements])
            else:
                bags.append([self._id(f, column, value)])
        return dense, bags, label

    def _id(self, f: int, column: str, value: object) -> int:
        """The id (or key) of one value of categorical feature f."""
        if self.schema.keyed:
            return key(f, self._keyed_id(value, column, self._is_hashed[f]))
        if self._is_hashed[f]:
            return self._hash(value, column) % self.schema.table_rows[f]
        return _integer_id(value, column) % self.schema.table_rows[f]

    def _split(self, value: str | bytes, f: int, column: str) -> list[str] | list[bytes]:
        """A multi-valued text value's elements; an empty one is "bad_id"."""
        separator = self._separator[f]
        assert separator is not None
        elements = (
            value.split(separator.encode()) if isinstance(value, bytes) else value.split(separator)
        )
        if any(not e for e in elements):
            raise Rejected(
                "bad_id", column, f"{value!r} has an empty element (separator {separator!r})"
            )
        return elements

    def _hash(self, value: object, column: str) -> int:
        return mmh3.hash(_hash_text(value, column), self.schema.hash_seed, signed=False)

    def _keyed_id(self, value: object, column: str, hashed: bool) -> int:
        if hashed:
            return hashed_id(_hash_text(value, column), self.schema.hash_seed)
        return integer_id(_integer_id(value, column, negative=True))


def _hint(value: object, column: str) -> str:
    """What to declare when a value looks like a list of ids."""
    if isinstance(value, str):
        for separator in SEPARATORS:
            if separator in value and all(DECIMAL.fullmatch(e) for e in value.split(separator)):
                declare = f'data.schema.multi_valued = {{{column} = "{separator}"}}'
                return f" (a list of ids? declare {declare})"
    return ""


def _element(value: object, column: str) -> object:
    """One element of a list value: a null one is "bad_id"."""
    if value is None:
        raise Rejected("bad_id", column, "a null element in a list")
    return value


def _hash_text(value: object, column: str) -> str | bytes:
    """What a hashed column's value hashes: a string or bytes, an int's decimal text."""
    if isinstance(value, bool) or not isinstance(value, str | bytes | int):
        raise Rejected("bad_id", column, f"{value!r} is not a string to hash")
    return str(value) if isinstance(value, int) else value


def tabular_batches(
    rows: Iterable[Sequence[object]],
    schema: TabularSchema,
    *,
    source: str = "<table>",
    batch_size: int,
    strict: bool = False,
    skips: SkipReport | None = None,
    first_line: int = 1,
) -> Iterator[Batch]:
    """Batches of the good rows, in order; row k (0-based) is reported as line first_line + k."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    skips = SkipReport() if skips is None else skips
    numbered = enumerate(rows, start=first_line)
    parser = TabularRowParser(schema)
    examples = good_examples(numbered, parser, source=source, strict=strict, skips=skips)
    return batch_examples(examples, batch_size)
