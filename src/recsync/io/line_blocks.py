"""Where the lines of a text data file start, found by a bulk newline scan, and the lines of
any range of them read without reading the lines before (docs/design-file-shares.md).

`line_index` reads a file once in chunks of CHUNK_BYTES and finds its b"\\n" with
numpy; it keeps the byte offset of every `block_lines`-th line start (line 0, L, 2L, ...),
so the index of a file of n lines holds n / L offsets. `read_lines` then seeks to the
block of a line and yields (line number, line) pairs for any range of lines, decoded as
`open_text` decodes them (UTF-8, undecodable bytes U+FFFD; lines end at "\\n" only, and
keep it), so a range reads what iterating the whole file gives for those lines (tested).

Plain files only: a gzip stream cannot be entered in the middle, so `line_index` refuses
one (ValueError); such files are dealt whole (see the design note).

Lines are numbered from 0 in ranges; the pairs carry the 1-based numbers of the messages.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from recsync.io.readers import is_gzip
from recsync.io.storage import open_ranges
from recsync.io.urls import shown

CHUNK_BYTES = 8 << 20
NEWLINE = 10


@dataclass(frozen=True)
class LineIndex:
    """A file's lines: `num_lines` of them in `num_bytes` bytes, line k * `block_lines`
    starting at byte `block_starts[k]` (a last line with no "\\n" counts)."""

    path: str  # a local path or a URL (io/storage.py)
    block_lines: int
    block_starts: np.ndarray  # int64, one per block
    num_lines: int
    num_bytes: int

    @property
    def num_blocks(self) -> int:
        return int(self.block_starts.size)

    def block_bytes(self, block: int) -> tuple[int, int]:
        """[start, stop) of the bytes of block `block`."""
        stop = self.num_bytes if block + 1 >= self.num_blocks else self.block_starts[block + 1]
        return int(self.block_starts[block]), int(stop)


def line_index(path: str | Path, block_lines: int, chunk_bytes: int = CHUNK_BYTES) -> LineIndex:
    """The index of a plain text file: every `block_lines`-th line start, by a bulk scan."""
    path = str(path)
    if block_lines < 1:
        raise ValueError(f"block_lines must be >= 1, got {block_lines}")
    if is_gzip(path):
        raise ValueError(
            f"{shown(path)} is gzip-compressed: its lines cannot be read from the middle"
        )
    starts = [0]
    newlines, offset, last = 0, 0, NEWLINE
    chunk = bytearray(chunk_bytes)  # read into again and again: no allocation a chunk
    with open_ranges(path) as f:
        while size := f.readinto(chunk):
            found = np.flatnonzero(np.frombuffer(chunk, dtype=np.uint8, count=size) == NEWLINE)
            # line j starts after newline j - 1: the next start kept is line len(starts) * L
            wanted = len(starts) * block_lines - 1  # the newline before it
            if wanted < newlines + found.size:
                picks = np.arange(wanted, newlines + found.size, block_lines) - newlines
                starts.extend((offset + found[picks] + 1).tolist())
            newlines += found.size
            offset += size
            last = chunk[size - 1]
    num_lines = newlines + (1 if offset and last != NEWLINE else 0)
    if starts and starts[-1] >= offset:  # a start at the end of the file starts no line
        starts.pop()
    return LineIndex(path, block_lines, np.array(starts, dtype=np.int64), num_lines, offset)


def _decoded_lines(data: bytes) -> list[str]:
    """The lines of `data` as `open_text` reads them (each keeps its "\\n")."""
    parts = data.decode("utf-8", errors="replace").split("\n")
    lines = [part + "\n" for part in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def read_lines(index: LineIndex, start: int, stop: int) -> Iterator[tuple[int, str]]:
    """(line number from 1, line) of lines [start, stop) (from 0) of the indexed file,
    reading only the blocks that hold them."""
    if not 0 <= start <= stop <= index.num_lines:
        raise ValueError(f"lines [{start}, {stop}) are not lines of {shown(index.path)}")
    if start == stop:
        return
    size = index.block_lines
    with open_ranges(index.path) as f:
        for block in range(start // size, (stop - 1) // size + 1):
            first = block * size
            begin, end = index.block_bytes(block)
            f.seek(begin)
            lines = _decoded_lines(f.read(end - begin))
            low, high = max(start, first) - first, min(stop, first + len(lines)) - first
            for k in range(low, high):
                yield first + k + 1, lines[k]


@dataclass(frozen=True)
class FilePiece:
    """Lines [start, stop) (from 0) of file `file_index`."""

    file_index: int
    start: int
    stop: int


def file_pieces(line_counts: Sequence[int], start: int, stop: int) -> list[FilePiece]:
    """The pieces of files holding lines [start, stop) of the files' lines end to end
    (`line_counts`: each file's, in order)."""
    pieces, first = [], 0
    for file_index, count in enumerate(line_counts):
        low, high = max(start, first), min(stop, first + count)
        if low < high:
            pieces.append(FilePiece(file_index, low - first, high - first))
        first += count
    return pieces
