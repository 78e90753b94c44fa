"""The examples of a range of lines of a text data file, parsed by the bulk parsers
(criteo_blocks.py, libsvm_blocks.py), with the line each example came from, the held-out
split of the per-line coin (data/line_coin.py) and the skips it found (docs/design-file-shares.md).

The bulk parsers return batches, not lines; the line of every example is found without
changing them: every line they do not turn into an example they reject through the skip
report (lenient mode: "a good line is never dropped", data/skips.py), so `LineSkips`,
a `SkipReport` that also notes the lines it counts, leaves the good lines in order.

`ShareSkips` is a reader's skip report over the pieces it parses: counts by reason, and
each reason's first occurrence in (file, line) order, so that the reports of several readers
merge (`merged`) into the report one reader of the whole stream would have made.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from recsync.data.batch import Batch, concat
from recsync.data.criteo import CriteoSchema
from recsync.data.libsvm import LibFFMSchema, LibSVMSchema
from recsync.data.line_coin import HeldCutoff, held_at, held_lines
from recsync.data.skips import LineSkips, ShareSkips
from recsync.io.criteo_blocks import BLOCK_LINES as CRITEO_BLOCK_LINES
from recsync.io.criteo_blocks import criteo_blocks
from recsync.io.libsvm_blocks import BLOCK_LINES as LIBSVM_BLOCK_LINES
from recsync.io.libsvm_blocks import libsvm_blocks
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
    batches, kept = [], []
    source = str(index.path)
    for low in range(start, stop, PIECE_LINES):
        high = min(stop, low + PIECE_LINES)
        numbered = list(read_lines(index, low, high))
        before = len(skips.lines)
        if isinstance(schema, CriteoSchema):
            parts = list(criteo_blocks(numbered, schema, source=source, strict=strict, skips=skips))
        else:
            parts = list(libsvm_blocks(numbered, schema, source=source, strict=strict, skips=skips))
        rejected = np.array(skips.lines[before:], dtype=np.int64)
        numbers = np.arange(low + 1, high + 1, dtype=np.int64)
        good = numbers[~np.isin(numbers, rejected)]
        made = sum(part.batch_size for part in parts)
        assert made == good.size, f"{made} examples from {good.size} good lines of {source}"
        batches.extend(parts)
        kept.append(good)
    batch = concat(batches) if batches else None
    return ParsedLines(batch, np.concatenate(kept) if kept else np.zeros(0, dtype=np.int64))


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
    mask = torch.from_numpy(held)
    train, out = batch.select(~mask), batch.select(mask)
    return (train if train.batch_size else None), (out if out.batch_size else None)
