"""Shares dealt by the stream's own blocks (data/shares.py): after a cut, every block read
by one reader, every unit once, and positions that resume onto any number of readers."""

from __future__ import annotations

import random

import pytest
from test_slot_shares import hand_out, share_pieces

from recsync.data.shares import Deal, StreamPosition, left_pieces


def units(ranges) -> list[int]:
    return [x for start, stop in ranges for x in range(start, stop)]


def random_base(rng: random.Random, total: int) -> StreamPosition:
    prefix = rng.randint(0, total // 3)
    cuts = sorted(rng.sample(range(prefix + 1, total), 2 * rng.randint(0, 3)))
    pairs = [(cuts[i], cuts[i + 1]) for i in range(0, len(cuts), 2)]
    return StreamPosition(prefix, tuple(p for p in pairs if p[0] < p[1]))


def test_left_pieces_leave_out_what_was_handed() -> None:
    base = StreamPosition(3, ((6, 8), (10, 11)))
    assert left_pieces(base, 0, 12) == [(3, 6), (8, 10), (11, 12)]
    assert left_pieces(base, 4, 7) == [(4, 6)]
    assert left_pieces(base, 6, 8) == []


@pytest.mark.parametrize("seed", range(30))
def test_every_unit_left_is_one_readers_and_every_block_one_readers(seed: int) -> None:
    rng = random.Random(seed)
    size, total = rng.choice([1, 3, 8]), 120
    deal = Deal(rng.randint(1, 4), size, random_base(rng, total))
    shares = [deal.owned(r, 0, total) for r in range(deal.num_readers)]
    every = sorted(x for share in shares for x in units(share))
    assert every == units(left_pieces(deal.base, 0, total))
    for reader, share in enumerate(shares):
        flat = units(share)
        assert all((x // size) % deal.num_readers == reader for x in flat)  # its blocks only
        for count in range(len(flat) + 1):
            assert units(deal.handed(reader, count)) == flat[:count]


@pytest.mark.parametrize("seed", range(25))
def test_cut_and_resumed_onto_other_counts_every_example_once(seed: int) -> None:
    rng = random.Random(seed)
    size = rng.choice([1, 4, 8])
    examples = [rng.randint(0, size) for _ in range(rng.randint(5, 40))]
    total = size * len(examples)
    base, handed = StreamPosition(), []
    for run in range(5):
        deal = Deal(rng.randint(1, 4), size, base)
        counts, parsed = [], set()
        for reader in range(deal.num_readers):
            pieces = share_pieces(deal, reader, total)  # cut at the blocks' boundaries
            budget = 10**9 if run == 4 else rng.randint(0, 3 * size)
            got, count = hand_out(pieces, size, examples, budget)
            handed += got
            counts.append(count)
            blocks = {start // size for start, _ in pieces}
            assert not blocks & parsed  # no block is two readers'
            parsed |= blocks
        base = deal.position_after(counts)
    assert sorted(handed) == [(k, j) for k, m in enumerate(examples) for j in range(m)]
    assert base.handed == total


def test_epochs_are_dealt_by_their_global_block_numbers() -> None:
    """Epoch e is units e S + [0, S), S a whole number of blocks: the p-th block of epoch e
    is global block e S / L + p, reader (e S / L + p) mod R's; a base inside epoch 1 leaves
    the rest of both epochs, every unit once, and a resume ends at 2 S."""
    size, blocks, readers = 4, 5, 3
    one_pass = size * blocks
    base = StreamPosition(one_pass + 6, ((one_pass + 9, one_pass + 12),))
    deal = Deal(readers, size, base)
    shares = [deal.owned(r, 0, 2 * one_pass) for r in range(readers)]
    assert sorted(x for share in shares for x in units(share)) == units(
        left_pieces(base, 0, 2 * one_pass)
    )
    for reader, share in enumerate(shares):
        for x in units(share):
            epoch, place = divmod(x // size, blocks)
            assert epoch == 1 and (epoch * blocks + place) % readers == reader
    counts = [len(units(share)) for share in shares]
    assert deal.position_after(counts) == StreamPosition(2 * one_pass)
    half = deal.position_after([n // 2 for n in counts])
    assert one_pass + 6 <= half.prefix < half.handed < 2 * one_pass
