"""A block of text lines as one byte buffer, for the compiled scanners of a block
(criteo_scan.py, libsvm_scan.py)."""

from __future__ import annotations

import numpy as np


def block_bytes(lines: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(buf, ends): the lines' UTF-8 bytes end to end (uint8), and where each line ends in
    them (int64; line k is buf[ends[k - 1]:ends[k]], 0 before the first)."""
    text = "".join(lines)
    if text.isascii():
        buf = np.frombuffer(text.encode("ascii"), dtype=np.uint8)
        lengths = np.fromiter(map(len, lines), dtype=np.int64, count=len(lines))
    else:  # a scanner leaves such lines to the row parser; the others need their offsets
        encoded = [line.encode("utf-8", "surrogatepass") for line in lines]
        buf = np.frombuffer(b"".join(encoded), dtype=np.uint8)
        lengths = np.fromiter(map(len, encoded), dtype=np.int64, count=len(lines))
    return buf, np.cumsum(lengths)
