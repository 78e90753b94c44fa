"""Text data files on object storage shared among readers by byte ranges: no node reads a
whole file to find its lines (docs/storage.md).

A file of S bytes is cut into blocks of B bytes (`BLOCK_BYTES`); block k holds the lines
that start in bytes [kB, (k+1)B). A reader reads its block's range and a little past it
(the last line may end beyond), and finds its first full line after the first b"\\n" at or
after byte kB - 1. A block's slots are B (no more lines can start in it); its examples
fill the first ones, so positions, cuts and resumes are those of any block deal
(file_shares.py `ReaderShare`; the checkpoint's `data_unit` is "bytes/<B>").

The held-out coin (data/line_coin.py) is keyed by the byte offset at which a line starts
(a line's number is unknown without reading the file up to it): the same lines are held
out whatever the number of readers. The cap (`data.test_max_examples`) is the byte offset
of the cap's last held line, found once by reading the first files from their start until
the cap is reached (about `test_max_examples / test_fraction` lines); reader 0 reads those
lines again for the held-out set.

Messages name a line of these files by the byte it starts at ("the line at byte 1,234").
"""

from __future__ import annotations

import io
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from recsync.data.batch import Batch, concat
from recsync.data.line_coin import HeldCutoff, held_at
from recsync.data.shares import Deal
from recsync.data.skips import LineSkips, Rejected
from recsync.errors import DataError
from recsync.io.file_shares import ReaderShare
from recsync.io.formats.tabular.rows import TabularSchema
from recsync.io.line_examples import ParsedLines, TextSchema, parse_numbered
from recsync.io.read_ahead import Ahead, Span
from recsync.io.storage import open_ranges
from recsync.io.urls import shown

BLOCK_BYTES = 4 << 20
TAIL_BYTES = 64 << 10  # read past a block for its last line's end, more if it is longer
SCAN_BYTES = 8 << 20  # read at a time while looking for the cap's last held line
NEWLINE = 10
# the ASCII characters str.splitlines also breaks lines at: where any is (or a character
# past ASCII, among which it breaks at three more), the lines are split at "\n" only
_OTHER_BREAKS = (b"\r", b"\x0b", b"\x0c", b"\x1c", b"\x1d", b"\x1e")


