"""How several reader nodes share one training stream, exactly once (pure arithmetic;
docs/design-file-shares.md).

The stream is the one a single reader hands out (every epoch, the held-out rows left out),
its units numbered 0, 1, 2, ... from the job's first start: examples (the synthetic task),
or slots under file shares (a block of L raw lines, rows or bytes, whose examples fill its
first slots: io/file_shares.py). It is cut into blocks of `block` units; block k goes to
reader k mod R, and each reader hands out what is left of its blocks in order, so its
position is one number: the units of its share it consumed. A job resumed from a
checkpoint reads what is *left*: everything but the units the checkpoint's
`StreamPosition` says were handed out (a prefix, and ranges beyond it that some readers
had reached and others had not). From every reader's position, `Deal.position_after`
gives the stream's position again, whatever the number of readers was; a job resumes
from it onto any number of readers. Each block is read by one reader per run.

With one reader the share is the whole stream and the position is the prefix.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from recsync.data.batch import Batch, rebatch

Range = tuple[int, int]  # [start, stop) of the stream's examples
Select = Callable[[int, int], list[Range]]  # the pieces of [start, stop) a reader hands out

BLOCK_EXAMPLES = 4096  # a share's block: whole batches, about one synthetic chunk


def block_for(batch_size: int) -> int:
    """The block of a job of `batch_size`: the fewest whole batches of BLOCK_EXAMPLES."""
    return batch_size * max(1, math.ceil(BLOCK_EXAMPLES / batch_size))


@dataclass(frozen=True)
class StreamPosition:
    """The examples handed out: all before `prefix`, and the ranges `beyond` (sorted,
    disjoint, each after `prefix` and after one another with a gap)."""

    prefix: int = 0
    beyond: tuple[Range, ...] = ()

    def __post_init__(self) -> None:
        last = self.prefix
        for start, stop in self.beyond:
            assert last < start < stop, f"position ranges out of order: {self}"
            last = stop

    @property
    def handed(self) -> int:
        """Examples handed out in all."""
        return self.prefix + sum(stop - start for start, stop in self.beyond)

    def left_to_stream(self, index: int) -> int:
        """The stream's number of the `index`-th example left (counting from 0)."""
        at = self.prefix + index
        for start, stop in self.beyond:
            if at < start:
                break
            at += stop - start
        return at

    def left_ranges(self, start: int, stop: int) -> Iterator[Range]:
        """The stream's ranges holding the examples left numbered [start, stop)."""
        while start < stop:
            first = self.left_to_stream(start)
            take = self._room_after(first, stop - start)
            yield first, first + take
            start += take

    def _room_after(self, at: int, most: int) -> int:
        """How many examples left follow `at` (itself one) before the next range handed
        (at most `most`)."""
        for begin, _ in self.beyond:
            if begin > at:
                return min(most, begin - at)
        return most


def merged(ranges: Sequence[Range]) -> list[Range]:
    """The union of `ranges`, sorted, touching ones joined."""
    out: list[Range] = []
    for start, stop in sorted(r for r in ranges if r[0] < r[1]):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], stop))
        else:
            out.append((start, stop))
    return out


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
class Deal:
    """What is left after `base`: block k of `block` units goes to reader k mod
    `num_readers`; a reader hands out the units left in its blocks, in order. `examples`:
    every unit is an example (the synthetic stream), so the stream's order of batches and
    its first examples are known without reading; False: units are slots of file blocks,
    only the first of them filled (io/file_shares.py)."""

    num_readers: int
    block: int
    base: StreamPosition = field(default_factory=StreamPosition)
    examples: bool = True

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
        a step does not split evenly among the readers (GBA's token): of units that are
        examples, its place among the batches left in the stream's order; of slots (a
        block's example count is known only once parsed), its own batches interleaved,
        reader r's b-th batch numbered b * R + r."""
        if not self.examples:
            return (examples // batch_size) * self.num_readers + reader
        unit = self.handed(reader, examples + 1)[-1][1] - 1
        return (unit - self._handed_before(unit)) // batch_size

    def limit_share(self, reader: int, limit: int) -> int:
        """Of a job-wide `limit` of examples, reader `reader`'s quota: of units that are
        examples, how many of the first `limit` left are its; of slots, the limit split
        evenly (exactly `limit` in all while every share holds its quota; the stream's
        first `limit` examples only parsing every block before them would tell)."""
        if not self.examples:
            share, rest = divmod(limit, self.num_readers)
            return share + (1 if reader < rest else 0)
        mine, need, k = 0, limit, 0
        while need > 0:
            for low, high in left_pieces(self.base, k * self.block, (k + 1) * self.block):
                take = min(need, high - low)
                need -= take
                mine += take if k % self.num_readers == reader else 0
                if need == 0:
                    break
            k += 1
        return mine

    def _handed_before(self, unit: int) -> int:
        """The units before `unit` that `base` holds handed out."""
        ranges = ((0, self.base.prefix), *self.base.beyond)
        return sum(max(0, min(stop, unit) - start) for start, stop in ranges)


def readers_for(hogwild_threads: int, num_trainers: int, workers_per_reader: int) -> int:
    """The default number of readers: one per `workers_per_reader` worker threads (at least
    one, at most one a trainer: a trainer takes its batches from one reader)."""
    return max(1, min(num_trainers, math.ceil(hogwild_threads / workers_per_reader)))


def selected(
    batches: Iterable[Batch], start: int, select: Select, batch_size: int
) -> Iterator[Batch]:
    """The examples `select` picks of a stream whose first example is the stream's
    `start`-th, cut into batches of `batch_size` (the last may be smaller)."""

    def pieces() -> Iterator[Batch]:
        at = start
        for batch in batches:
            size = batch.batch_size
            for begin, end in select(at, at + size):
                yield batch if end - begin == size else batch.slice(begin - at, end - at)
            at += size

    return rebatch(pieces(), batch_size)
