"""The columns of a CSV or Parquet table read from its header and a sample of its first rows
(the first CSV block, or up to SAMPLE_ROWS Parquet rows, typed by pyarrow), and which model
input each becomes when the config declares none. `recsync data inspect` shows it, column
by column with the reason; a config whose [data.schema] lists no dense and no categorical
column trains on it (and the run's config records it). The rule, first match wins:

- the `label` column is the label;
- lists are categorical multi-hot bags: a list column, or text split by a separator
  (io/column_lists.py: `^`, `|`, `;` or `,`), recorded in data.schema.multi_valued;
- other strings are categorical (hashed); floats are dense, except whole floats named as
  an id (below: integer ids with nulls, as pandas writes them); other types are left out;
- an integer column whose name says id is categorical: `id`, `*id`, `*_id`, `*Id`, `C<n>`
  (the last word ending in "id", but not a word such as paid, bid or valid);
- an integer column whose name says count or amount is dense: its first word is one of
  COUNT_FIRST (`num_clicks`, `n_items`, `total_spend`) or its last one of MEASURE_WORDS
  (`click_count`, `price`, `age`, `duration_s`...);
- an integer column whose last word names a thing that has ids (ENTITY_WORDS: user, item,
  brand, customer, campaign, shop, ...) is categorical;
- an integer column named `I<n>` (Criteo's counts) is dense;
- an integer column whose name says time (`time`, `timestamp`, `time_stamp`, `*_time`,
  `date`, `ts`) and whose values are Unix times (seconds or milliseconds, 1980-2100) is left
  out: as an id each second would be a table row seen once, as a number it is nearly the
  same for every row (log(1 + 1.5e9) moves by 0.001 in a week); derive hour or day columns
  and declare them to use it;
- any other integer column is categorical when its sample holds at least MANY_VALUES (100)
  distinct values that are not ordered like a measure: the rows per value do not change
  gradually from one value to the next (correlation of neighbours' row counts, values
  sorted, below SMOOTH = 0.5; a count's, an age's or a price's frequency follows its size,
  an id's popularity does not) and the rows are not piled at the low end (the median row's
  value is not in the lowest PILED = 5% of the range, as counts, prices and durations are).
  Otherwise it is dense (a measure, or a code with few values: declare it categorical if
  it is one). Limits: a bell-shaped measure seen in a few hundred rows, whose row counts
  are mostly noise, and an evenly spread integer measure read as ids; ids numbered by
  popularity (0 the most frequent) read as a count. Declare such columns.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pa_csv

from recsync.errors import DataError
from recsync.io.column_lists import (
    ListColumn,
    list_column,
    list_type,
    separated_list,
)
from recsync.io.formats.tabular.blocks import opened_parquet
from recsync.io.readers import is_gzip
from recsync.io.storage import open_binary

CATEGORICAL_NAME = re.compile(r"C\d+")
DENSE_NAME = re.compile(r"I\d+")
WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")  # snake_case, camelCase, UPPER
NOT_ID_WORDS = frozenset(["paid", "unpaid", "prepaid", "bid", "valid", "invalid", "void"])
TIME_WORDS = frozenset(["time", "timestamp", "date", "datetime", "ts", "epoch"])
COUNT_FIRST = frozenset(["num", "n", "count", "total", "nb"])
MEASURE_WORDS = frozenset(
    [
        "count", "counts", "cnt", "num", "total", "sum", "amount", "price", "cost", "qty",
        "quantity", "age", "duration", "length", "size", "seconds", "secs", "s", "ms",
        "minutes", "clicks", "views", "impressions", "visits", "score", "rank", "rating",
        "revenue", "spend", "bytes",
    ]
)  # fmt: skip
ENTITY_WORDS = frozenset(
    [
        "user", "item", "brand", "customer", "campaign", "adgroup", "advertiser", "creative",
        "category", "cate", "cat", "shop", "seller", "merchant", "store", "product", "sku",
        "author", "artist", "movie", "song", "query", "city", "country", "region", "device",
        "app", "site", "domain", "publisher", "channel", "member", "account", "uid", "pid",
    ]
)  # fmt: skip
UNIX_TIMES = ((315_532_800, 4_102_444_800), (315_532_800_000, 4_102_444_800_000))  # 1980-2100

SAMPLE_ROWS = 65_536
MANY_VALUES = 100
SMOOTH = 0.5
PILED = 0.05

LABEL, DENSE, CATEGORICAL, LEFT_OUT = "label", "dense", "categorical", "left out"


@dataclass(frozen=True)
class ColumnRole:
    """What the inference made of one column (`role`: label, dense, categorical or left
    out) and why, in words."""

    name: str
    type: str
    role: str
    why: str


@dataclass(frozen=True)
class InferredColumns:
    """Which columns of a table are the label, dense and categorical features (and which of
    those are strings, hashed), the columns the inference left out, and each column's role
    with its reason (in the file's order)."""

    label: str
    dense: tuple[str, ...]
    categorical: tuple[str, ...]
    hashed: tuple[str, ...]
    ignored: tuple[str, ...]
    roles: tuple[ColumnRole, ...] = ()
    multi_valued: tuple[tuple[str, str], ...] = ()  # (text column, separator)


def table_columns(path: str | Path, fmt: str, delimiter: str = ",") -> pa.Schema:
    """A CSV's (pyarrow-typed) or a Parquet file's columns."""
    if fmt == "parquet":
        with opened_parquet(path) as parquet:
            return parquet.schema_arrow
    parse = pa_csv.ParseOptions(delimiter=delimiter, invalid_row_handler=lambda row: "skip")
    with pa.input_stream(
        open_binary(path), compression="gzip" if is_gzip(path) else None
    ) as stream:
        return pa_csv.open_csv(stream, parse_options=parse).schema


def table_sample(path: str | Path, fmt: str, delimiter: str = ",") -> pa.Table:
    """A table's first rows, typed as `table_columns` types them: a CSV's first block (as
    pyarrow reads it, about 1 MiB), or a Parquet file's first SAMPLE_ROWS rows."""
    if fmt == "parquet":
        with opened_parquet(path) as parquet:
            first = [0] if parquet.num_row_groups else []  # not the whole file's bytes
            for batch in parquet.iter_batches(batch_size=SAMPLE_ROWS, row_groups=first):
                return pa.Table.from_batches([batch])
            return parquet.schema_arrow.empty_table()
    parse = pa_csv.ParseOptions(delimiter=delimiter, invalid_row_handler=lambda row: "skip")
    with pa.input_stream(
        open_binary(path), compression="gzip" if is_gzip(path) else None
    ) as stream:
        reader = pa_csv.open_csv(stream, parse_options=parse)
        try:
            first = reader.read_next_batch()
        except StopIteration:
            return reader.schema.empty_table()
        return pa.Table.from_batches([first]).slice(0, SAMPLE_ROWS)


def infer_columns(sample: pa.Table, label: str, source: str) -> InferredColumns:
    """The model inputs of a table's columns (the rule above), from a sample of its rows
    (`table_sample`)."""
    if label not in sample.column_names:
        binary = _binary_columns(sample)
        verb = "holds" if len(binary) == 1 else "hold"
        hint = f" ({', '.join(binary)} {verb} only 0 and 1)" if binary else ""
        raise DataError(
            f"no label column {label!r} among {sample.column_names}{hint}: set "
            "data.schema.label (or --label for inspect)",
            source=source,
        )
    roles, hashed, multi_valued = [], [], []
    for column in sample.schema:
        lists = _lists(column, sample.column(column.name))
        if column.name == label:
            role, why = LABEL, "the label (data.schema.label)"
        elif lists is not None:
            role, why = CATEGORICAL, lists.why
            hashed += [column.name] if lists.hashed else []
            if lists.separator is not None:
                multi_valued.append((column.name, lists.separator))
        elif list_type(column.type):
            role, why = LEFT_OUT, f"type {column.type}: a list of neither integers nor text"
        else:
            role, why = _role(column, sample.column(column.name))
            hashed += [column.name] if role == CATEGORICAL and _textual(column) else []
        roles.append(ColumnRole(column.name, str(column.type), role, why))

    def named(role: str) -> tuple[str, ...]:
        return tuple(r.name for r in roles if r.role == role)

    return InferredColumns(
        label,
        named(DENSE),
        named(CATEGORICAL),
        tuple(hashed),
        named(LEFT_OUT),
        tuple(roles),
        tuple(multi_valued),
    )


def _lists(column: pa.Field, values: pa.ChunkedArray) -> ListColumn | None:
    """What a list column or a text column of lists holds (column_lists.py), or None."""
    if list_type(column.type):
        return list_column(column.type)
    if _textual(column) and pa.types.is_string(column.type):
        return separated_list(values)
    return None


def _textual(column: pa.Field) -> bool:
    """Text or bytes, dictionary-encoded too (a pandas category column)."""
    kind = column.type.value_type if pa.types.is_dictionary(column.type) else column.type
    return bool(
        pa.types.is_string(kind)
        or pa.types.is_large_string(kind)
        or pa.types.is_binary(kind)
        or pa.types.is_large_binary(kind)
    )


def _role(column: pa.Field, values: pa.ChunkedArray) -> tuple[str, str]:
    """(role, why) of a feature column (the rule above)."""
    kind = column.type
    if _textual(column):
        return CATEGORICAL, "text: hashed ids"
    words = [w.lower() for w in WORD.findall(column.name)]
    last = words[-1] if words else ""
    id_named = bool(CATEGORICAL_NAME.fullmatch(column.name)) or (
        last.endswith(("id", "ids")) and last not in NOT_ID_WORDS
    )
    if pa.types.is_floating(kind):
        present = values.drop_null().to_numpy()
        if id_named and present.size and bool((present == np.floor(present)).all()):
            return CATEGORICAL, (
                "whole floats named as an id (integer ids with nulls, as pandas writes them)"
            )
        return DENSE, "floating point: a measure"
    if not pa.types.is_integer(kind):
        return LEFT_OUT, f"type {kind} is neither a number nor text"
    if id_named:
        return CATEGORICAL, "integer named as an id"
    if (len(words) > 1 and words[0] in COUNT_FIRST) or last in MEASURE_WORDS:
        return DENSE, f"integer named as a count or amount ({column.name})"
    if last in ENTITY_WORDS:
        return CATEGORICAL, f"integer named as a thing with ids ({last})"
    if DENSE_NAME.fullmatch(column.name):
        return DENSE, "integer named I<n>: a count"
    present = values.drop_null().to_numpy()
    if present.size and _time_named(words) and _unix_times(present):
        return LEFT_OUT, (
            "Unix times named as time: each second as an id is seen once, as a number it "
            "barely moves; derive hour or day columns to use it"
        )
    distinct, counts = np.unique(present, return_counts=True)
    if distinct.size < MANY_VALUES:
        return DENSE, (
            f"integer with {distinct.size} distinct values in {present.size:,} rows (under "
            f"{MANY_VALUES}): a measure or a small code"
        )
    smooth = _neighbour_correlation(counts)
    if smooth >= SMOOTH:
        return DENSE, (
            f"integer whose rows per value change gradually with the value (neighbour "
            f"correlation {smooth:.2f} >= {SMOOTH}): a measure"
        )
    low, high = int(distinct[0]), int(distinct[-1])
    median = float(np.median(present))
    if median - low < PILED * (high - low):
        return DENSE, (
            f"integer whose rows pile at the low end (median {median:g} in the lowest "
            f"{PILED:.0%} of {low}..{high}): a count or amount"
        )
    return CATEGORICAL, (
        f"integer with {distinct.size:,} distinct values in {present.size:,} rows, not "
        f"ordered like a measure (neighbour correlation {smooth:.2f}, median {median:g} in "
        f"{low}..{high}): ids"
    )


def _time_named(words: list[str]) -> bool:
    """Whether a column's name (its words) says it holds times."""
    return any(w in TIME_WORDS or w.endswith(("time", "timestamp")) for w in words)


def _unix_times(values: np.ndarray) -> bool:
    """Whether every value is a Unix time in seconds or in milliseconds (1980-2100)."""
    low, high = int(values.min()), int(values.max())
    return any(start <= low and high < stop for start, stop in UNIX_TIMES)


def _neighbour_correlation(counts: np.ndarray) -> float:
    """Pearson correlation of the rows per value with the next value's (values sorted); 0
    when the counts do not vary (every value seen equally often says nothing of order)."""
    before, after = counts[:-1].astype(np.float64), counts[1:].astype(np.float64)
    if before.std() == 0 or after.std() == 0:
        return 0.0
    return float(np.corrcoef(before, after)[0, 1])


def _binary_columns(sample: pa.Table) -> list[str]:
    """The integer columns of a sample whose values are all 0 or 1 (candidate labels)."""
    found = []
    for column in sample.schema:
        if pa.types.is_integer(column.type):
            values = sample.column(column.name).drop_null().to_numpy()
            if values.size and set(np.unique(values).tolist()) <= {0, 1}:
                found.append(column.name)
    return found
