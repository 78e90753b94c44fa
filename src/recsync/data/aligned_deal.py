"""Readers' shares dealt by whole blocks of the stream, whatever was handed out before
(pure arithmetic; docs/design-file-shares.md, "aligned deal").

`data/shares.py: Deal` numbers what is left after a position afresh and deals *that* in
blocks, so after a cut inside a block the blocks it deals straddle the stream's blocks.
Where a stream block costs a parse of its own (a block of L raw lines of a file: its
examples fill the first of its L *slots*), a straddling deal has two readers parse one
block. `AlignedDeal` deals the stream's own blocks instead: block k (units [kL, (k+1)L))
goes to reader k mod R, and a reader's share is what is left of its blocks after `base`,
in order. Each block is then read by one reader per run; a reader's position is still
one number (units of its share consumed), and `position_after` gives the stream's
`StreamPosition` from every reader's, so a job resumes onto any number of readers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from recsync.data.shares import Range, StreamPosition, merged


def left_pieces(base: StreamPosition, start: int, stop: int) -> list[Range]:
    """The pieces of [start, stop) that `base` does not hold handed out."""
    pieces: list[Range] = []
    at = start
    for begin, end in ((0, base.prefix), *base.beyond):
        if at >= stop:
            break
        if at < begin:
            pieces.append((at, min(stop, begin)))
        at = max(at, end)
    if at < stop:
        pieces.append((at, stop))
    return pieces


@dataclass(frozen=True)
class AlignedDeal:
    """What is left after `base`: block k of `block` units goes to reader k mod
    `num_readers`; a reader hands out the units left in its blocks, in order."""

    num_readers: int
    block: int
    base: StreamPosition = field(default_factory=StreamPosition)

    def __post_init__(self) -> None:
        if self.num_readers < 1:
            raise ValueError(f"cluster.num_readers must be >= 1, got {self.num_readers}")
        assert self.block >= 1

    def _first_block(self, reader: int, at: int) -> int:
        """The reader's first block that ends after unit `at`."""
        low = at // self.block
        return low + (reader - low) % self.num_readers

    @property
    def _settled(self) -> int:
        """From this unit on nothing was handed out before (every block there is whole)."""
        return self.base.beyond[-1][1] if self.base.beyond else self.base.prefix

    def owned(self, reader: int, start: int, stop: int) -> list[Range]:
        """The pieces of [start, stop) the reader hands out, in order (touching ones
        joined)."""
        pieces: list[Range] = []
        size = self.block
        k = self._first_block(reader, start)
        while k * size < stop:
            low, high = max(start, k * size), min(stop, (k + 1) * size)
            pieces.extend(left_pieces(self.base, low, high))
            k += self.num_readers
        return merged(pieces)

    def handed(self, reader: int, count: int) -> list[Range]:
        """The stream's units a reader that consumed `count` units of its share consumed."""
        ranges: list[Range] = []
        size, need = self.block, count
        k = self._first_block(reader, self.base.prefix)
        while need > 0 and k * size < self._settled:
            for low, high in left_pieces(self.base, k * size, (k + 1) * size):
                take = min(need, high - low)
                ranges.append((low, low + take))
                need -= take
                if need == 0:
                    break
            k += self.num_readers
        full, rest = divmod(need, size)
        for j in range(full):  # whole blocks from here on
            start = (k + j * self.num_readers) * size
            ranges.append((start, start + size))
        if rest:
            start = (k + full * self.num_readers) * size
            ranges.append((start, start + rest))
        return ranges

    def position_after(self, counts: Sequence[int]) -> StreamPosition:
        """The stream's position once reader r consumed `counts[r]` units of its share."""
        assert len(counts) == self.num_readers
        handed = [r for reader, n in enumerate(counts) for r in self.handed(reader, n)]
        every = merged([*handed, *self.base.beyond, (0, self.base.prefix)])
        if not every or every[0][0] > 0:
            return StreamPosition(0, tuple(every))
        return StreamPosition(every[0][1], tuple(every[1:]))

    def sequence(self, reader: int, examples: int, batch_size: int) -> int:
        """The number of the batch a reader hands out after `examples` of its share, where
        a step does not split evenly among the readers (GBA's token): its own batches
        interleaved, reader r's b-th batch numbered b * R + r (a block's example count is
        known only once parsed, so the stream's order of batches is not)."""
        return (examples // batch_size) * self.num_readers + reader

    def limit_share(self, reader: int, limit: int) -> int:
        """Of a job-wide `limit` of examples, reader `reader`'s quota: the limit split
        evenly (exactly `limit` in all while every share holds its quota; not the stream's
        first `limit` examples, which only parsing every block before them would tell)."""
        share, rest = divmod(limit, self.num_readers)
        return share + (1 if reader < rest else 0)
