"""Reading ahead (io/read_ahead.py): a block's spans are fetched before it is taken, at most
`ahead` blocks in advance; a taken block's file serves reads inside its spans from memory
and any other read from the file itself; blocks passed over are dropped; a fetch that failed
raises where its block is taken."""

from __future__ import annotations

import threading

import pytest

from recsync.io.read_ahead import Fetched, ReadAhead, Span


def _file(tmp_path, size: int = 10_000) -> tuple[str, bytes]:
    data = bytes(i % 251 for i in range(size))
    path = tmp_path / "data.bin"
    path.write_bytes(data)
    return str(path), data


def test_a_fetched_file_reads_its_spans_from_memory_and_the_rest_from_the_file(tmp_path):
    path, data = _file(tmp_path)
    fake = bytes(100)  # what "memory" holds: zeros, unlike the file
    with Fetched(path, len(data), [(1_000, fake), (5_000, fake)]) as f:
        f.seek(1_010)
        assert f.read(50) == bytes(50)  # inside the first span
        f.seek(4_990)
        assert f.read(20) == data[4_990:5_010]  # across a span's edge: from the file
        f.seek(5_099)
        assert f.read(1) == b"\0"
        f.seek(-3, 2)
        assert f.read() == data[-3:]


def test_blocks_are_fetched_ahead_in_order_and_passed_over_ones_dropped(tmp_path):
    path, data = _file(tmp_path)
    fetched: list[int] = []
    lock = threading.Lock()

    def fetch(span: Span) -> bytes:
        with lock:
            fetched.append(span.start)
        return data[span.start : span.stop]

    def spans(block: int) -> list[Span]:
        return [Span(path, len(data), block * 100, block * 100 + 50)]

    reads = ReadAhead([3, 1, 4, 7, 5], spans, ahead=2, threads=1, fetch=fetch)
    try:
        first = reads.take(0)
        assert set(first) == {path}
        first[path].seek(300)
        assert first[path].read(50) == data[300:350]
        reads._pool.shutdown(wait=True)  # the fetches submitted so far are done
        assert sorted(fetched) == [100, 300, 400]  # blocks 3, 1, 4: taken one and 2 ahead
    finally:
        reads.close()


def test_a_failed_fetch_raises_where_its_block_is_taken(tmp_path):
    path, data = _file(tmp_path)

    def fetch(span: Span) -> bytes:
        if span.start == 200:
            raise OSError("the store went away")
        return data[span.start : span.stop]

    reads = ReadAhead(
        [0, 1, 2], lambda b: [Span(path, len(data), b * 100, b * 100 + 10)], 1, 2, fetch
    )
    try:
        reads.take(0)
        reads.take(1)
        with pytest.raises(OSError, match="went away"):
            reads.take(2)
    finally:
        reads.close()


def test_blocks_taken_out_of_turn_drop_the_ones_before(tmp_path):
    path, data = _file(tmp_path)
    reads = ReadAhead(
        [0, 1, 2, 3], lambda b: [Span(path, len(data), b * 10, b * 10 + 5)], 3, 2, lambda s: b"x"
    )
    try:
        reads.take(0)
        reads.take(3)
        assert not reads._pending
    finally:
        reads.close()
