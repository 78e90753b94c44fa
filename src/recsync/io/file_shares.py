"""One reader's share of plain text data files, parsing only its own line blocks, its
position in slots (docs/design-file-shares.md): the pieces put together, over every epoch.

The files' lines, end to end, are cut into B line blocks of L lines; one pass is S = B L
slots, and epoch e is slots e S + [0, S). The p-th block of epoch e, slots
e S + [pL, (p+1)L), is global block k = e B + p; it holds line block
`block_order(seed, e, B)[p]` (data/epoch_order.py: in order in epoch 0, shuffled in later
ones), whose examples (good lines the coin does not hold out; in line order in epoch 0, in
`example_order` in later ones) fill its first slots. `ReaderShare` walks the pieces
`Deal` gives its reader over all the epochs' slots (global block k is reader
k mod R's), parses each piece's line block (`parse_share_piece`, only the block's lines),
holds out the coin's lines (`split_held`; epoch 0's are kept in `held`: the same lines
every epoch), and yields batches of `batch_size` with the slots of its share consumed after
each: the position `Deal.position_after` takes. Skips are counted in epoch 0 only
(a later pass meets the same lines).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import torch

from recsync.data.batch import Batch, concat
from recsync.data.epoch_order import block_order, example_order
from recsync.data.line_coin import HeldCutoff
from recsync.data.shares import Deal
from recsync.data.skips import LineSkips, ShareSkips
from recsync.io.line_blocks import LineIndex, file_pieces
from recsync.io.line_examples import ParsedLines, TextSchema, parse_share_piece, split_held
from recsync.io.read_ahead import Ahead, ReadAhead, Span


class BlockFiles(Protocol):
    """Files dealt in blocks of slots (`ReaderShare` reads them): text files by line
    block, or Parquet files by row group (a subclass reads those)."""

    @property
    def block_lines(self) -> int: ...

    @property
    def blocks(self) -> int: ...

    @property
    def slots(self) -> int: ...

    @property
    def seed(self) -> int: ...

    @property
    def test_fraction(self) -> float: ...

    @property
    def cutoff(self) -> HeldCutoff: ...


@dataclass(frozen=True)
class TextFiles:
    """A job's text files (their line indexes, one block size), how to parse them, and
    the held-out coin."""

    indexes: tuple[LineIndex, ...]
    schema: TextSchema
    strict: bool
    seed: int
    test_fraction: float
    cutoff: HeldCutoff

    def __post_init__(self) -> None:
        sizes = {index.block_lines for index in self.indexes}
        assert len(sizes) == 1, f"line indexes of several block sizes: {sizes}"

    @property
    def block_lines(self) -> int:
        return self.indexes[0].block_lines

    @property
    def line_counts(self) -> list[int]:
        return [index.num_lines for index in self.indexes]

    @property
    def blocks(self) -> int:
        """Line blocks of one pass: the files' lines end to end, L a block (the last may be
        short)."""
        return -(-sum(self.line_counts) // self.block_lines)

    @property
    def slots(self) -> int:
        """Slots of one pass: L a line block."""
        return self.blocks * self.block_lines

    @property
    def unit(self) -> str:
        """What positions over these files count (a checkpoint's `data_unit`)."""
        return f"slots/{self.block_lines}"

    def share(
        self, deal: Deal, reader: int, batch_size: int, epochs: int, shuffled: bool
    ) -> ReaderShare:
        return ReaderShare(self, deal, reader, batch_size, epochs, shuffled)


class ReaderShare:
    """Reader `reader`'s share of `epochs` passes over `files` under `deal` (see the
    module); `shuffled` False: later epochs in order, as the first (`shuffle_buffer` 0)."""

    def __init__(
        self,
        files: BlockFiles,
        deal: Deal,
        reader: int,
        batch_size: int,
        epochs: int = 1,
        shuffled: bool = True,
    ):
        assert deal.block == files.block_lines
        if epochs < 1:
            raise ValueError(f"epochs must be >= 1, got {epochs}")
        self.files, self.deal, self.reader, self.batch_size = files, deal, reader, batch_size
        self.epochs, self.shuffled = epochs, shuffled
        self.skips = ShareSkips()  # of the blocks it parsed in epoch 0
        self.held: list[Batch] = []  # the held-out rows of the blocks it parsed in epoch 0
        self._last: tuple[int, Batch | None] | None = None  # the global block parsed last
        self._order: tuple[int, np.ndarray] | None = None  # an epoch's block order

    @property
    def share_slots(self) -> int:
        """The slots of its share: its count once it handed out all of it."""
        return sum(stop - start for start, stop in self._pieces())

    def _pieces(self) -> list[tuple[int, int]]:
        owned = self.deal.owned(self.reader, 0, self.epochs * self.files.slots)
        return list(_in_blocks(owned, self.files.block_lines))

    def line_block(self, block: int) -> tuple[int, int]:
        """(epoch, line block) of global block `block` (slots [kL, (k+1)L))."""
        epoch, place = divmod(block, self.files.blocks)
        if epoch == 0 or not self.shuffled:
            return epoch, place
        if self._order is None or self._order[0] != epoch:
            self._order = epoch, block_order(self.files.seed, epoch, self.files.blocks)
        return epoch, int(self._order[1][place])

    def _block_examples(self, block: int, ahead: Callable[[], Ahead] = dict) -> Batch | None:
        """The training examples of global block `block` in its epoch's order (parsed once
        for pieces of one block in a row: after a resume a share may hold two of a block);
        `ahead`: its remote bytes, read ahead."""
        if self._last is not None and self._last[0] == block:
            return self._last[1]
        epoch, lines = self.line_block(block)
        examples = self._parsed(lines, counted=epoch == 0, ahead=ahead())
        if examples is not None and epoch and self.shuffled:
            order = example_order(self.files.seed, epoch, lines, examples.batch_size)
            examples = examples.take(torch.from_numpy(order))
        self._last = block, examples
        return examples

    def _spans(self, block: int) -> Sequence[Span]:
        """The remote byte ranges line block `block` reads, read ahead of its parse (a
        subclass's; local files: none)."""
        return ()

    def _reads_ahead(self) -> bool:
        """Its blocks are remote: read ahead (io/read_ahead.py)."""
        return False

    _by_position = False  # its lines are numbered by their first byte + 1 (byte blocks)

    def _parsed(self, block: int, counted: bool, ahead: Ahead) -> Batch | None:
        """The training examples of line block `block`, in line order; `counted`: its skips
        and held-out rows kept (epoch 0); `ahead`: its remote files' bytes read ahead."""
        files, size = self.files, self.files.block_lines
        assert isinstance(files, TextFiles), "a subclass parses other files' blocks"
        skips = self.skips if counted else ShareSkips()
        parts = []
        for piece in file_pieces(files.line_counts, block * size, (block + 1) * size):
            index, where = files.indexes[piece.file_index], piece.file_index
            parsed = parse_share_piece(
                index,
                where,
                files.schema,
                piece.start,
                piece.stop,
                strict=files.strict,
                skips=skips,
            )
            train, held = split_held(parsed, files.seed, where, files.test_fraction, files.cutoff)
            if held is not None and counted:
                self.held.append(held)
            if train is not None:
                parts.append(train)
        return concat(parts) if parts else None

    def _kept(
        self, parsed: ParsedLines, file_index: int, skips: LineSkips, counted: bool
    ) -> Batch | None:
        """The training examples of a block parsed whole (a subclass's block: a row group,
        a byte range); `counted`: its skips and held-out rows kept (epoch 0)."""
        files = self.files
        if counted:
            self.skips.fold(skips, file_index)
        train, held = split_held(
            parsed, files.seed, file_index, files.test_fraction, files.cutoff, self._by_position
        )
        if held is not None and counted:
            self.held.append(held)
        return train

    def _examples(self) -> Iterator[tuple[Batch, np.ndarray]]:
        """Pieces of examples in share order, each with the slots consumed after each."""
        size, count = self.files.block_lines, 0
        pieces = self._pieces()
        order: list[int] = []  # the global blocks in the order they are parsed
        for start, _ in pieces:
            if not order or order[-1] != start // size:
                order.append(start // size)
        reads = None
        if self._reads_ahead():
            reads = ReadAhead(order, lambda block: self._spans(self.line_block(block)[1]))
        try:
            parsed, current = -1, -1  # order[parsed] is `current`, the block parsed last
            for start, stop in pieces:
                block = start // size
                if block != current:
                    parsed, current = parsed + 1, block
                ahead = functools.partial(reads.take, parsed) if reads else dict
                examples = self._block_examples(block, ahead)
                made = 0 if examples is None else examples.batch_size
                first, last = start - block * size, min(stop - block * size, made)
                if examples is not None and first < last:
                    after = count + np.arange(1, last - first + 1)
                    after[-1] = count + (stop - start)  # its piece's empty slots with its last
                    yield examples.slice(first, last), after
                count += stop - start
        finally:
            if reads is not None:
                reads.close()

    def batches(self) -> Iterator[tuple[Batch, int]]:
        """Batches of `batch_size` (the last may be smaller), each with the slots of the
        share consumed once it is handed out."""
        size = self.batch_size
        pending: list[Batch] = []
        marks: list[np.ndarray] = []
        held = 0
        for examples, after in self._examples():
            pending.append(examples)
            marks.append(after)
            held += examples.batch_size
            if held < size:
                continue
            # joined once, then cut: a row group of 65,536 examples is not copied per batch
            whole = pending[0] if len(pending) == 1 else concat(pending)
            counts = marks[0] if len(marks) == 1 else np.concatenate(marks)
            start = 0
            while held - start >= size:
                yield whole.slice(start, start + size), int(counts[start + size - 1])
                start += size
            pending = [whole.slice(start, held)] if start < held else []
            marks = [counts[start:]] if start < held else []
            held -= start
        if held:
            yield concat(pending), int(np.concatenate(marks)[-1])


def _in_blocks(ranges: Sequence[tuple[int, int]], size: int) -> Iterator[tuple[int, int]]:
    """The ranges cut at the blocks' boundaries (each piece in one block)."""
    for start, stop in ranges:
        while start < stop:
            end = min(stop, (start // size + 1) * size)
            yield start, end
            start = end
