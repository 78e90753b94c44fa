"""A reader's next blocks of remote data files fetched while it parses the present one.

A reader of files on object storage would otherwise wait for each block's bytes (a Parquet
row group's column chunks, a text file's byte range) before it parses them: a round trip
and a transfer per block, the parse idle meanwhile. `ReadAhead` knows the order in which
the share will parse its blocks; it keeps the next `AHEAD_BLOCKS` blocks' byte ranges
(`Span`s) being read, `FETCH_THREADS` ranges at a time (ranged reads in parallel, each
retried as any remote read is: io/retrying.py), and hands the parse a block's bytes as
`Fetched`: a file whose reads inside the fetched ranges come from memory and any other read
from the store. Memory: about `AHEAD_BLOCKS + 1` blocks' bytes a reader (a row group of the
synthetic task: 10 MB; a text block: 4 MiB).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from recsync.io.retrying import RetryingRaw, SizedRaw

AHEAD_BLOCKS = 4
FETCH_THREADS = 4


@dataclass(frozen=True)
class Span:
    """Bytes [start, stop) of a remote data file (its size: `size`)."""

    path: str
    size: int
    start: int
    stop: int


class Fetched(SizedRaw):
    """A remote file (`size` bytes) of which `ranges` ([(first byte, bytes)], in order, not
    overlapping) were read ahead: reads inside one are served from memory, any other read
    from the store."""

    def __init__(self, path: str, size: int, ranges: Sequence[tuple[int, bytes]]):
        self.path, self._size = path, size
        self._starts = [start for start, _ in ranges]
        self._ranges = list(ranges)
        self._position = 0
        self._raw: Any = None

    def readinto(self, buffer: Any) -> int:
        want = min(len(buffer), max(0, self._size - self._position))
        if want == 0:
            return 0
        at = bisect.bisect_right(self._starts, self._position) - 1
        if at >= 0:
            start, data = self._ranges[at]
            offset = self._position - start
            if offset + want <= len(data):
                memoryview(buffer)[:want] = data[offset : offset + want]
                self._position += want
                return want
        if self._raw is None:  # a read the read-ahead did not foresee
            self._raw = RetryingRaw(self.path, size=self._size)
        self._raw.seek(self._position)
        got = int(self._raw.readinto(memoryview(buffer)[:want]))
        self._position += got
        return got

    def close(self) -> None:
        if self._raw is not None:
            self._raw.close()
        super().close()


def fetched_span(span: Span) -> bytes:
    """The bytes of `span`, read from the store (one ranged read, retried)."""
    with RetryingRaw(span.path, size=span.size) as raw:
        raw.seek(span.start)
        data = bytearray(span.stop - span.start)
        view, got = memoryview(data), 0
        while got < len(data):
            count = raw.readinto(view[got:])
            assert count, (span, got)
            got += count
        return bytes(data)


Ahead = dict[str, Fetched]  # a block's remote files, each with its ranges read ahead


class ReadAhead:
    """The blocks `order` (in parse order), each block's spans given by `spans_of`, read
    `ahead` blocks in advance on `threads` threads; `take(i)` waits for the i-th block's."""

    def __init__(
        self,
        order: Sequence[int],
        spans_of: Callable[[int], Sequence[Span]],
        ahead: int = AHEAD_BLOCKS,
        threads: int = FETCH_THREADS,
        fetch: Callable[[Span], bytes] = fetched_span,
    ):
        assert ahead >= 0 and threads >= 1
        self.order, self.spans_of, self.ahead, self.fetch = list(order), spans_of, ahead, fetch
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix="read-ahead")
        self._pending: dict[int, list[tuple[Span, Future[bytes]]]] = {}

    def _submit(self, index: int) -> None:
        if index < len(self.order) and index not in self._pending:
            spans = self.spans_of(self.order[index])
            self._pending[index] = [(span, self._pool.submit(self.fetch, span)) for span in spans]

    def take(self, index: int) -> Ahead:
        """The files of the `index`-th block with its spans' bytes (waits for them); the
        blocks after it up to `ahead` start being read."""
        for later in range(index, index + self.ahead + 1):
            self._submit(later)
        for done in [i for i in self._pending if i < index]:  # skipped: not needed
            for _, future in self._pending.pop(done):
                future.cancel()
        by_file: dict[str, list[tuple[int, bytes]]] = {}
        sizes: dict[str, int] = {}
        for span, future in self._pending.pop(index):
            by_file.setdefault(span.path, []).append((span.start, future.result()))
            sizes[span.path] = span.size
        return {
            path: Fetched(path, sizes[path], sorted(ranges)) for path, ranges in by_file.items()
        }

    def close(self) -> None:
        for futures in self._pending.values():
            for _, future in futures:
                future.cancel()
        self._pending.clear()
        self._pool.shutdown(wait=False, cancel_futures=True)
