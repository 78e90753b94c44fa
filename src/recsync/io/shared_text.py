"""A reader's training source over files, shared among readers by blocks: text files by
line blocks (io/file_shares.py: `ReaderShare`), Parquet files by row group
(io/parquet_groups.py: `GroupShare`), CSV files and text files on object storage by byte
ranges (io/byte_blocks.py), gzip files a whole file each (io/gzip_shares.py). It parses
only the blocks of its share and its position counts slots (docs/design-file-shares.md),
so several readers divide the parsing; one reader (a job's only one, the reference run,
the planner's sample) reads the same stream whole.

Every file job reads through it, in any number of epochs (later ones shuffled by block
and within blocks, data/epoch_order.py), fresh or resumed from a checkpoint that counts
slots (io/data_plan.py: `plan_data`). The held-out rows are the lines (rows) the
per-line coin holds (data/line_coin.py): the same whatever the number of readers; reader
0 reads them up front (`held_set`), and every reader leaves them out of its blocks (every
epoch).

With `background`, its share is parsed in a process of its own (io/background.py); the
producer sends before each batch the slots consumed once it is handed out (`SlotMark`),
and its skip report whenever it changed.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from recsync.data.batch import Batch, concat
from recsync.data.line_coin import held_lines
from recsync.data.shares import Deal
from recsync.data.skips import LineSkips, ShareSkips, SkipReport
from recsync.io.background import BackgroundBatches
from recsync.io.formats.criteo.rows import CriteoSchema
from recsync.io.formats.libsvm.rows import LibFFMSchema, LibSVMSchema
from recsync.io.sources import FileData, prepared, read_test_files
from recsync.optim.train_spec import TrainSpec

if TYPE_CHECKING:  # the parsers import numba, the readers pyarrow: only where files are read
    from recsync.io.byte_blocks import ByteBlocks
    from recsync.io.file_shares import ReaderShare, TextFiles
    from recsync.io.gzip_shares import GzipFiles
    from recsync.io.parquet_groups import ParquetGroups

    SharedFiles = TextFiles | ParquetGroups | ByteBlocks | GzipFiles


@dataclass(frozen=True)
class SlotMark:
    """The slots of a reader's share consumed once the batch after it is handed out."""

    slots: int


class SharedTextData:
    """Reader `reader`'s share of text files under `deal` (see the module): batches of
    `train.batch_size`, the slots consumed (`position_after`), its skips, and (reader 0)
    the held-out set."""

    total_examples: int | None = None  # not known before the files are parsed
    teacher_auc: float | None = None
    start_example = 0

    def __init__(
        self,
        files: FileData,
        lines: SharedFiles,
        train: TrainSpec,
        deal: Deal,
        reader: int,
        background: bool = False,
    ):
        self.files, self.lines, self.train = files, lines, train
        self.deal, self.reader, self.background = deal, reader, background
        self._skips = ShareSkips()
        self._mark = 0  # slots consumed once the batch taken last is handed out
        self._share_slots = _share(lines, train, deal, reader).share_slots
        self._test: Batch | None = None
        self._test_read = False
        self._test_skips = SkipReport()  # the test files' (read up front)
        if reader == 0:
            self.test_set()

    @property
    def skips(self) -> ShareSkips:
        """The skips of the blocks it parsed (and of the test files it read)."""
        test = self._test_skips
        if not test.total:
            return self._skips
        earlier = ShareSkips(
            dict(test.counts), dict(test.first), dict.fromkeys(test.first, (-1, 0))
        )
        return earlier.merged([self._skips])

    def train_batches(self) -> Iterator[Batch]:
        make = functools.partial(
            _share_stream, self.files, self.lines, self.train, self.deal, self.reader
        )
        if self.background:
            return BackgroundBatches(make, on_side=self._learned)
        return self._inline(make())

    def _inline(self, items: Iterator[Batch | SlotMark | ShareSkips]) -> Iterator[Batch]:
        for item in items:
            if isinstance(item, Batch):
                yield item
            else:
                self._learned(item)

    def _learned(self, item: SlotMark | ShareSkips) -> None:
        if isinstance(item, SlotMark):
            self._mark = item.slots
        else:
            self._skips = item

    def position_after(self, examples: int) -> int:
        """Slots of its share consumed once the batch taken last is handed out."""
        return self._mark

    def position_at_end(self, examples: int) -> int:
        """Slots of its share consumed once all of it was handed out: every slot."""
        return self._share_slots

    def test_set(self) -> Batch | None:
        """The held-out set: test files, or the coin's lines (read by reader 0 only: the
        job's evaluation takes reader 0's)."""
        if self.reader != 0:
            return None
        if not self._test_read:
            self._test_read = True
            if self.files.test_paths:
                test_skips = SkipReport()
                self._test = read_test_files(self.files, test_skips)
                self._test_skips = test_skips
            else:
                self._test = held_set(self.files, self.lines)
        return self._test


