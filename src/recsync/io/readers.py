"""Open data files and stream them as batches; parsing is delegated to recsync.data.

Formats: "criteo", "libsvm", "libffm" (text, plain or gzip — detected by the gzip magic
bytes, whatever the file name), "csv" (pyarrow's streaming reader; .gz too) and "parquet"
(record batches, converted a column at a time where their values allow: table_blocks.py).
Every format is read a block at a time and converted with vectorised code where its values
are plain, by its row parser otherwise (criteo_blocks.py, libsvm_blocks.py, table_blocks.py);
`text_examples` is the row parser alone.
`open_dataset` returns a `DatasetReader`: an iterator of `Batch`es of `batch_size` (the
last may be smaller; batches fill across file boundaries) whose `.skips` reports, at any
time and at the end, the lines skipped in lenient mode. In strict mode the first malformed
line raises `DataError`.

Line numbers in messages are 1-based physical lines for text and CSV (the CSV header is line
1; a quoted value spanning several lines shifts later numbers) and 1-based row numbers for
Parquet, counted per file.
"""

from __future__ import annotations

import gzip
import io
import itertools
import zlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, Any

import pyarrow as pa
import pyarrow.csv as pa_csv

from recsync.data.batch import Batch, rebatch
from recsync.data.records import Example, collated, good_examples
from recsync.data.skips import Rejected, SkipReport
from recsync.errors import ConfigError, DataError
from recsync.io.formats.criteo.blocks import criteo_blocks
from recsync.io.formats.criteo.rows import CriteoLineParser, CriteoSchema
from recsync.io.formats.libsvm.blocks import libsvm_blocks
from recsync.io.formats.libsvm.rows import (
    LibFFMLineParser,
    LibFFMSchema,
    LibSVMLineParser,
    LibSVMSchema,
)
from recsync.io.formats.tabular.blocks import columnar_batch, parquet_blocks, typed_csv
from recsync.io.formats.tabular.rows import TabularRowParser, TabularSchema, rows_from_columns
from recsync.io.storage import exists, open_binary, open_ranges
from recsync.io.urls import base_name, shown

Schema = CriteoSchema | LibSVMSchema | LibFFMSchema | TabularSchema
FORMATS = ("criteo", "libsvm", "libffm", "csv", "parquet")
# by a file's last suffix (".gz" aside); libFM's `label index:value` lines are libSVM's syntax
SUFFIX_FORMATS = {
    ".parquet": "parquet",
    ".pq": "parquet",
    ".csv": "csv",
    ".svm": "libsvm",
    ".libsvm": "libsvm",
    ".fm": "libsvm",
    ".libfm": "libsvm",
    ".ffm": "libffm",
    ".libffm": "libffm",
    ".tsv": "criteo",
    ".txt": "criteo",
}


def format_of_name(path: str | Path) -> str:
    """The format a file's name says (SUFFIX_FORMATS), or a ConfigError."""
    suffixes = [s.lower() for s in Path(base_name(path)).suffixes if s.lower() != ".gz"]
    if suffixes and suffixes[-1] in SUFFIX_FORMATS:
        return SUFFIX_FORMATS[suffixes[-1]]
    known = ", ".join(sorted(SUFFIX_FORMATS))
    raise ConfigError(f"cannot tell the format of {shown(path)} from its name ({known}); name it")


_TEXT_PARSERS = {"criteo": CriteoLineParser, "libsvm": LibSVMLineParser, "libffm": LibFFMLineParser}
_SCHEMA_OF_FORMAT = {
    "criteo": CriteoSchema,
    "libsvm": LibSVMSchema,
    "libffm": LibFFMSchema,
    "csv": TabularSchema,
    "parquet": TabularSchema,
}
_GZIP_MAGIC = b"\x1f\x8b"
CSV_BLOCK_BYTES = 1 << 20


def is_gzip(path: str | Path) -> bool:
    """True if the file starts with the gzip magic bytes."""
    with open_ranges(path) as f:
        return f.read(2) == _GZIP_MAGIC


def open_text(path: str | Path) -> IO[str]:
    """A text file (plain or gzip) for reading lines as UTF-8; undecodable bytes become
    U+FFFD, so the line is rejected by its parser instead of ending the stream."""
    # Lines end at "\n" only: a stray "\r" inside a line stays in its field (where the
    # parser judges it) instead of splitting the line and shifting the line numbers.
    binary = open_binary(path)
    stream = gzip.GzipFile(fileobj=binary, mode="rb") if is_gzip(path) else binary
    return io.TextIOWrapper(stream, encoding="utf-8", errors="replace", newline="\n")


