"""Parquet files shared among readers by row group: each reader reads and parses only the
row groups of its share (docs/readers.md, "Parquet files shared by row group").

A Parquet file is stored as row groups, each readable alone; how many rows each holds the
footer says, so the files' row groups are numbered (end to end, in `data.path` order)
without reading any data. Row group k is *block* k of the stream: slots [kG, (k+1)G),
where G is the largest row group's row count, its examples (good rows the held-out coin
does not hold) filling its first slots, so the readers share row groups with the deal of
line blocks (`data/shares.py`) unchanged. A row is a "line" for the held-out coin
(`data/line_coin.py`, keyed by file and row) and for the messages (rows are numbered from
1 in each file, as the stream reader numbers them).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from recsync.data.batch import Batch, concat
from recsync.data.line_coin import HeldCutoff, held_cutoff, held_lines
from recsync.data.records import collated, good_examples
from recsync.data.shares import Deal
from recsync.data.skips import LineSkips
from recsync.errors import DataError
from recsync.io.file_shares import ReaderShare
from recsync.io.formats.tabular.blocks import PARQUET_READ_ROWS, columnar_batch, opened_parquet
from recsync.io.formats.tabular.rows import TabularRowParser, TabularSchema, rows_from_columns
from recsync.io.line_examples import ParsedLines
from recsync.io.read_ahead import Ahead, Span
from recsync.io.storage import file_stamp
from recsync.io.urls import is_url, shown

GROUP_UNIT = "rowgroups"  # a checkpoint's `data_unit`: "rowgroups/<G>"


@dataclass(frozen=True)
class ParquetGroups:
    """A job's Parquet files by row group (`groups[f]`: file f's row counts, in order),
    how to parse them, and the held-out coin; the interface `ReaderShare` reads."""

    paths: tuple[str, ...]
    groups: tuple[tuple[int, ...], ...]
    schema: TabularSchema
    strict: bool
    seed: int
    test_fraction: float
    cutoff: HeldCutoff
    stamps: tuple[tuple[int, int], ...]  # each file's (size, modification time) as found

    @property
    def block_lines(self) -> int:
        """G: the slots of a row group (its examples fill the first)."""
        return max(rows for file in self.groups for rows in file)

    @property
    def unit(self) -> str:
        return f"{GROUP_UNIT}/{self.block_lines}"

    @property
    def line_counts(self) -> list[int]:
        return [sum(file) for file in self.groups]

    @property
    def blocks(self) -> int:
        """Row groups of one pass (of all the files)."""
        return sum(len(file) for file in self.groups)

    @property
    def slots(self) -> int:
        return self.blocks * self.block_lines

    def where(self, block: int) -> tuple[int, int, int]:
        """(file index, row group in it, rows of the file before it) of row group `block`."""
        for file_index, file in enumerate(self.groups):
            if block < len(file):
                return file_index, block, sum(file[:block])
            block -= len(file)
        raise AssertionError(f"row group {block} past the files' end")

    def share(
        self, deal: Deal, reader: int, batch_size: int, epochs: int, shuffled: bool
    ) -> ReaderShare:
        return GroupShare(self, deal, reader, batch_size, epochs, shuffled)


def parquet_groups(
    paths: tuple[str, ...],
    schema: TabularSchema,
    strict: bool,
    seed: int,
    test_fraction: float,
    test_max_examples: int,
) -> ParquetGroups:
    """The files' row groups from their footers (no data read), and the held-out cutoff."""
    groups, stamps = [], []
    for path in paths:
        stamps.append(file_stamp(path))
        meta = _footer(path, stamps[-1])
        groups.append(tuple(meta.row_group(g).num_rows for g in range(meta.num_row_groups)))
    counts = [sum(file) for file in groups]
    cutoff = held_cutoff(seed, test_fraction, test_max_examples, counts)
    return ParquetGroups(
        paths, tuple(groups), schema, strict, seed, test_fraction, cutoff, tuple(stamps)
    )


@functools.lru_cache(maxsize=256)
def _footer(path: str, stamp: tuple[int, int]) -> pq.FileMetaData:
    """A file's footer, read once per version of the file and process (a reader opens
    the file again for each of its row groups)."""
    with opened_parquet(path) as table:
        return table.metadata


GAP_BYTES = 1 << 20  # column chunks this close read as one range


def group_spans(files: ParquetGroups, block: int) -> list[Span]:
    """The byte ranges of row group `block`'s column chunks of the declared columns (chunks
    less than GAP_BYTES apart as one range)."""
    file_index, group, _ = files.where(block)
    path, stamp = files.paths[file_index], files.stamps[file_index]
    meta = _footer(path, stamp).row_group(group)
    wanted = set(files.schema.columns)
    chunks = []
    for c in range(meta.num_columns):
        column = meta.column(c)
        if column.path_in_schema.split(".")[0] in wanted:
            first = column.data_page_offset
            if column.has_dictionary_page and column.dictionary_page_offset:
                first = min(first, column.dictionary_page_offset)
            chunks.append((first, first + column.total_compressed_size))
    spans: list[Span] = []
    for start, stop in sorted(chunks):
        if spans and start - spans[-1].stop <= GAP_BYTES:
            last = spans.pop()
            start, stop = last.start, max(stop, last.stop)
        spans.append(Span(path, stamp[0], start, min(stop, stamp[0])))
    return spans