def _share_stream(
    files: FileData, lines: SharedFiles, train: TrainSpec, deal: Deal, reader: int
) -> Iterator[Batch | SlotMark | ShareSkips]:
    """A reader's share as batches, each after its `SlotMark` (and the skip report when it
    changed); the last mark is every slot of the share."""
    share = _share(lines, train, deal, reader)
    skipped = 0
    for batch, slots in share.batches():
        share.held.clear()  # reader 0 reads the held set up front
        if share.skips.total != skipped:
            skipped = share.skips.total
            yield _copy(share.skips)
        yield SlotMark(slots)
        yield prepared(batch, files)
    if share.skips.total != skipped:
        yield _copy(share.skips)
    yield SlotMark(share.share_slots)


def _share(lines: SharedFiles, train: TrainSpec, deal: Deal, reader: int) -> ReaderShare:
    """The reader's share over `train.epochs` passes (later ones shuffled by block and
    within blocks unless `train.shuffle_buffer` is 0)."""
    shuffled = train.shuffle_buffer > 0
    return lines.share(deal, reader, train.batch_size, train.epochs, shuffled)


def _copy(skips: ShareSkips) -> ShareSkips:
    return ShareSkips(dict(skips.counts), dict(skips.first), dict(skips.first_at))


def held_set(files: FileData, lines: SharedFiles) -> Batch | None:
    """The examples of the lines (rows) the coin holds out, in (file, line) order: only
    those parsed (their skips are counted by the readers whose blocks hold them)."""
    from recsync.io.byte_blocks import ByteBlocks, held_byte_rows
    from recsync.io.gzip_shares import GzipFiles, held_gzip_rows
    from recsync.io.line_blocks import read_lines
    from recsync.io.line_examples import PIECE_LINES
    from recsync.io.parquet_groups import ParquetGroups, held_rows

    if isinstance(lines, ParquetGroups):
        rows = held_rows(lines)
        return None if rows is None else prepared(rows, files)
    if isinstance(lines, ByteBlocks):
        rows = held_byte_rows(lines)
        return None if rows is None else prepared(rows, files)
    if isinstance(lines, GzipFiles):
        rows = held_gzip_rows(lines)
        return None if rows is None else prepared(rows, files)

    parts: list[Batch] = []
    cutoff = lines.cutoff
    for file_index, index in enumerate(lines.indexes):
        stop = cutoff.open_lines(file_index, 0, index.num_lines)
        for low in range(0, stop, PIECE_LINES):
            high = min(stop, low + PIECE_LINES)
            held = held_lines(lines.seed, file_index, low, high, lines.test_fraction, cutoff)
            if not held.any():
                continue
            numbered = [pair for pair in read_lines(index, low, high) if held[pair[0] - 1 - low]]
            parts.extend(_parsed(numbered, files, str(index.path)))
    if not parts:
        return None
    test = concat(parts)
    return prepared(test, files)


def _parsed(numbered: Sequence[tuple[int, str]], files: FileData, source: str) -> list[Batch]:
    from recsync.io.formats.criteo.blocks import criteo_blocks
    from recsync.io.formats.libsvm.blocks import libsvm_blocks

    skips = LineSkips()  # counted where the lines are trained on
    schema = files.schema
    if isinstance(schema, CriteoSchema):
        made = criteo_blocks(numbered, schema, source=source, strict=files.strict, skips=skips)
    else:
        assert isinstance(schema, LibSVMSchema | LibFFMSchema)
        made = libsvm_blocks(numbered, schema, source=source, strict=files.strict, skips=skips)
    return list(made)