def _read_lines(lines: IO[str], source: str) -> Iterator[tuple[int, str]]:
    """(line number, line) pairs; a file that cannot be read to its end (a truncated or
    corrupt gzip stream, a read error) is a DataError naming it and the last good line."""
    number = 0
    try:
        for number, line in enumerate(lines, start=1):  # noqa: B007 - read after the loop
            yield number, line
    except (EOFError, OSError, zlib.error) as error:
        kind = "a truncated or corrupt gzip file" if is_gzip(source) else "a read error"
        raise DataError(
            f"cannot read past line {number} ({kind}: {error})", source=shown(source)
        ) from None


def infer_format(path: str | Path, schema: Schema) -> str:
    """The format named by the schema type (text formats) or by the file name (tables)."""
    if not isinstance(schema, TabularSchema):
        return next(fmt for fmt, kind in _SCHEMA_OF_FORMAT.items() if isinstance(schema, kind))
    suffixes = [s.lower() for s in Path(base_name(path)).suffixes]
    if suffixes and suffixes[-1] in (".parquet", ".pq"):
        return "parquet"
    if ".csv" in suffixes:
        return "csv"
    raise ConfigError(f"cannot tell CSV from Parquet by the name {shown(path)!r}; pass fmt")


def text_examples(
    path: str | Path, fmt: str, schema: Schema, *, strict: bool, skips: SkipReport
) -> Iterator[Example]:
    """Good examples of one text file, in order."""
    parser = _TEXT_PARSERS[fmt](schema)
    with open_text(path) as lines:
        numbered = _read_lines(lines, str(path))
        yield from good_examples(numbered, parser, source=shown(path), strict=strict, skips=skips)


def _text_file_blocks(
    path: str | Path,
    schema: CriteoSchema | LibSVMSchema | LibFFMSchema,
    *,
    strict: bool,
    skips: SkipReport,
) -> Iterator[Batch]:
    """Good examples of one Criteo, libSVM or libffm file (plain or gzip), a block of lines
    at a time (criteo_blocks.py, libsvm_blocks.py)."""
    where: dict[str, Any] = {"source": shown(path), "strict": strict, "skips": skips}
    with open_text(path) as lines:
        numbered = _read_lines(lines, str(path))
        if isinstance(schema, CriteoSchema):
            yield from criteo_blocks(numbered, schema, **where)
        else:
            yield from libsvm_blocks(numbered, schema, **where)


def _numbered_csv_rows(
    record_batch: pa.RecordBatch,
    bad_rows: dict[int, Rejected],
    next_line: int,
    schema: TabularSchema,
    source: str,
) -> tuple[list[tuple[int, tuple[object, ...] | Rejected]], int]:
    """A record batch's rows with their physical line numbers, interleaved with the rows
    pyarrow rejected among them; and the line after them."""
    numbered: list[tuple[int, tuple[object, ...] | Rejected]] = []
    for row in rows_from_columns(record_batch.to_pydict(), schema, source=source):
        while next_line in bad_rows:
            numbered.append((next_line, bad_rows.pop(next_line)))
            next_line += 1
        numbered.append((next_line, row))
        next_line += 1
    return numbered, next_line


def _csv_blocks(reader: pa_csv.CSVStreamingReader, source: str) -> Iterator[pa.RecordBatch]:
    """The reader's record batches; a block pyarrow cannot parse (e.g. invalid UTF-8, an
    unterminated quote) ends the stream with a DataError naming the file."""
    while True:
        try:
            yield reader.read_next_batch()
        except StopIteration:
            return
        except (pa.ArrowInvalid, OSError) as error:  # OSError: a truncated or corrupt gzip
            raise DataError(f"cannot read CSV: {error}", source=source) from None


def csv_blocks(
    path: str | Path,
    schema: TabularSchema,
    *,
    strict: bool,
    skips: SkipReport,
    columnar: bool = True,
) -> Iterator[Batch]:
    """Good examples of one CSV file (plain or gzip), streamed block by block, as batches
    of any size.

    Every declared column is read as text, then converted a column at a time where a block
    is written plainly (table_blocks.typed_csv) and by the row parser otherwise, so a bad
    value rejects its row only (pyarrow's per-block type inference could not fail
    mid-file). Rows with the wrong number of columns are rejected as "wrong_field_count".
    """
    stream = pa.input_stream(open_binary(path), compression="gzip" if is_gzip(path) else None)
    with stream:
        yield from csv_stream_blocks(
            stream, schema, source=shown(path), strict=strict, skips=skips, columnar=columnar
        )


