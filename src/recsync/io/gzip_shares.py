"""gzip-compressed text files on object storage shared among readers a whole file each: a
gzip stream cannot be entered in the middle, so a file is one block, read (downloaded and
decompressed) by one reader from its start (docs/storage.md).

File f is block f of the stream: slots [fS, (f+1)S), S = FILE_SLOTS (more than the lines
of any file), its training examples (good lines the coin does not hold out) filling its
first slots in line order, so the readers share the files with the deal of line blocks
(data/shares.py: file k is reader k mod R's) and a checkpoint's position
(`data_unit` "gzfiles/<S>") resumes onto any number of readers: a file cut midway is read
again from its start, the examples before the position passed over. A file is parsed a
piece of lines at a time as it is decompressed, never held whole. Later epochs take the
files in a shuffled order, each file's lines in order.

The held-out coin is the per-line coin of local files (data/line_coin.py: file index and
line number); its cap (`data.test_max_examples`) is found by reading the first files until
it is reached, and reader 0 reads those lines again for the held-out set. A CSV file's
first line is its header (line 1); its rows are lines 2 on.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Generator, Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from recsync.data.batch import Batch, concat
from recsync.data.line_coin import HeldCutoff, candidates, held_lines
from recsync.data.shares import Deal
from recsync.data.skips import LineSkips
from recsync.io.file_shares import ReaderShare
from recsync.io.formats.tabular.rows import TabularSchema
from recsync.io.line_examples import (
    PIECE_LINES,
    Numbered,
    ParsedLines,
    TextSchema,
    parse_numbered,
)
from recsync.io.urls import shown

FILE_SLOTS = 1 << 40  # a file's slots: more lines than any file holds
GZIP_UNIT = "gzfiles"  # a checkpoint's `data_unit`: "gzfiles/<FILE_SLOTS>"


@dataclass(frozen=True)
class GzipFiles:
    """A job's gzip files, a block each, how to parse them and the held-out coin; the
    interface `ReaderShare` reads."""

    paths: tuple[str, ...]
    schema: TextSchema | TabularSchema
    strict: bool
    seed: int
    test_fraction: float
    cutoff: HeldCutoff

    @property
    def block_lines(self) -> int:
        return FILE_SLOTS

    @property
    def unit(self) -> str:
        return f"{GZIP_UNIT}/{FILE_SLOTS}"

    @property
    def blocks(self) -> int:
        return len(self.paths)

    @property
    def slots(self) -> int:
        return self.blocks * FILE_SLOTS

    def share(
        self, deal: Deal, reader: int, batch_size: int, epochs: int, shuffled: bool
    ) -> ReaderShare:
        return GzipShare(self, deal, reader, batch_size, epochs, shuffled)


def gzip_files(
    paths: Sequence[str],
    schema: TextSchema | TabularSchema,
    strict: bool,
    seed: int,
    test_fraction: float,
    test_max_examples: int,
) -> GzipFiles:
    """The files and the cap's cutoff (the first files read until it is reached)."""
    cutoff = HeldCutoff(None, None)
    if test_fraction:
        cutoff = _cap_cutoff(paths, schema, seed, test_fraction, test_max_examples)
    return GzipFiles(tuple(paths), schema, strict, seed, test_fraction, cutoff)


def file_pieces(
    path: str, schema: TextSchema | TabularSchema
) -> Iterator[tuple[bytes | None, Numbered]]:
    """(a CSV file's header, or None; a piece of its numbered lines), PIECE_LINES lines
    at a time, from the file's start, decompressed as they arrive."""
    from recsync.io.readers import _read_lines, open_text

    with open_text(path) as text:
        numbered = _read_lines(text, path)
        header = None
        if isinstance(schema, TabularSchema):
            first = next(numbered, None)
            header = b"" if first is None else first[1].encode()
        while piece := list(itertools.islice(numbered, PIECE_LINES)):
            yield header, piece


def _cap_cutoff(
    paths: Sequence[str], schema: TextSchema | TabularSchema, seed: int, fraction: float, cap: int
) -> HeldCutoff:
    """The cap's last held line: the `cap`-th candidate line of the files, in order."""
    need = cap
    for file_index, path in enumerate(paths):
        for _, piece in file_pieces(path, schema):
            low, high = piece[0][0] - 1, piece[-1][0]
            found = np.flatnonzero(candidates(seed, file_index, low, high, fraction))
            if found.size >= need:
                return HeldCutoff(file_index, low + int(found[need - 1]))
            need -= found.size
    return HeldCutoff(None, None)


def _parsed(
    files: GzipFiles, file_index: int, header: bytes | None, piece: Numbered, skips: LineSkips
) -> ParsedLines:
    path = files.paths[file_index]
    return parse_numbered(
        piece, files.schema, header, source=shown(path), strict=files.strict, skips=skips
    )


class GzipShare(ReaderShare):
    """A reader's share of gzip files: `ReaderShare` with a block read as a whole file, a
    piece of lines at a time (never held whole), its examples in line order every epoch."""

    def _file_examples(self, file_index: int, counted: bool) -> Generator[Batch, None, None]:
        """The file's training examples in line order, a piece at a time; `counted`: its
        skips and held-out rows kept (epoch 0)."""
        files = self.files
        assert isinstance(files, GzipFiles)
        for header, piece in file_pieces(files.paths[file_index], files.schema):
            skips = LineSkips()
            parsed = _parsed(files, file_index, header, piece, skips)
            train = self._kept(parsed, file_index, skips, counted)
            if train is not None:
                yield train

    def _examples(self) -> Iterator[tuple[Batch, np.ndarray]]:
        size, count = FILE_SLOTS, 0
        for start, stop in self._pieces():
            block = start // size
            epoch, file_index = self.line_block(block)
            first, last = start - block * size, stop - block * size
            made = 0  # the file's training examples so far
            held_back: tuple[Batch, np.ndarray] | None = None  # the piece's end marks its last
            examples = self._file_examples(file_index, counted=epoch == 0)
            with contextlib.closing(examples):  # the file closed where the piece ends
                for train in examples:
                    low, high = max(first - made, 0), min(last - made, train.batch_size)
                    if low < high:
                        if held_back is not None:
                            yield held_back
                        after = count + made + low - first + np.arange(1, high - low + 1)
                        held_back = train.slice(low, high), after
                    made += train.batch_size
                    if made >= last:
                        break
            if held_back is not None:
                held_back[1][-1] = count + (stop - start)  # the piece's empty slots with it
                yield held_back
            count += stop - start


def held_gzip_rows(files: GzipFiles) -> Batch | None:
    """The examples of the lines the coin holds out, in (file, line) order: the files read
    up to the cutoff, only their held lines parsed (their skips are counted by the readers
    whose files hold them)."""
    parts: list[Batch] = []
    cutoff = files.cutoff
    for file_index, path in enumerate(files.paths):
        if not files.test_fraction or not cutoff.open_lines(file_index, 0, FILE_SLOTS):
            break
        for header, piece in file_pieces(path, files.schema):
            low, high = piece[0][0] - 1, piece[-1][0]
            held = held_lines(files.seed, file_index, low, high, files.test_fraction, cutoff)
            numbered = [pair for pair in piece if held[pair[0] - 1 - low]]
            if numbered:
                parsed = _parsed(files, file_index, header, numbered, LineSkips())
                if parsed.batch is not None:
                    parts.append(parsed.batch)
            if not cutoff.open_lines(file_index, high, FILE_SLOTS):
                break
    return concat(parts) if parts else None
