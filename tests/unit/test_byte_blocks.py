"""Text files by byte blocks (io/byte_blocks.py): the lines that start in each block, read
from its byte range and a little past it, are the file's lines once each, whatever the
block size, line lengths (lines longer than a block and its tail), multi-byte characters
across a block's edge, empty lines and a last line without "\\n"; the cap's cutoff is the
line-start byte of the cap's last held line."""

from __future__ import annotations

import random

import numpy as np
import pytest

from recsync.data.line_coin import HeldCutoff, held_at, position_uniforms
from recsync.io import byte_blocks
from recsync.io.byte_blocks import block_lines


def _file(tmp_path, seed: int, end_newline: bool, alphabet: str = "ab\tcé€1") -> tuple[str, bytes]:
    rng = random.Random(seed)
    lines = []
    for _ in range(400):
        kind = rng.random()
        if kind < 0.05:
            lines.append("")
        elif kind < 0.1:
            lines.append("x" * rng.randint(200, 900))  # longer than a block and its tail
        else:
            lines.append("".join(rng.choice(alphabet) for _ in range(rng.randint(1, 40))))
    text = "\n".join(lines) + ("\n" if end_newline else "")
    path = tmp_path / f"f{seed}.txt"
    path.write_bytes(text.encode())
    return str(path), text.encode()


@pytest.mark.parametrize("block", [1, 7, 64, 333, 100_000])
@pytest.mark.parametrize("end_newline", [True, False])
@pytest.mark.parametrize("alphabet", ["ab\tcé€1", "ab\t1", "ab\r\x0c\t1"])
def test_the_blocks_lines_are_the_files_lines_once_each(
    tmp_path, monkeypatch, block, end_newline, alphabet
):
    monkeypatch.setattr(byte_blocks, "TAIL_BYTES", 16)
    path, data = _file(tmp_path, block, end_newline, alphabet)
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
    picked = []
    for start in range(0, size, block):
        picked.extend(block_lines(path, size, start, min(size, start + block), pick=_odd, number=1))
    assert picked == [(at + 1, line) for at, line in expected if at % 2]


def _odd(starts: np.ndarray) -> np.ndarray:
    return starts % 2 == 1


def test_the_cutoff_is_the_cap_s_last_held_line_start(tmp_path):
    path, data = _file(tmp_path, 3, True)
    starts = np.array([0] + [i + 1 for i, b in enumerate(data[:-1]) if b == 10])
    held = starts[position_uniforms(11, 0, starts) < 0.2]
    cutoff = byte_blocks._cap_cutoff([path], [len(data)], [0], 11, 0.2, 25)
    assert (cutoff.file_index, cutoff.line) == (0, int(held[24]))
    whole = byte_blocks._cap_cutoff([path], [len(data)], [0], 11, 0.2, 10**6)
    assert (whole.file_index, whole.line) == (None, None)  # fewer candidates than the cap


def test_the_position_coin_is_a_function_of_seed_file_and_position_alone():
    positions = np.arange(0, 200_000, 7, dtype=np.int64)
    whole = position_uniforms(5, 2, positions)
    parts = np.concatenate([position_uniforms(5, 2, p) for p in np.array_split(positions, 9)])
    assert np.array_equal(whole, parts)
    assert whole.min() >= 0.0 and whole.max() < 1.0
    assert abs(whole.mean() - 0.5) < 0.01  # uniform: 28,572 draws
    assert abs((whole < 0.1).mean() - 0.1) < 0.01
    assert not np.array_equal(whole, position_uniforms(6, 2, positions))  # the seed
    assert not np.array_equal(whole, position_uniforms(5, 3, positions))  # the file
    assert position_uniforms(5, 2, np.array([0, 7]))[1] == whole[1]


def test_held_at_holds_nothing_past_the_cutoff():
    positions = np.arange(0, 10_000, dtype=np.int64)
    free = held_at(1, 1, positions, 0.3, HeldCutoff(None, None))
    cut = held_at(1, 1, positions, 0.3, HeldCutoff(1, 4_000))
    assert np.array_equal(cut[:4_001], free[:4_001]) and not cut[4_001:].any()
    assert held_at(1, 1, positions, 0.3, HeldCutoff(2, 0)).tolist() == free.tolist()
    assert not held_at(1, 1, positions, 0.3, HeldCutoff(0, 10)).any()
