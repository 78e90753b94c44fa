"""A compiled tokenizer of a block of libSVM / libffm lines: the plain lines, their labels
and their tokens, for libsvm_blocks.py to turn into a batch.

A line is plain when it is exactly what the row parser (io/formats/libsvm/rows.py) accepts without a
second look: tokens separated by ASCII whitespace (the bytes str.split() splits on), a
label "0", "1", "-1" or "+1", then tokens `index:value` (libSVM) or `field:index:value`
(libffm) with a field of at most 9 digits below num_fields, an index of 1 to 18 digits,
a value spelled `-?[0-9]+(.[0-9]+)?([eE][-+]?[0-9]+)?`, and no index (libffm: no dense
field, no field:index) twice. Any other line (a comment, a non-ASCII byte, an empty line,
a bad token, ...) is left to the row parser, which accepts or rejects it as it always did.
"""

from __future__ import annotations

import numpy as np

from recsync.ps.hash_index import Array, njit

SPACE = np.zeros(256, dtype=np.bool_)
SPACE[[9, 10, 11, 12, 13, 28, 29, 30, 31, 32]] = True  # what str.split() splits on, in ASCII
COLON, MINUS, PLUS, DOT = 58, 45, 43, 46
MAX_FIELD_DIGITS, MAX_INDEX_DIGITS = 9, 18  # both fit an int64 with room to spare
SMALL_LINE = 16  # tokens up to which duplicates are found by comparing every pair


@njit
def _digits(buf: Array, i: int, end: int) -> int:
    """The position after the run of ASCII digits starting at i."""
    while i < end and 48 <= buf[i] <= 57:
        i += 1
    return i


@njit
def _number_end(buf: Array, i: int, end: int) -> int:
    """The position after a plain number starting at i, or -1 where none starts there."""
    if i < end and buf[i] == MINUS:
        i += 1
    stop = _digits(buf, i, end)
    if stop == i:
        return -1
    i = stop
    if i < end and buf[i] == DOT:
        stop = _digits(buf, i + 1, end)
        if stop == i + 1:
            return -1
        i = stop
    if i < end and (buf[i] == 101 or buf[i] == 69):  # e, E
        i += 1
        if i < end and (buf[i] == MINUS or buf[i] == PLUS):
            i += 1
        stop = _digits(buf, i, end)
        if stop == i:
            return -1
        i = stop
    return i


@njit
def _colon_after_digits(buf: Array, i: int, end: int, most: int) -> int:
    """The position of the ":" after 1 to `most` digits starting at i, or -1."""
    stop = _digits(buf, i, end)
    if stop == i or stop - i > most or stop >= end or buf[stop] != COLON:
        return -1
    return stop


@njit
def _integer(buf: Array, start: int, stop: int) -> int:
    value = 0
    for i in range(start, stop):
        value = value * 10 + (buf[i] - 48)
    return value


@njit
def _label(buf: Array, start: int, stop: int) -> float:
    """1.0 or 0.0 for a plain label token, -1.0 for anything else."""
    first = buf[start]
    if stop - start == 1 and first in (48, 49):
        return float(first - 48)
    if stop - start == 2 and buf[start + 1] == 49 and first in (MINUS, PLUS):
        return 1.0 if first == PLUS else 0.0
    return -1.0


@njit
def _has_duplicate(keys: Array) -> bool:
    if keys.size <= SMALL_LINE:
        for a in range(keys.size):
            for b in range(a):
                if keys[a] == keys[b]:
                    return True
        return False
    ordered = np.sort(keys)
    return bool((ordered[1:] == ordered[:-1]).any())


@njit
def scan_block(buf: Array, ends: Array, num_fields: int, dense_field: Array) -> tuple:  # type: ignore[type-arg]
    """Tokenize the lines of `buf`: line k is buf[ends[k - 1]:ends[k]] (ends[-1] = 0 before
    the first), its newline included.

    num_fields: 0 for libSVM (`index:value`), else libffm's number of fields, with
    dense_field[f] true for a dense field. Returns (plain, labels, token_line,
    token_field, token_index, value_offsets, value_bytes, tokens): the
    first `tokens` tokens, of plain lines only, in line order; token t's value is
    value_bytes[value_offsets[t]:value_offsets[t + 1]].
    """
    n, lines = buf.size, ends.size
    cap = 1
    for i in range(n):
        cap += buf[i] == COLON
    plain = np.zeros(lines, dtype=np.bool_)
    labels = np.zeros(lines, dtype=np.float32)
    token_line = np.empty(cap, dtype=np.int64)
    token_field = np.zeros(cap, dtype=np.int64)
    token_index = np.empty(cap, dtype=np.int64)
    keys = np.empty(cap, dtype=np.uint64)
    value_offsets = np.zeros(cap + 1, dtype=np.int32)
    value_bytes = np.empty(n, dtype=np.uint8)
    t, i = 0, 0
    for line in range(lines):
        end = ends[line]
        first_token, ok, label = t, True, -1.0
        while ok:
            while i < end and SPACE[buf[i]]:
                i += 1
            if i == end:
                break
            if label < 0.0:
                stop = i
                while stop < end and not SPACE[buf[stop]]:
                    stop += 1
                label = _label(buf, i, stop)
                ok = label >= 0.0
                i = stop
                continue
            field = 0
            if num_fields > 0:
                stop = _colon_after_digits(buf, i, end, MAX_FIELD_DIGITS)
                field = _integer(buf, i, stop) if stop >= 0 else num_fields
                if field >= num_fields:
                    ok = False
                    break
                i = stop + 1
            stop = _colon_after_digits(buf, i, end, MAX_INDEX_DIGITS)
            if stop < 0:
                ok = False
                break
            index = _integer(buf, i, stop)
            i = stop + 1
            stop = _number_end(buf, i, end)
            if stop < 0 or (stop < end and not SPACE[buf[stop]]):
                ok = False
                break
            start = value_offsets[t]
            value_bytes[start : start + stop - i] = buf[i:stop]
            value_offsets[t + 1] = start + stop - i
            token_line[t], token_field[t], token_index[t] = line, field, index
            if num_fields > 0 and dense_field[field]:
                keys[t] = np.uint64(field)  # a dense field may occur once, whatever its index
            else:  # (field, index) as one number: a rare false match only sends it row-wise
                keys[t] = np.uint64(index + 1) * np.uint64(max(num_fields, 1)) + np.uint64(field)
            t += 1
            i = stop
        if ok and label >= 0.0 and not _has_duplicate(keys[first_token:t]):
            plain[line], labels[line] = True, label
        else:
            t = first_token
        i = end
    return plain, labels, token_line, token_field, token_index, value_offsets, value_bytes, t
