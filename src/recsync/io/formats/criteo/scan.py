"""A compiled scanner of a block of Criteo lines: the plain lines, their labels, counts and
hexadecimal ids, for criteo_blocks.py to turn into a batch.

A line is plain when the row parser (io/formats/criteo/rows.py) reads it without a second look and
its numbers fit a machine word: after its trailing "\\r" and "\\n" are cut, a non-empty
line of at most num_fields tab-separated fields (fewer: the missing ones are empty), a
label "0" or "1", integers that are empty or `-?[0-9]+` with at most 19 digits after
leading zeros, ids that are empty or `[0-9a-fA-F]+` with at most 16 after leading zeros.
Any other line (an empty line, a bad value, a longer number, a non-ASCII byte, ...) is
left to the row parser, which accepts or rejects it as it always did.
"""

from __future__ import annotations

import numpy as np

from recsync.ps.hash_index import Array, njit

TAB, CR, LF, MINUS = 9, 13, 10, 45
MAX_INTEGER_DIGITS, MAX_HEX_DIGITS = 19, 16  # digits after leading zeros: a uint64 holds them
_HEX_VALUE = np.full(256, -1, dtype=np.int64)
for _digit, _char in enumerate("0123456789abcdef"):
    _HEX_VALUE[ord(_char)] = _HEX_VALUE[ord(_char.upper())] = _digit


@njit
def _field_end(buf: Array, i: int, stop: int) -> int:
    while i < stop and buf[i] != TAB:
        i += 1
    return i


@njit
def _leading_zeros_end(buf: Array, i: int, end: int) -> int:
    """The position after the zeros starting at i, keeping the last digit of a zero."""
    while i < end - 1 and buf[i] == 48:
        i += 1
    return i


@njit
def _count(buf: Array, i: int, end: int) -> tuple[bool, np.uint64]:
    """Whether the field is a plain integer, and its value clipped to >= 0 (what the dense
    feature takes)."""
    negative = buf[i] == MINUS
    if negative:
        i += 1
    if i == end:
        return False, np.uint64(0)
    i = _leading_zeros_end(buf, i, end)
    if end - i > MAX_INTEGER_DIGITS:
        return False, np.uint64(0)
    value = np.uint64(0)
    for j in range(i, end):
        digit = buf[j] - 48
        if digit < 0 or digit > 9:
            return False, np.uint64(0)
        value = value * np.uint64(10) + np.uint64(digit)
    return True, np.uint64(0) if negative else value


@njit
def _hex(buf: Array, i: int, end: int, hex_value: Array) -> tuple[bool, np.uint64]:
    i = _leading_zeros_end(buf, i, end)
    if end - i > MAX_HEX_DIGITS:
        return False, np.uint64(0)
    value = np.uint64(0)
    for j in range(i, end):
        digit = hex_value[buf[j]]
        if digit < 0:
            return False, np.uint64(0)
        value = (value << np.uint64(4)) | np.uint64(digit)
    return True, value


@njit
def _scan(
    buf: Array, ends: Array, num_integer: int, num_categorical: int, hex_value: Array
) -> tuple:  # type: ignore[type-arg]
    lines, num_fields = ends.size, 1 + num_integer + num_categorical
    plain = np.zeros(lines, dtype=np.bool_)
    labels = np.zeros(lines, dtype=np.float32)
    counts = np.zeros((lines, num_integer), dtype=np.uint64)
    ids = np.zeros((lines, num_categorical), dtype=np.uint64)
    present = np.zeros((lines, num_categorical), dtype=np.bool_)
    start = 0
    for line in range(lines):
        stop = ends[line]
        while stop > start and (buf[stop - 1] == LF or buf[stop - 1] == CR):
            stop -= 1
        ok, field, i = stop > start, 0, start
        while ok and i <= stop:
            end = _field_end(buf, i, stop)
            if field >= num_fields:
                ok = False
            elif field == 0:
                ok = end - i == 1 and (buf[i] == 48 or buf[i] == 49)
                labels[line] = buf[i] - 48 if ok else 0
            elif end > i and field <= num_integer:
                ok, counts[line, field - 1] = _count(buf, i, end)
            elif end > i:
                f = field - 1 - num_integer
                ok, ids[line, f] = _hex(buf, i, end, hex_value)
                present[line, f] = ok
            field, i = field + 1, end + 1
        plain[line] = ok
        start = ends[line]
    return plain, labels, counts, ids, present


def scan_block(
    buf: np.ndarray, ends: np.ndarray, num_integer: int, num_categorical: int
) -> tuple[np.ndarray, ...]:
    """Scan the lines of `buf`: line k is buf[ends[k - 1]:ends[k]] (0 before the first),
    its newline included. Returns (plain, labels, counts, ids, present): per line, whether
    it is plain, and for a plain line its label (float32), its integers clipped to >= 0
    (empty: 0; lines x num_integer uint64), its ids as unsigned integers (lines x
    num_categorical uint64) and which of them are given (bool). The rows of other lines
    hold anything."""
    scanned: tuple[np.ndarray, ...] = _scan(buf, ends, num_integer, num_categorical, _HEX_VALUE)
    return scanned
