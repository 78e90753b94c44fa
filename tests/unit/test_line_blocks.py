"""Line indexes of text data files (io/line_blocks.py): every L-th line start found by a
bulk scan, and any range of lines read as iterating the whole file reads them."""

from __future__ import annotations

import gzip

import numpy as np
import pytest

from recsync.io.line_blocks import FilePiece, file_pieces, line_index, read_lines
from recsync.io.readers import open_text

ODD_LINES = [
    b"1\ta\tb\n",
    b"\n",
    b"0\tx\r\tz\r\n",  # a "\r" stays inside its line
    b"\xff\xfe bad utf-8\n",
    b"caf\xc3\xa9\n",
    b"half \xc3\n",  # a multibyte character cut by the line's end
    b"\x0b\x1c\xe2\x80\xa8 splitlines would split here\n",
]


def _write(path, lines: list[bytes]) -> None:
    path.write_bytes(b"".join(lines))


def _whole(path) -> list[tuple[int, str]]:
    with open_text(path) as f:
        return list(enumerate(f, start=1))


@pytest.mark.parametrize("tail", [b"", b"no newline at the end"])
@pytest.mark.parametrize("block_lines", [1, 2, 5, 64])
def test_any_range_reads_what_the_whole_file_gives(tmp_path, tail, block_lines):
    path = tmp_path / "a.txt"
    _write(path, [*(ODD_LINES * 3), tail])
    whole = _whole(path)
    index = line_index(path, block_lines, chunk_bytes=7)  # chunks cut lines anywhere
    assert index.num_lines == len(whole) and index.num_bytes == path.stat().st_size
    starts = np.cumsum([0] + [len(line) for line in path.read_bytes().split(b"\n")[:-1]])
    starts += np.arange(starts.size)  # each "\n" before a start
    assert index.block_starts.tolist() == starts[: index.num_lines : block_lines].tolist()
    assert index.num_blocks == -(-len(whole) // block_lines)
    n = len(whole)
    for start in range(n + 1):
        for stop in range(start, n + 1):
            assert list(read_lines(index, start, stop)) == whole[start:stop]


def test_chunk_size_does_not_change_the_index(tmp_path):
    path = tmp_path / "a.txt"
    _write(path, [b"%d\n" % k for k in range(1000)])
    big = line_index(path, 10)
    for chunk in (1, 3, 64, 4096):
        small = line_index(path, 10, chunk_bytes=chunk)
        assert np.array_equal(small.block_starts, big.block_starts)
        assert small.num_lines == big.num_lines == 1000


def test_empty_file_and_refusals(tmp_path):
    path = tmp_path / "empty.txt"
    path.write_bytes(b"")
    index = line_index(path, 4)
    assert (index.num_lines, index.num_blocks) == (0, 0)
    assert list(read_lines(index, 0, 0)) == []
    with pytest.raises(ValueError, match="not lines of"):
        list(read_lines(index, 0, 1))
    with pytest.raises(ValueError, match="block_lines"):
        line_index(path, 0)
    packed = tmp_path / "a.txt.gz"
    packed.write_bytes(gzip.compress(b"1 2:1\n"))
    with pytest.raises(ValueError, match="gzip"):
        line_index(packed, 4)


def test_file_pieces_cut_a_range_of_lines_end_to_end_at_the_files():
    counts = [3, 0, 4, 2]
    assert file_pieces(counts, 0, 9) == [FilePiece(0, 0, 3), FilePiece(2, 0, 4), FilePiece(3, 0, 2)]
    assert file_pieces(counts, 2, 5) == [FilePiece(0, 2, 3), FilePiece(2, 0, 2)]
    assert file_pieces(counts, 7, 8) == [FilePiece(3, 0, 1)]
    assert file_pieces(counts, 4, 4) == []
