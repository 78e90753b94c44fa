"""The per-line held-out coin (data/line_coin.py): a function of (seed, file, line) alone,
whatever way the lines are cut; uniform and independent enough; and the cap decided from
the coins alone."""

from __future__ import annotations

import numpy as np
import pytest

from recsync.data.line_coin import (
    HeldCutoff,
    candidates,
    held_cutoff,
    held_lines,
    line_uniforms,
)


def test_a_lines_number_does_not_depend_on_the_range_it_is_drawn_in():
    whole = line_uniforms(7, 2, 0, 1000)
    for start, stop in [(0, 1), (1, 2), (3, 17), (5, 999), (998, 1000), (400, 400)]:
        assert np.array_equal(line_uniforms(7, 2, start, stop), whole[start:stop])
    pieces = [line_uniforms(7, 2, a, min(1000, a + 13)) for a in range(0, 1000, 13)]
    assert np.array_equal(np.concatenate(pieces), whole)


def test_the_numbers_are_pinned():
    """numpy keeps Philox's raw stream stable; if it ever changed, which rows are held out
    would change silently: this fails first."""
    assert line_uniforms(0, 0, 0, 3).tolist() == pytest.approx(
        [0.011546754286331562, 0.24154919656271812, 0.11142585551493822], abs=0, rel=1e-15
    )


def test_seeds_and_files_draw_different_numbers():
    base = line_uniforms(1, 0, 0, 100)
    assert not np.array_equal(base, line_uniforms(2, 0, 0, 100))
    assert not np.array_equal(base, line_uniforms(1, 1, 0, 100))
    assert np.array_equal(line_uniforms(-1, 0, 0, 10), line_uniforms(2**64 - 1, 0, 0, 10))


def test_uniform_and_independent_roughly():
    n = 200_000
    u = line_uniforms(3, 0, 0, n)
    assert ((u >= 0) & (u < 1)).all()
    assert abs(u.mean() - 0.5) < 4 * (1 / 12 / n) ** 0.5
    counts = np.bincount((u * 20).astype(np.int64), minlength=20)
    chi2 = float(((counts - n / 20) ** 2 / (n / 20)).sum())
    assert chi2 < 45  # 19 degrees of freedom: p < 0.001 above 43.8
    bound = 4 / n**0.5  # correlations of independent draws: about 1 / sqrt(n)
    assert abs(np.corrcoef(u[:-1], u[1:])[0, 1]) < bound  # neighbour lines
    assert abs(np.corrcoef(u, line_uniforms(3, 1, 0, n))[0, 1]) < bound  # same line, next file
    assert abs(np.corrcoef(u, line_uniforms(4, 0, 0, n))[0, 1]) < bound  # next seed


def test_candidates_come_at_the_fraction():
    held = candidates(5, 0, 0, 100_000, 0.02)
    assert abs(held.mean() - 0.02) < 4 * (0.02 * 0.98 / 100_000) ** 0.5
    assert not candidates(5, 0, 0, 100, 0.0).any()
    with pytest.raises(ValueError, match="test_fraction"):
        candidates(5, 0, 0, 10, 1.0)


def test_the_cap_is_the_max_examples_th_candidate_in_file_and_line_order():
    counts, seed, fraction = [300, 0, 50, 2000], 9, 0.1
    order = [(f, line) for f, n in enumerate(counts) for line in range(n)]
    flags = np.concatenate([candidates(seed, f, 0, n, fraction) for f, n in enumerate(counts)])
    every = [at for at, flag in zip(order, flags, strict=True) if flag]
    for cap in (1, 5, 30, len(every)):
        cutoff = held_cutoff(seed, fraction, cap, counts)
        assert (cutoff.file_index, cutoff.line) == every[cap - 1]
        held = np.concatenate(
            [held_lines(seed, f, 0, n, fraction, cutoff) for f, n in enumerate(counts)]
        )
        assert int(held.sum()) == cap
        assert [at for at, h in zip(order, held, strict=True) if h] == every[:cap]
    assert held_cutoff(seed, fraction, len(every) + 1, counts) == HeldCutoff(None, None)
    assert held_cutoff(seed, 0.0, 5, counts) == HeldCutoff(None, None)


def test_the_cutoff_holds_whatever_way_the_lines_are_cut():
    cutoff = held_cutoff(1, 0.3, 40, [500])
    whole = held_lines(1, 0, 0, 500, 0.3, cutoff)
    cut = [held_lines(1, 0, a, min(500, a + 37), 0.3, cutoff) for a in range(0, 500, 37)]
    assert np.array_equal(np.concatenate(cut), whole) and int(whole.sum()) == 40
