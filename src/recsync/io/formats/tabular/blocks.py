"""Parquet and CSV record batches into batches a column at a time: the reader's hot path.

A record batch whose values are all plain converts column by column, with no Python per
row: numeric labels in {0, 1}; integer or floating dense columns, finite (nulls filled
with `null_dense` where it is set); non-negative integer ids with no null; hashed columns
of strings with no null and no empty string (hashed by compiled code, io/murmur.py, bit
for bit as the row parser hashes them with mmh3); multi-valued columns (a Parquet list
column, or text split at its declared separator by pyarrow) whose elements are such, a
null row an empty bag, flattened with each row's bag length. Any other record batch (a null label, a
bad value, floats in an id column, ...) goes row by row through `TabularRowParser`, which
rejects and counts exactly what it always did, with its row numbers: both paths give the
same examples, in order (tested), in fixed and in keyed mode (`schema.keyed`: keys of
data/keys.py instead of table rows).
Measured: 50 microseconds per example row by row, a few column by column.

A CSV record batch holds text: `typed_csv` first turns it into such columns where every
value is written plainly (a label "0" or "1"; decimal numbers as `-12.5e3` writes them, no
spaces, no "nan"; ids of decimal digits that fit an int64; an empty value is a null),
parsed by pyarrow, which rounds as Python's float() does; any other text leaves the record
batch to the row parser.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import torch

from recsync.data.batch import Batch
from recsync.data.keys import ID_MASK, integer_ids, make_keys
from recsync.data.records import collated, good_examples
from recsync.data.skips import SkipReport
from recsync.errors import DataError
from recsync.io.formats.tabular.rows import (
    DECIMAL,
    SIGNED,
    TabularRowParser,
    TabularSchema,
    rows_from_columns,
)
from recsync.io.murmur import murmur32, murmur64
from recsync.io.storage import open_ranges
from recsync.io.urls import shown

PARQUET_READ_ROWS = 8192
_NUMBER = r"^-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?$"
_DIGITS = f"^{DECIMAL.pattern}$"  # the row parser's, unstripped
_SIGNED_DIGITS = f"^{SIGNED.pattern}$"  # a keyed column's (negative ids have keys)


def _plain_numeric(column: pa.Array) -> bool:
    return bool(pa.types.is_integer(column.type) or pa.types.is_floating(column.type))


def _labels(column: pa.Array) -> np.ndarray | None:
    if column.null_count or not _plain_numeric(column):
        return None
    values: np.ndarray = column.to_numpy(zero_copy_only=False).astype(np.float64)
    if not np.isin(values, (0.0, 1.0)).all():
        return None
    return values.astype(np.float32)


def _dense(column: pa.Array, null_dense: float | None) -> np.ndarray | None:
    if not _plain_numeric(column) or (column.null_count and null_dense is None):
        return None
    if column.null_count:
        column = pc.fill_null(column.cast(pa.float64()), null_dense)
    values: np.ndarray = column.to_numpy(zero_copy_only=False).astype(np.float64)
    if not np.isfinite(values).all():
        return None
    return values


def _ids(
    column: pa.Array, table_rows: int, hashed: bool, seed: int, keyed_feature: int | None = None
) -> np.ndarray | None:
    """A column's ids (`keyed_feature`: its keys, data/keys.py), or None where a value
    needs the row parser."""
    if column.null_count:
        return None
    if hashed:
        textual = pa.types.is_string(column.type) or pa.types.is_large_string(column.type)
        binary = pa.types.is_binary(column.type) or pa.types.is_large_binary(column.type)
        if not (textual or binary) or pc.any(pc.equal(pc.binary_length(column), 0)).as_py():
            return None
        if keyed_feature is not None:
            return make_keys(keyed_feature, murmur64(column, seed) & np.uint64(ID_MASK))
        return (murmur32(column, seed) % np.uint64(table_rows)).astype(np.int64)
    if not pa.types.is_integer(column.type):
        return None
    values: np.ndarray = column.to_numpy(zero_copy_only=False)
    if keyed_feature is None and values.size and values.min() < 0:
        return None
    if keyed_feature is not None:
        return make_keys(keyed_feature, integer_ids(values))
    if values.dtype == np.uint64 and values.size and values.max() > np.iinfo(np.int64).max:
        return (values % np.uint64(table_rows)).astype(np.int64)
    return values.astype(np.int64) % table_rows


def _is_list(column: pa.Array) -> bool:
    kind = column.type
    return bool(pa.types.is_list(kind) or pa.types.is_large_list(kind))


def _bags(column: pa.Array, separator: str | None) -> tuple[pa.Array, np.ndarray] | None:
    """A multi-valued column's elements, flat, and each row's number of them: a list
    column's, or text split at `separator`; None where a value needs the row parser (an
    empty string, an empty element, a null in a list). A null row is an empty bag."""
    if not _is_list(column):
        textual = pa.types.is_string(column.type) or pa.types.is_large_string(column.type)
        if separator is None or not textual:
            return None
        if pc.any(pc.equal(pc.binary_length(column), 0)).as_py():
            return None
        column = pc.split_pattern(column, separator)
    lengths = pc.fill_null(pc.list_value_length(column), 0).to_numpy(zero_copy_only=False)
    elements = pc.list_flatten(column)
    if elements.null_count:
        return None
    return elements, lengths.astype(np.int64)


def _digits_as_ids(elements: pa.Array, keyed: bool) -> pa.Array | None:
    """Text elements of an integer-id column as int64, or None where one is not plain."""
    if not (pa.types.is_string(elements.type) or pa.types.is_large_string(elements.type)):
        return elements
    if not _all_match(elements, _SIGNED_DIGITS if keyed else _DIGITS):
        return None
    try:
        return elements.cast(pa.int64())
    except pa.ArrowInvalid:
        return None


def columnar_batch(record_batch: pa.RecordBatch, schema: TabularSchema) -> Batch | None:
    """The record batch's examples (columns in `schema.columns` order), or None where a
    value needs the row parser."""
    n = record_batch.num_rows
    labels = _labels(record_batch.column(0))
    if labels is None:
        return None
    dense = []
    for d in range(len(schema.dense)):
        values = _dense(record_batch.column(1 + d), schema.null_dense)
        if values is None:
            return None
        dense.append(values)
    hashed = set(schema.hashed)
    ids = []
    lengths: list[np.ndarray | None] = []  # None: one id a row
    first = 1 + len(schema.dense)
    for f, name in enumerate(schema.categorical):
        column = record_batch.column(first + f)
        if pa.types.is_dictionary(column.type):  # a pandas category column
            column = column.dictionary_decode()
        separator = schema.multi_valued.get(name)
        bag_lengths = None
        if separator is not None or _is_list(column):
            bags = _bags(column, separator)
            if bags is None:
                return None
            column, bag_lengths = bags
            if name not in hashed and (column := _digits_as_ids(column, schema.keyed)) is None:
                return None
        keyed_feature = f if schema.keyed else None
        values = _ids(column, schema.table_rows[f], name in hashed, schema.hash_seed, keyed_feature)
        if values is None:
            return None
        ids.append(values)
        lengths.append(bag_lengths)
    dense_matrix = np.stack(dense, axis=1) if dense else np.zeros((n, 0))
    flat_ids = np.concatenate(ids) if ids else np.zeros(0, dtype=np.int64)
    return Batch(
        dense=torch.from_numpy(dense_matrix.astype(np.float32)),
        ids=torch.from_numpy(flat_ids),
        offsets=_offsets(lengths, n),
        labels=torch.from_numpy(labels),
    )


def _offsets(lengths: list[np.ndarray | None], n: int) -> torch.Tensor:
    """The batch's bag offsets, feature-major, from each feature's bag lengths (None: one
    id for each of the n rows)."""
    if all(length is None for length in lengths):
        return torch.arange(len(lengths) * n + 1, dtype=torch.int64)
    every = [np.ones(n, dtype=np.int64) if length is None else length for length in lengths]
    offsets = torch.zeros(len(every) * n + 1, dtype=torch.int64)
    torch.cumsum(torch.from_numpy(np.concatenate(every)), 0, out=offsets[1:])
    return offsets


def all_true(mask: pa.Array) -> bool:
    """No value of a boolean array is false (nulls aside)."""
    return pc.all(mask).as_py() is not False


def _all_match(column: pa.Array, pattern: str) -> bool:
    """Every non-null value matches `pattern`."""
    return all_true(pc.match_substring_regex(column, pattern))


def typed_csv(record_batch: pa.RecordBatch, schema: TabularSchema) -> pa.RecordBatch | None:
    """A CSV record batch's text columns as numbers (hashed columns stay text), or None
    where a value is not written plainly (the row parser reads it)."""
    columns = record_batch.columns
    labels = columns[0]
    if labels.null_count or not all_true(pc.is_in(labels, pa.array(["0", "1"]))):
        return None
    typed = [pc.equal(labels, "1").cast(pa.int8())]
    first = 1 + len(schema.dense)
    for column in columns[1:first]:
        if not _all_match(column, _NUMBER):
            return None
        typed.append(column.cast(pa.float64()))
    hashed = set(schema.hashed)
    for name, column in zip(schema.categorical, columns[first:], strict=True):
        if name in hashed or name in schema.multi_valued:  # text, split by columnar_batch
            typed.append(column)
            continue
        if not _all_match(column, _SIGNED_DIGITS if schema.keyed else _DIGITS):
            return None
        try:
            typed.append(column.cast(pa.int64()))
        except pa.ArrowInvalid:  # past an int64: the row parser takes ints of any size
            return None
    return pa.RecordBatch.from_arrays(typed, names=list(schema.columns))


@contextlib.contextmanager
def opened_parquet(
    path: str | Path, footer: pq.FileMetaData | None = None, fetched: io.RawIOBase | None = None
) -> Iterator[pq.ParquetFile]:
    """A Parquet file opened from where it lives (io/storage.py: each column chunk read as
    one range of a remote file; `footer`: its footer as read before, not read again;
    `fetched`: the file with its bytes read ahead, io/read_ahead.py); one that is no
    Parquet file (a truncated one, say) is a DataError naming it."""
    with fetched or open_ranges(path) as raw:
        try:
            table = pq.ParquetFile(raw, metadata=footer)
        except (pa.ArrowInvalid, OSError) as error:
            raise DataError(f"not a readable Parquet file: {error}", source=shown(path)) from None
        with table:
            yield table


def _record_batches(table: pq.ParquetFile, columns: list[str]) -> Iterator[pa.RecordBatch]:
    """A file's record batches a row group at a time: pyarrow asked for all the row groups
    at once reads every one's bytes before the first batch (a whole remote file)."""
    for group in range(table.num_row_groups):
        yield from table.iter_batches(PARQUET_READ_ROWS, [group], columns)


def parquet_blocks(
    path: str | Path,
    schema: TabularSchema,
    *,
    strict: bool,
    skips: SkipReport,
    columnar: bool = True,
) -> Iterator[Batch]:
    """The good examples of one Parquet file, a record batch (PARQUET_READ_ROWS rows) at a
    time, as batches of any size; `columnar` False: every record batch row by row."""
    source = shown(path)
    parser = TabularRowParser(schema)
    with opened_parquet(path) as table:
        missing = [c for c in schema.columns if c not in table.schema_arrow.names]
        if missing:
            raise DataError(
                f"declared columns not found: {missing}", source=source, field=missing[0]
            )
        first_row = 1
        for record_batch in _record_batches(table, list(schema.columns)):
            block = columnar_batch(record_batch, schema) if columnar else None
            if block is None:
                rows = rows_from_columns(record_batch.to_pydict(), schema, source=source)
                numbered = enumerate(rows, start=first_row)
                block = collated(
                    good_examples(numbered, parser, source=source, strict=strict, skips=skips)
                )
            first_row += record_batch.num_rows
            if block is not None and block.batch_size:
                yield block