def csv_stream_blocks(
    stream: Any,
    schema: TabularSchema,
    *,
    source: str,
    strict: bool,
    skips: SkipReport,
    columnar: bool = True,
    numbers: Sequence[int] | None = None,
) -> Iterator[Batch]:
    """`csv_blocks` of an open stream (a header line, then rows); `numbers`: the number
    messages give each row's line (the stream's lines from 2 otherwise)."""

    def number(line: int) -> int:
        return line if numbers is None else numbers[line - 2]

    bad_rows: dict[int, Rejected] = {}
    where: dict[str, Any] = {"source": source, "strict": strict, "skips": skips}

    def on_invalid_row(row: Any) -> str:
        bad_rows[row.number or 0] = Rejected(
            "wrong_field_count",
            "",
            f"{row.actual_columns} columns, the header has {row.expected_columns}",
        )
        return "skip"

    try:
        reader = pa_csv.open_csv(
            stream,
            read_options=pa_csv.ReadOptions(use_threads=False, block_size=CSV_BLOCK_BYTES),
            parse_options=pa_csv.ParseOptions(
                delimiter=schema.delimiter,
                invalid_row_handler=on_invalid_row,
                ignore_empty_lines=False,
            ),
            convert_options=pa_csv.ConvertOptions(
                column_types={c: pa.string() for c in schema.columns},
                include_columns=list(schema.columns),
                null_values=[""],
                strings_can_be_null=True,
            ),
        )
    except (pa.ArrowInvalid, pa.ArrowKeyError) as error:
        raise DataError(f"cannot read CSV: {error}", source=source) from None
    parser, next_line = TabularRowParser(schema), 2  # line 1 is the header
    for record_batch in _csv_blocks(reader, source):
        block = None
        if columnar and not bad_rows:  # no rejected row to number among its rows
            typed = typed_csv(record_batch, schema)
            block = None if typed is None else columnar_batch(typed, schema)
        if block is not None:
            next_line += record_batch.num_rows
        else:
            numbered, next_line = _numbered_csv_rows(
                record_batch, bad_rows, next_line, schema, source
            )
            renumbered = [(number(line), row) for line, row in numbered]
            block = collated(good_examples(renumbered, parser, **where))
        if block is not None:
            yield block
    trailing = [(number(line), bad_rows.pop(line)) for line in sorted(bad_rows)]
    list(good_examples(trailing, parser, **where))  # all rejected: counted, or raised


class DatasetReader(Iterator[Batch]):
    """Batches of one or more files of one format, in order; `.skips` counts skipped lines.

    Iterate it once. `close()` (or leaving a `with` block) closes the open file early.
    """

    def __init__(
        self,
        paths: Sequence[str | Path],
        fmt: str,
        schema: Schema,
        *,
        batch_size: int,
        strict: bool = False,
        skips: SkipReport | None = None,
    ):
        if batch_size < 1:
            raise ConfigError(f"batch_size must be >= 1, got {batch_size}")
        self.paths = list(paths)
        self.fmt = fmt
        self.schema = schema
        self.strict = strict
        self.skips = SkipReport() if skips is None else skips
        self._batches: Iterator[Batch]
        # every format a block at a time, vectorised where its values allow
        blocks = (self._file_blocks(path) for path in self.paths)
        self._batches = rebatch(itertools.chain.from_iterable(blocks), batch_size)

    def _file_blocks(self, path: str | Path) -> Iterator[Batch]:
        if not isinstance(self.schema, TabularSchema):
            return _text_file_blocks(path, self.schema, strict=self.strict, skips=self.skips)
        read = parquet_blocks if self.fmt == "parquet" else csv_blocks
        return read(path, self.schema, strict=self.strict, skips=self.skips)

    def __iter__(self) -> DatasetReader:
        return self

    def __next__(self) -> Batch:
        return next(self._batches)

    def close(self) -> None:
        self._batches.close()  # type: ignore[attr-defined]

    def __enter__(self) -> DatasetReader:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def open_dataset(
    paths: str | Path | Sequence[str | Path],
    fmt: str,
    schema: Schema,
    *,
    batch_size: int,
    strict: bool = False,
    skips: SkipReport | None = None,
) -> DatasetReader:
    """Stream the files as batches. fmt: one of FORMATS, or "auto" (see `infer_format`)."""
    path_list = [str(paths)] if isinstance(paths, str | Path) else [str(p) for p in paths]
    if not path_list:
        raise ConfigError("open_dataset: no paths given")
    if fmt == "auto":
        formats = {infer_format(p, schema) for p in path_list}
        if len(formats) != 1:
            raise ConfigError(f"open_dataset: files of several formats {sorted(formats)}")
        fmt = formats.pop()
    if fmt not in FORMATS:
        raise ConfigError(f"unknown data format {fmt!r}; expected one of {FORMATS} or 'auto'")
    if not isinstance(schema, _SCHEMA_OF_FORMAT[fmt]):
        expected = _SCHEMA_OF_FORMAT[fmt].__name__
        raise ConfigError(f"format {fmt!r} needs a {expected}, got {type(schema).__name__}")
    for path in path_list:
        if not exists(path):
            raise ConfigError(f"data file not found: {shown(path)}")
    return DatasetReader(path_list, fmt, schema, batch_size=batch_size, strict=strict, skips=skips)
