"""How several reader nodes share one training stream, exactly once (pure arithmetic).

The stream is the one a single reader hands out (every epoch, the held-out rows left out,
cut into batches), its examples numbered 0, 1, 2, ... from the job's first start. A job
resumed from a checkpoint reads what is *left* of it: everything but the examples the
checkpoint's `StreamPosition` says were handed out (a prefix, and ranges beyond it that
some readers had reached and others had not). What is left is numbered again from 0 and
dealt in blocks of `block` examples (whole batches) round robin: block k goes to reader
k mod R. Each reader hands out its blocks in order, so its position is one number: the
examples of its share it handed out. From every reader's position, `position_after` gives
the stream's position again (which examples were handed out), whatever the number of
readers was; a job resumes from it onto any number of readers.

With one reader the share is the whole stream and the position is the prefix: a job of
one reader reads and checkpoints exactly as before readers were shared.
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


@dataclass(frozen=True)
class Deal:
    """What is left after `base`, dealt to `num_readers` readers in blocks of `block`."""

    num_readers: int
    block: int
    base: StreamPosition = field(default_factory=StreamPosition)

    def __post_init__(self) -> None:
        if self.num_readers < 1:
            raise ValueError(f"cluster.num_readers must be >= 1, got {self.num_readers}")
        assert self.block >= 1

    def share_to_left(self, reader: int, index: int) -> int:
        """The number, among the examples left, of reader `reader`'s `index`-th example."""
        k, offset = divmod(index, self.block)
        return (k * self.num_readers + reader) * self.block + offset

    def handed_left(self, reader: int, count: int) -> list[Range]:
        """The examples left (numbered among them) a reader that handed `count` handed."""
        full, rest = divmod(count, self.block)
        starts = [self.share_to_left(reader, k * self.block) for k in range(full)]
        ranges = [(start, start + self.block) for start in starts]
        if rest:
            start = self.share_to_left(reader, full * self.block)
            ranges.append((start, start + rest))
        return ranges

    def position_after(self, counts: Sequence[int]) -> StreamPosition:
        """The stream's position once reader r handed `counts[r]` examples of its share."""
        assert len(counts) == self.num_readers
        left = merged([r for reader, n in enumerate(counts) for r in self.handed_left(reader, n)])
        handed = [piece for start, stop in left for piece in self.base.left_ranges(start, stop)]
        every = merged([*handed, *self.base.beyond, (0, self.base.prefix)])
        if not every or every[0][0] > 0:
            return StreamPosition(0, tuple(every))
        return StreamPosition(every[0][1], tuple(every[1:]))

    def owned(self, reader: int, start: int, stop: int) -> list[Range]:
        """The pieces of the stream's [start, stop) that reader `reader` hands out: left
        after `base` and in one of its blocks (in order, touching ones joined)."""
        pieces: list[Range] = []
        at = start
        for begin, end in ((0, self.base.prefix), *self.base.beyond):
            if at < begin:
                pieces.extend(self._owned_left(reader, at, min(stop, begin)))
            at = max(at, end)
            if at >= stop:
                return merged(pieces)
        pieces.extend(self._owned_left(reader, at, stop))
        return merged(pieces)

    def sequence(self, reader: int, examples: int, batch_size: int) -> int:
        """The number, among the batches left, of the batch a reader hands out after
        `examples` of its share (GBA's token and a global step count by it)."""
        return self.share_to_left(reader, examples) // batch_size

    def _owned_left(self, reader: int, start: int, stop: int) -> Iterator[Range]:
        """`owned` within [start, stop), a stretch with nothing handed out in it."""
        left = start - self.base.prefix - self._beyond_before(start)
        while start < stop:
            k, offset = divmod(left, self.block)
            take = min(stop - start, self.block - offset)
            if k % self.num_readers == reader:
                yield start, start + take
            start += take
            left += take

    def _beyond_before(self, at: int) -> int:
        return sum(min(stop, at) - begin for begin, stop in self.base.beyond if begin < at)

    def limit_share(self, reader: int, limit: int) -> int:
        """Of the first `limit` examples left, how many are reader `reader`'s."""
        full, rest = divmod(limit, self.block)
        rounds, extra = divmod(full, self.num_readers)
        mine = rounds * self.block
        if reader < extra:
            mine += self.block
        elif reader == extra:
            mine += rest
        return mine


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
