"""The columns of a CSV or Parquet table read from its header (and pyarrow's typing of its
first block), and which model input each becomes when the config declares none: `label`
the label, string columns and columns named C<n> categorical (strings hashed), the other
numeric columns dense. `recsync data inspect` shows it; a config whose [data.schema]
lists no dense and no categorical column trains on it."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq

from recsync.errors import DataError
from recsync.io.readers import is_gzip

CATEGORICAL_NAME = re.compile(r"C\d+")


@dataclass(frozen=True)
class InferredColumns:
    """Which columns of a table are the label, dense and categorical features (and which of
    those are strings, hashed), and the columns the inference left out (other types)."""

    label: str
    dense: tuple[str, ...]
    categorical: tuple[str, ...]
    hashed: tuple[str, ...]
    ignored: tuple[str, ...]


def table_columns(path: Path, fmt: str, delimiter: str = ",") -> pa.Schema:
    """A CSV's (pyarrow-typed) or a Parquet file's columns."""
    if fmt == "parquet":
        return pq.read_schema(path)
    parse = pa_csv.ParseOptions(delimiter=delimiter, invalid_row_handler=lambda row: "skip")
    with pa.input_stream(str(path), compression="gzip" if is_gzip(path) else None) as stream:
        return pa_csv.open_csv(stream, parse_options=parse).schema


def infer_columns(columns: pa.Schema, label: str, source: str) -> InferredColumns:
    """The model inputs of a table's columns (the rule above)."""
    if label not in columns.names:
        raise DataError(
            f"no label column {label!r} among {columns.names}: set data.schema.label "
            "(or --label for inspect)",
            source=source,
        )
    dense, categorical, hashed, ignored = [], [], [], []
    for column in columns:
        textual = pa.types.is_string(column.type) or pa.types.is_binary(column.type)
        numeric = pa.types.is_integer(column.type) or pa.types.is_floating(column.type)
        if column.name == label:
            continue
        if textual or (
            CATEGORICAL_NAME.fullmatch(column.name) and pa.types.is_integer(column.type)
        ):
            categorical.append(column.name)
            hashed += [column.name] if textual else []
        elif numeric:
            dense.append(column.name)
        else:
            ignored.append(column.name)
    return InferredColumns(label, tuple(dense), tuple(categorical), tuple(hashed), tuple(ignored))
