"""The held-out coin of file data, decidable per raw line (pure arithmetic, numpy).

A coin drawn once per parsed batch in stream order would make whether a row is held depend
on every row parsed before it, so only a reader that parsed the whole stream would know.
Here the coin of a line is a function of (seed, file index, line) alone: the uniform number of the
line is output `line` of the Philox4x64 counter-based generator keyed by (seed, file index)
(numpy's `Philox` bit generator, whose integer stream numpy guarantees; a test pins values),
so any reader decides the lines of its own blocks, whatever the number of readers, in every
epoch and on resume.

A line is a *candidate* when its uniform is below `fraction`. The cap
(`data.test_max_examples`) is decided from the coins alone: the held lines are the
candidates up to and including the `max_examples`-th candidate in (file, line) order
(`held_cutoff`); a held line that is not a good example (skipped, empty) holds nothing, so
the held set may fall short of the cap by the bad lines among the candidates.

Lines are numbered from 0 here (line number 1 of the messages is line 0).

Text files on object storage key a line by the byte it starts at (io/byte_blocks.py): the
bytes of a block are millions, its lines thousands, so there the uniform is drawn at the
lines' starts only (`held_at`): the SplitMix64 finalizer of (seed, file index, position),
also a function of the key alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

_UNIT = 2.0**-53  # uniform = top 53 bits of the 64-bit output
_CUTOFF_CHUNK = 1 << 20  # lines of coins drawn at a time while looking for the cap's line


def _key(seed: int, file_index: int) -> np.ndarray:
    if file_index < 0:
        raise ValueError(f"file index must be >= 0, got {file_index}")
    return np.array([seed % 2**64, file_index], dtype=np.uint64)


def line_uniforms(seed: int, file_index: int, start: int, stop: int) -> np.ndarray:
    """The uniform numbers in [0, 1) (float64) of lines [start, stop) of file `file_index`:
    the same for a line however the range is cut."""
    if not 0 <= start <= stop:
        raise ValueError(f"line range [{start}, {stop}) is not a range of lines")
    skip = start % 4  # Philox gives 4 outputs a counter value: output n is lane n % 4 of n // 4
    bits = np.random.Philox(key=_key(seed, file_index), counter=start // 4)
    raw = bits.random_raw(stop - start + skip)[skip:]
    uniforms: np.ndarray = (raw >> np.uint64(11)).astype(np.float64) * _UNIT
    return uniforms


def candidates(seed: int, file_index: int, start: int, stop: int, fraction: float) -> np.ndarray:
    """Which lines [start, stop) of file `file_index` the coin holds out (bool), the cap aside."""
    if not 0.0 <= fraction < 1.0:
        raise ValueError(f"data.test_fraction must be in [0, 1), got {fraction}")
    if fraction == 0.0:
        return np.zeros(stop - start, dtype=np.bool_)
    mask: np.ndarray = line_uniforms(seed, file_index, start, stop) < fraction
    return mask


@dataclass(frozen=True)
class HeldCutoff:
    """The last line the coin may hold: line `line` (from 0) of file `file_index`; None
    fields: no cutoff (the files hold fewer candidates than the cap)."""

    file_index: int | None
    line: int | None

    def open_lines(self, file_index: int, start: int, stop: int) -> int:
        """How many of lines [start, stop) of file `file_index` lie at or before the
        cutoff (they may be held; the lines after it are never held)."""
        if self.file_index is None or self.line is None or file_index < self.file_index:
            return stop - start
        if file_index > self.file_index:
            return 0
        return max(0, min(stop, self.line + 1) - start)


def held_cutoff(
    seed: int, fraction: float, max_examples: int, line_counts: Sequence[int]
) -> HeldCutoff:
    """The cutoff of the cap: the `max_examples`-th candidate line of the files (their
    lines counted by `line_counts`, in order), found from the coins alone."""
    if max_examples < 1:
        raise ValueError(f"data.test_max_examples must be >= 1, got {max_examples}")
    if fraction == 0.0:
        return HeldCutoff(None, None)
    need = max_examples
    for file_index, count in enumerate(line_counts):
        for start in range(0, count, _CUTOFF_CHUNK):
            stop = min(count, start + _CUTOFF_CHUNK)
            found = np.flatnonzero(candidates(seed, file_index, start, stop, fraction))
            if found.size >= need:
                return HeldCutoff(file_index, start + int(found[need - 1]))
            need -= found.size
    return HeldCutoff(None, None)


_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1, _MIX2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)


def _splitmix(x: np.ndarray) -> np.ndarray:
    x = (x ^ (x >> np.uint64(30))) * _MIX1
    x = (x ^ (x >> np.uint64(27))) * _MIX2
    mixed: np.ndarray = x ^ (x >> np.uint64(31))
    return mixed


def position_uniforms(seed: int, file_index: int, positions: np.ndarray) -> np.ndarray:
    """The uniform numbers in [0, 1) (float64) of the lines starting at `positions` (int,
    from 0) of file `file_index`: each a function of (seed, file index, position)."""
    if file_index < 0:
        raise ValueError(f"file index must be >= 0, got {file_index}")
    with np.errstate(over="ignore"):  # arithmetic modulo 2**64
        key = _splitmix(np.array([seed % 2**64], dtype=np.uint64))
        key = _splitmix(key ^ (np.array([file_index], dtype=np.uint64) * _GOLDEN))
        mixed = _splitmix(positions.astype(np.uint64) * _GOLDEN + key)
    uniforms: np.ndarray = (mixed >> np.uint64(11)).astype(np.float64) * _UNIT
    return uniforms


def held_at(
    seed: int, file_index: int, positions: np.ndarray, fraction: float, cutoff: HeldCutoff
) -> np.ndarray:
    """Which of the lines starting at `positions` of file `file_index` are held out (bool):
    those whose uniform is below `fraction`, at or before the cutoff (a position)."""
    if not 0.0 <= fraction < 1.0:
        raise ValueError(f"data.test_fraction must be in [0, 1), got {fraction}")
    if fraction == 0.0 or positions.size == 0:
        return np.zeros(positions.size, dtype=np.bool_)
    held: np.ndarray = position_uniforms(seed, file_index, positions) < fraction
    if cutoff.file_index is not None and cutoff.line is not None:
        if file_index > cutoff.file_index:
            held[:] = False
        elif file_index == cutoff.file_index:
            held &= positions <= cutoff.line
    return held


def held_lines(
    seed: int, file_index: int, start: int, stop: int, fraction: float, cutoff: HeldCutoff
) -> np.ndarray:
    """Which lines [start, stop) of file `file_index` are held out (bool): candidates at or
    before the cutoff."""
    held = candidates(seed, file_index, start, stop, fraction)
    held[cutoff.open_lines(file_index, start, stop) :] = False
    return held
