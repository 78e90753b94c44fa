"""Text files by byte blocks (io/byte_blocks.py): the lines that start in each block, read
from its byte range and a little past it, are the file's lines once each, whatever the
block size, line lengths (lines longer than a block and its tail), multi-byte characters
across a block's edge, empty lines and a last line without "\\n"; the cap's cutoff is the
line-start byte of the cap's last held line."""

from __future__ import annotations

import random

import numpy as np
import pytest

from recsync.data.line_coin import candidates
from recsync.io import byte_blocks
from recsync.io.byte_blocks import block_lines


def _file(tmp_path, seed: int, end_newline: bool) -> tuple[str, bytes]:
    rng = random.Random(seed)
    lines = []
    for _ in range(400):
        kind = rng.random()
        if kind < 0.05:
            lines.append("")
        elif kind < 0.1:
            lines.append("x" * rng.randint(200, 900))  # longer than a block and its tail
        else:
            lines.append("".join(rng.choice("ab\tcé€1") for _ in range(rng.randint(1, 40))))
    text = "\n".join(lines) + ("\n" if end_newline else "")
    path = tmp_path / f"f{seed}.txt"
    path.write_bytes(text.encode())
    return str(path), text.encode()


@pytest.mark.parametrize("block", [1, 7, 64, 333, 100_000])
@pytest.mark.parametrize("end_newline", [True, False])
def test_the_blocks_lines_are_the_files_lines_once_each(tmp_path, monkeypatch, block, end_newline):
    monkeypatch.setattr(byte_blocks, "TAIL_BYTES", 16)
    path, data = _file(tmp_path, block, end_newline)
    size = len(data)
    got = []
    for start in range(0, size, block):
        got.extend(block_lines(path, size, start, min(size, start + block)))
    expected, at = [], 0
    for piece in data.split(b"\n")[: -1 if end_newline else None]:
        raw = piece + b"\n" if at + len(piece) < size else piece
        expected.append((at, raw.decode("utf-8", errors="replace")))
        at += len(raw)
    assert got == expected


def test_the_cutoff_is_the_cap_s_last_held_line_start(tmp_path):
    path, data = _file(tmp_path, 3, True)
    starts = np.array([0] + [i + 1 for i, b in enumerate(data[:-1]) if b == 10])
    held = starts[candidates(11, 0, 0, len(data), 0.2)[starts]]
    cutoff = byte_blocks._cap_cutoff([path], [len(data)], 11, 0.2, 25)
    assert (cutoff.file_index, cutoff.line) == (0, int(held[24]))
    whole = byte_blocks._cap_cutoff([path], [len(data)], 11, 0.2, 10**6)
    assert (whole.file_index, whole.line) == (None, None)  # fewer candidates than the cap
