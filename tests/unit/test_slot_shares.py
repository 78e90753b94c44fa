"""The claim of docs/design-file-shares.md that data/shares.py's `Deal` works when its unit
is a *slot* instead of an example: line block k of L lines is slots [kL, (k+1)L),
its m_k examples (unknown until the block is parsed) fill its first m_k slots, and a reader
that hands out the last example of a piece of its share counts the piece's empty slots as
consumed. Cut at random points and resumed onto other numbers of readers, every example
(block, index in block) is handed out exactly once; and each reader's count alone tells
where it stands."""

from __future__ import annotations

import random

import pytest

from recsync.data.shares import Deal, StreamPosition

Example = tuple[int, int]  # (line block, index of the example among the block's)


def share_pieces(deal: Deal, reader: int, total_slots: int) -> list[tuple[int, int]]:
    """The reader's share in slots, cut at line-block boundaries (a piece lies in one block)."""
    size = deal.block
    pieces = []
    for start, stop in deal.owned(reader, 0, total_slots):
        while start < stop:
            end = min(stop, (start // size + 1) * size)
            pieces.append((start, end))
            start = end
    return pieces


def hand_out(
    pieces: list[tuple[int, int]], size: int, examples: list[int], budget: int
) -> tuple[list[Example], int]:
    """Up to `budget` examples of the pieces, in order, and the reader's count in slots of
    its share after them (the empty slots of a piece whose examples it all handed count)."""
    handed: list[Example] = []
    count = 0
    for start, stop in pieces:
        block = start // size
        first, last = start - block * size, min(stop - block * size, examples[block])
        for index in range(first, max(first, last)):
            if len(handed) == budget:
                return handed, count
            handed.append((block, index))
            count += 1
        count += (stop - start) - max(0, last - first)  # the piece's empty slots
    return handed, count


@pytest.mark.parametrize("seed", range(25))
def test_slot_positions_hand_out_every_example_once_across_resumes(seed: int) -> None:
    rng = random.Random(seed)
    size = rng.choice([1, 4, 8])  # lines a block
    examples = [rng.randint(0, size) for _ in range(rng.randint(5, 40))]  # good, not held
    total = size * len(examples)
    base, handed = StreamPosition(), []
    for run in range(5):  # a job, cut and resumed onto another number of readers
        deal = Deal(rng.randint(1, 4), size, base)
        counts = []
        for reader in range(deal.num_readers):
            pieces = share_pieces(deal, reader, total)
            budget = 10**9 if run == 4 else rng.randint(0, 3 * size)
            got, count = hand_out(pieces, size, examples, budget)
            handed += got
            counts.append(count)
        base = deal.position_after(counts)
    assert sorted(handed) == [(k, j) for k, m in enumerate(examples) for j in range(m)]
    assert len(set(handed)) == len(handed)
    assert base.handed == total  # every slot consumed at the end


def test_a_blocks_examples_keep_their_slots_after_a_cut_inside_it() -> None:
    """A cut after 2 of a block's 3 examples; resumed, the block's third example is slot 2
    of it, whichever reader now owns it."""
    deal = Deal(2, 4)
    pieces = share_pieces(deal, 0, 16)  # blocks 0 and 2
    got, count = hand_out(pieces, 4, [3, 4, 3, 1], budget=2)
    assert got == [(0, 0), (0, 1)] and count == 2
    position = deal.position_after([count, 0])
    assert position == StreamPosition(2)
    resumed = Deal(3, 4, position)
    owners = {r: share_pieces(resumed, r, 16) for r in range(3)}
    assert owners[0][:2] == [(2, 4), (12, 16)]  # the rest of block 0, then block 3
    # the stream's own blocks are dealt, not what is left afresh: block 1 is reader 1's
    # alone and block 2 reader 2's, each parsed by one reader
    assert owners[1][:1] == [(4, 8)] and owners[2][:1] == [(8, 12)]
