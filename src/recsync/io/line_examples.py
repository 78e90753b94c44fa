"""The examples of a range of lines of a text data file, parsed by the bulk parsers
(criteo_blocks.py, libsvm_blocks.py; CSV lines under their file's header), with the line
each example came from, the held-out split of the per-line coin (data/line_coin.py) and
the skips it found (docs/design-file-shares.md). `parse_numbered` parses numbered lines
however they were read: a line block, a byte block (byte_blocks.py), a piece of a gzip
file (gzip_shares.py).

The bulk parsers return batches, not lines; the line of every example is found without
changing them: every line they do not turn into an example they reject through the skip
report (lenient mode: "a good line is never dropped", data/skips.py), so `LineSkips`,
a `SkipReport` that also notes the lines it counts, leaves the good lines in order.

`ShareSkips` is a reader's skip report over the pieces it parses: counts by reason, and
each reason's first occurrence in (file, line) order, so that the reports of several readers
merge (`merged`) into the report one reader of the whole stream would have made.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from recsync.data.batch import Batch, concat
from recsync.data.line_coin import HeldCutoff, held_at, held_lines
from recsync.data.skips import LineSkips, ShareSkips
from recsync.errors import DataError
from recsync.io.formats.criteo.blocks import BLOCK_LINES as CRITEO_BLOCK_LINES
from recsync.io.formats.criteo.rows import CriteoSchema
from recsync.io.formats.libsvm.blocks import BLOCK_LINES as LIBSVM_BLOCK_LINES
from recsync.io.formats.libsvm.rows import LibFFMSchema, LibSVMSchema
from recsync.io.formats.tabular.rows import TabularSchema
from recsync.io.line_blocks import LineIndex, read_lines

TextSchema = CriteoSchema | LibSVMSchema | LibFFMSchema
PIECE_LINES = min(CRITEO_BLOCK_LINES, LIBSVM_BLOCK_LINES)  # lines a parser call takes at most


@dataclass(frozen=True)
class ParsedLines:
    """The good examples of a range of lines (`batch`, None: none) and the line number
    (from 1) of each (`lines`, int64, in order)."""

    batch: Batch | None
    lines: np.ndarray


def parse_lines(
    index: LineIndex,
    schema: TextSchema,
    start: int,
    stop: int,
    *,
    strict: bool,
    skips: LineSkips,
) -> ParsedLines:
    """The examples of lines [start, stop) (from 0) of the indexed file, parsed in bulk,
    PIECE_LINES lines a parser call; the lines it skipped are counted in `skips`."""
    numbered = list(read_lines(index, start, stop))
    source = str(index.path)
    return parse_numbered(numbered, schema, None, source=source, strict=strict, skips=skips)


def parse_share_piece(
    index: LineIndex,
    file_index: int,
    schema: TextSchema,
    start: int,
    stop: int,
    *,
    strict: bool,
    skips: ShareSkips,
) -> ParsedLines:
    """`parse_lines` of lines [start, stop) of file `file_index`, its skips folded into a
    reader's report."""
    piece_skips = LineSkips()
    parsed = parse_lines(index, schema, start, stop, strict=strict, skips=piece_skips)
    skips.fold(piece_skips, file_index)
    return parsed


def split_held(
    parsed: ParsedLines,
    seed: int,
    file_index: int,
    fraction: float,
    cutoff: HeldCutoff,
    by_position: bool = False,
) -> tuple[Batch | None, Batch | None]:
    """(training examples, held-out examples) of parsed lines of file `file_index`: an
    example is held when the coin holds its line (data/line_coin.py; `by_position`: the
    lines are numbered by their first byte + 1, the coin keyed by it, `held_at`)."""
    batch, lines = parsed.batch, parsed.lines
    if batch is None or fraction == 0.0:
        return batch, None
    if by_position:
        held = held_at(seed, file_index, lines - 1, fraction, cutoff)
    else:
        first, last = int(lines[0]) - 1, int(lines[-1])
        held = held_lines(seed, file_index, first, last, fraction, cutoff)[lines - 1 - first]
    if not held.any():  # past the cutoff: nothing held
        return batch, None
    mask = torch.from_numpy(held)
    train, out = batch.select(~mask), batch.select(mask)
    return (train if train.batch_size else None), (out if out.batch_size else None)


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
    from recsync.io.formats.criteo.blocks import criteo_blocks
    from recsync.io.formats.libsvm.blocks import libsvm_blocks

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
