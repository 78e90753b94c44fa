"""The good examples of numbered lines of a text file (Criteo TSV, libSVM, libffm, or CSV
under its header), parsed a piece of at most PIECE_LINES lines at a time, each kept with
its line's number: what a reader that reads a file by ranges of its lines parses (byte
blocks of a file on object storage, io/byte_blocks.py; a gzip file read whole,
io/gzip_shares.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from recsync.data.batch import Batch, concat
from recsync.data.criteo import CriteoSchema
from recsync.data.skips import LineSkips
from recsync.data.tabular import TabularSchema
from recsync.errors import DataError
from recsync.io.line_examples import PIECE_LINES, ParsedLines, TextSchema

Numbered = list[tuple[int, str]]  # (line number, line with its "\n")


def parse_numbered(
    numbered: Numbered,
    schema: TextSchema | TabularSchema,
    header: bytes | None,
    *,
    source: str,
    strict: bool,
    skips: LineSkips,
    name_line: Callable[[int], str] = "line {:,}".format,
) -> ParsedLines:
    """The good examples of `numbered` lines and the number of each (the rejected ones
    counted in `skips`, or raised in strict mode); `header`: a CSV file's header line.
    `name_line`: how a refusal names a line by its number."""
    from recsync.io.criteo_blocks import criteo_blocks
    from recsync.io.libsvm_blocks import libsvm_blocks

    batches, kept = [], []
    for low in range(0, len(numbered), PIECE_LINES):
        piece = numbered[low : low + PIECE_LINES]
        before = len(skips.lines)
        where: dict[str, Any] = {"source": source, "strict": strict, "skips": skips}
        if isinstance(schema, TabularSchema):
            assert header is not None, source
            parts = _csv_piece(piece, header, schema, where, name_line)
        elif isinstance(schema, CriteoSchema):
            parts = list(criteo_blocks(piece, schema, **where))
        else:
            parts = list(libsvm_blocks(piece, schema, **where))
        rejected = np.array(skips.lines[before:], dtype=np.int64)
        numbers = np.array([n for n, _ in piece], dtype=np.int64)
        good = numbers[~np.isin(numbers, rejected)]
        assert sum(p.batch_size for p in parts) == good.size, (source, low)
        batches.extend(parts)
        kept.append(good)
    batch = concat(batches) if batches else None
    return ParsedLines(batch, np.concatenate(kept) if kept else np.zeros(0, dtype=np.int64))


def _csv_piece(
    piece: Numbered,
    header: bytes,
    schema: TabularSchema,
    where: dict[str, Any],
    name_line: Callable[[int], str],
) -> list[Batch]:
    """The good examples of CSV lines, read under the file's header; a quoted value that
    spans lines is refused (a line with an odd number of quotes)."""
    import pyarrow as pa

    from recsync.io.readers import csv_stream_blocks

    for number, line in piece:
        if line.count('"') % 2:
            raise DataError(
                f"the {name_line(number)} opens a quoted value it does not close: this CSV file is "
                "read by ranges of its lines (object storage), and a value spanning lines "
                "cannot be; write the file without line breaks in values, or as Parquet",
                source=where["source"],
            )
    text = header + "".join(line for _, line in piece).encode()
    stream = pa.BufferReader(pa.py_buffer(text))
    numbers = [number for number, _ in piece]
    return list(csv_stream_blocks(stream, schema, numbers=numbers, **where))