def _records(
    files: ParquetGroups, file_index: int, group: int, ahead: Ahead
) -> Iterator[pa.RecordBatch]:
    path, schema = files.paths[file_index], files.schema
    footer = _footer(path, files.stamps[file_index])
    with opened_parquet(path, footer, ahead.get(path)) as table:
        missing = [c for c in schema.columns if c not in table.schema_arrow.names]
        if missing:
            raise DataError(
                f"declared columns not found: {missing}", source=shown(path), field=missing[0]
            )
        yield from table.iter_batches(PARQUET_READ_ROWS, [group], list(schema.columns))


def parse_group(
    files: ParquetGroups,
    block: int,
    skips: LineSkips,
    held_only: bool = False,
    ahead: Ahead | None = None,
) -> ParsedLines:
    """The good examples of row group `block` and the row (from 1, in its file) of each: a
    record batch at a time, columnar where its values allow, else row by row;
    `held_only`: of the rows the coin holds out only (the rest not parsed)."""
    file_index, group, before = files.where(block)
    batches, kept = [], []
    first = before  # rows of the file before the record batch
    for record_batch in _records(files, file_index, group, ahead or {}):
        count = record_batch.num_rows
        rows = np.arange(first + 1, first + count + 1, dtype=np.int64)
        if held_only:
            held = held_lines(
                files.seed, file_index, first, first + count, files.test_fraction, files.cutoff
            )
            record_batch, rows = record_batch.filter(pa.array(held)), rows[held]
        first += count
        if record_batch.num_rows:
            parsed = _parsed(files, file_index, record_batch, rows, skips)
            if parsed.batch is not None:
                batches.append(parsed.batch)
                kept.append(parsed.lines)
    batch = concat(batches) if batches else None
    return ParsedLines(batch, np.concatenate(kept) if kept else np.zeros(0, dtype=np.int64))


def _parsed(
    files: ParquetGroups,
    file_index: int,
    record_batch: pa.RecordBatch,
    rows: np.ndarray,
    skips: LineSkips,
) -> ParsedLines:
    """One record batch's good examples (its rows numbered `rows`) and their rows."""
    schema, source = files.schema, shown(files.paths[file_index])
    batch = columnar_batch(record_batch, schema)
    if batch is None:
        records = rows_from_columns(record_batch.to_pydict(), schema, source=source)
        numbered = zip(rows.tolist(), records, strict=True)
        done = len(skips.lines)
        parser = TabularRowParser(schema)
        good = good_examples(numbered, parser, source=source, strict=files.strict, skips=skips)
        batch = collated(good)
        rows = rows[~np.isin(rows, np.array(skips.lines[done:], dtype=np.int64))]
    if batch is None or not batch.batch_size:
        return ParsedLines(None, np.zeros(0, dtype=np.int64))
    assert batch.batch_size == rows.size, (source, batch.batch_size, rows.size)
    return ParsedLines(batch, rows)


class GroupShare(ReaderShare):
    """A reader's share of Parquet row groups: `ReaderShare` with a block read as one row
    group."""

    def _reads_ahead(self) -> bool:
        files = self.files
        assert isinstance(files, ParquetGroups)
        return any(is_url(path) for path in files.paths)

    def _spans(self, block: int) -> list[Span]:
        files = self.files
        assert isinstance(files, ParquetGroups)
        return group_spans(files, block)

    def _parsed(self, block: int, counted: bool, ahead: Ahead) -> Batch | None:
        files = self.files
        assert isinstance(files, ParquetGroups)
        skips = LineSkips()
        parsed = parse_group(files, block, skips, ahead=ahead)
        return self._kept(parsed, files.where(block)[0], skips, counted)


def held_rows(files: ParquetGroups) -> Batch | None:
    """The examples of the rows the coin holds out, in (file, row) order: the row groups up
    to the cutoff read, only their held rows parsed (their skips are counted by the readers
    whose row groups hold them)."""
    parts: list[Batch] = []
    for block in range(files.blocks):
        file_index, group, before = files.where(block)
        rows = files.groups[file_index][group]
        if files.test_fraction and files.cutoff.open_lines(file_index, before, before + rows):
            parsed = parse_group(files, block, LineSkips(), held_only=True)
            if parsed.batch is not None:
                parts.append(parsed.batch)
    return concat(parts) if parts else None