@dataclass(frozen=True)
class ByteBlocks:
    """A job's text files by byte blocks, how to parse them and the held-out coin (keyed
    by line-start bytes); the interface `ReaderShare` reads."""

    paths: tuple[str, ...]
    sizes: tuple[int, ...]
    block_bytes: int
    schema: TextSchema | TabularSchema
    strict: bool
    seed: int
    test_fraction: float
    cutoff: HeldCutoff
    headers: tuple[bytes, ...] = ()  # CSV: each file's header line (its rows follow it)

    @property
    def block_lines(self) -> int:
        """A block's slots: B (at most one line starts at each of its bytes)."""
        return self.block_bytes

    @property
    def unit(self) -> str:
        return f"bytes/{self.block_bytes}"

    @property
    def blocks(self) -> int:
        return sum(self._file_blocks)

    @property
    def slots(self) -> int:
        return self.blocks * self.block_bytes

    @property
    def _file_blocks(self) -> list[int]:
        return [-(-size // self.block_bytes) for size in self.sizes]

    def where(self, block: int) -> tuple[int, int, int]:
        """(file index, first byte, byte after) of block `block`."""
        for file_index, count in enumerate(self._file_blocks):
            if block < count:
                start = block * self.block_bytes
                return file_index, start, min(self.sizes[file_index], start + self.block_bytes)
            block -= count
        raise AssertionError(f"byte block {block} past the files' end")

    def share(
        self, deal: Deal, reader: int, batch_size: int, epochs: int, shuffled: bool
    ) -> ReaderShare:
        return ByteShare(self, deal, reader, batch_size, epochs, shuffled)


def byte_blocks(
    paths: Sequence[str],
    schema: TextSchema | TabularSchema,
    strict: bool,
    seed: int,
    test_fraction: float,
    test_max_examples: int,
    block_bytes: int = BLOCK_BYTES,
) -> ByteBlocks:
    """The files' byte blocks (their sizes only) and the cap's cutoff (a prefix read)."""
    from recsync.io.storage import file_size

    sizes = tuple(file_size(path) for path in paths)
    headers: tuple[bytes, ...] = ()
    if isinstance(schema, TabularSchema):
        headers = tuple(_header(path, size) for path, size in zip(paths, sizes, strict=True))
    rows_from = [len(header) for header in headers] or [0] * len(paths)
    cutoff = _cap_cutoff(paths, sizes, rows_from, seed, test_fraction, test_max_examples)
    return ByteBlocks(
        tuple(paths), sizes, block_bytes, schema, strict, seed, test_fraction, cutoff, headers
    )


def _header(path: str, size: int) -> bytes:
    """A CSV file's first line (its column names), with its "\\n"."""
    lines = block_lines(path, size, 0, 1)
    if not lines:
        raise DataError("an empty CSV file: no header line", source=shown(path))
    return lines[0][1].encode()


def _cap_cutoff(
    paths: Sequence[str],
    sizes: Sequence[int],
    rows_from: Sequence[int],
    seed: int,
    fraction: float,
    cap: int,
) -> HeldCutoff:
    """The line-start byte of the cap's last held line, read from the files' start (each
    file's lines from byte `rows_from[f]`: after a CSV header)."""
    if fraction == 0.0:
        return HeldCutoff(None, None)
    need = cap
    for file_index, (path, size) in enumerate(zip(paths, sizes, strict=True)):
        with open_ranges(path) as raw:
            for start in range(0, size, SCAN_BYTES):
                data = _read(raw, start, min(size, start + SCAN_BYTES), path)
                found = np.flatnonzero(np.frombuffer(data, dtype=np.uint8) == 10) + 1 + start
                starts = np.concatenate([[0], found]) if start == 0 else found
                starts = starts[(starts < size) & (starts >= rows_from[file_index])]
                picked = starts[held_at(seed, file_index, starts, fraction, HeldCutoff(None, None))]
                if picked.size >= need:
                    return HeldCutoff(file_index, int(picked[need - 1]))
                need -= picked.size
    return HeldCutoff(None, None)


def _read(raw: object, start: int, stop: int, path: str) -> bytes:
    raw.seek(start)  # type: ignore[attr-defined]
    data: bytes = raw.read(stop - start)  # type: ignore[attr-defined]
    if len(data) != stop - start:
        raise DataError(
            f"ended at byte {start + len(data)} of {stop} (truncated?)", source=shown(path)
        )
    return data


def block_span(path: str, size: int, start: int, stop: int) -> Span:
    """The bytes read for the lines that start in bytes [start, stop): from the byte
    before (is it a line's end?) to TAIL_BYTES past (the last line's end)."""
    return Span(path, size, max(0, start - 1), min(size, stop + TAIL_BYTES))


def block_lines(
    path: str,
    size: int,
    start: int,
    stop: int,
    fetched: io.RawIOBase | None = None,
    *,
    pick: Callable[[np.ndarray], np.ndarray] | None = None,
    number: int = 0,
) -> list[tuple[int, str]]:
    """(first byte + `number`, line) of each line that starts in bytes [start, stop) of
    the file, decoded as `open_text` decodes them (UTF-8, undecodable bytes U+FFFD, each
    line keeps its "\n"); `fetched`: the file with `block_span`'s bytes read ahead;
    `pick`: of the lines (a bool mask of their first bytes) only these, the others never
    decoded."""
    begin, data, skip = _block_bytes(path, size, start, stop, fetched)
    if skip >= len(data) or begin + skip >= stop:
        return []
    # the lines' starts by a bulk scan ("\n" is no part of a longer UTF-8 sequence, and
    # U+FFFD replaces no "\n": the pieces between are the lines)
    ends = np.flatnonzero(np.frombuffer(data, dtype=np.uint8)[skip:] == NEWLINE) + skip + 1
    starts = np.concatenate([[skip], ends[ends < len(data)]])
    starts = starts[begin + starts < stop]
    after = int(ends[len(starts) - 1]) if len(ends) >= len(starts) else len(data)
    if pick is not None:
        bounds = np.append(starts, after).tolist()
        return [
            (begin + number + bounds[i], data[bounds[i] : bounds[i + 1]].decode("utf-8", "replace"))
            for i in np.flatnonzero(pick(begin + starts)).tolist()
        ]
    lines_bytes = data[skip:after]
    text = lines_bytes.decode("utf-8", errors="replace")
    if lines_bytes.isascii() and not any(c in lines_bytes for c in _OTHER_BREAKS):
        texts = text.splitlines(keepends=True)  # "\n" its only line break: one call
    else:
        pieces = text.split("\n")
        last = pieces.pop()  # after the last "\n": empty, or a last line without one
        texts = [piece + "\n" for piece in pieces] + ([last] if last else [])
    assert len(texts) == len(starts), (path, begin, len(texts), len(starts))
    return list(zip((begin + number + starts).tolist(), texts, strict=True))


def _block_bytes(
    path: str, size: int, start: int, stop: int, fetched: io.RawIOBase | None
) -> tuple[int, bytes, int]:
    """(first byte read, the bytes, where in them the first line to start in [start,
    stop) starts): `block_span`'s bytes, read on past its tail if the block's last line
    is longer."""
    span = block_span(path, size, start, stop)
    begin, end = span.start, span.stop
    with fetched or open_ranges(path) as raw:
        data = _read(raw, begin, end, path)
        if start > 0:
            first = data.find(b"\n")
            skip = len(data) if first < 0 else first + 1
        else:
            skip = 0
        # the line holding byte stop - 1 (the last to start in the block) may end past
        # what was read: read on to its end
        while end < size and skip < stop - begin and data.find(b"\n", stop - 1 - begin) < 0:
            more = _read(raw, end, min(size, end + 4 * TAIL_BYTES), path)
            data += more
            end += len(more)
    return begin, data, skip


class ByteLineSkips(LineSkips):
    """Skips whose lines are numbered by their first byte + 1 (as the coin keys them),
    named in messages by that byte."""

    def add(self, rejected: Rejected, *, source: str, line: int) -> None:
        super().add(rejected, source=source, line=line)
        reason = rejected.reason
        if self.lines[-1] == line and self.counts[reason] == 1:
            self.first[reason] = _by_byte(self.first[reason], line)


def _by_byte(text: str, line: int) -> str:
    return text.replace(f", line {line}", f", the line at byte {line - 1:,}", 1)


def parse_block(
    files: ByteBlocks,
    block: int,
    skips: LineSkips,
    held_only: bool = False,
    ahead: Ahead | None = None,
) -> ParsedLines:
    """The good examples of byte block `block`, each with its line's first byte + 1;
    `held_only`: of the lines the coin holds out only."""
    file_index, start, stop = files.where(block)
    path = files.paths[file_index]
    fetched = (ahead or {}).get(path)
    rows_from = len(files.headers[file_index]) if files.headers else 0
    pick = None
    if held_only:  # only the held lines decoded and parsed

        def pick(starts: np.ndarray) -> np.ndarray:
            held = held_at(files.seed, file_index, starts, files.test_fraction, files.cutoff)
            return held & (starts >= rows_from)

    elif start < rows_from:  # a CSV header's block: the rows after it

        def pick(starts: np.ndarray) -> np.ndarray:
            return starts >= rows_from

    size = files.sizes[file_index]
    numbered = block_lines(path, size, start, stop, fetched, pick=pick, number=1)
    source = shown(path)
    header = files.headers[file_index] if files.headers else None
    try:
        return parse_numbered(
            numbered,
            files.schema,
            header,
            source=source,
            strict=files.strict,
            skips=skips,
            name_line=lambda number: f"line at byte {number - 1:,}",
        )
    except DataError as error:
        raise DataError(_by_byte(str(error), error.line)) from None


class ByteShare(ReaderShare):
    """A reader's share of byte blocks: `ReaderShare` with a block read as a byte range."""

    _by_position = True

    def _reads_ahead(self) -> bool:
        return True

    def _spans(self, block: int) -> list[Span]:
        files = self.files
        assert isinstance(files, ByteBlocks)
        file_index, start, stop = files.where(block)
        return [block_span(files.paths[file_index], files.sizes[file_index], start, stop)]

    def _parsed(self, block: int, counted: bool, ahead: Ahead) -> Batch | None:
        files = self.files
        assert isinstance(files, ByteBlocks)
        skips = ByteLineSkips()
        parsed = parse_block(files, block, skips, ahead=ahead)
        return self._kept(parsed, files.where(block)[0], skips, counted)


def held_byte_rows(files: ByteBlocks) -> Batch | None:
    """The examples of the lines the coin holds out, in (file, byte) order: the blocks up
    to the cutoff read, only their held lines parsed."""
    parts: list[Batch] = []
    for block in range(files.blocks):
        file_index, start, stop = files.where(block)
        if not files.test_fraction or not files.cutoff.open_lines(file_index, start, stop):
            continue
        parsed = parse_block(files, block, ByteLineSkips(), held_only=True)
        if parsed.batch is not None:
            parts.append(parsed.batch)
    return concat(parts) if parts else None
