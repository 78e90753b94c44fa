"""The readers' shares of one stream: dealt in blocks, positions, resumes onto other counts."""

from __future__ import annotations

import random

import pytest

from recsync.data.shares import Deal, StreamPosition, block_for, readers_for


def owned_examples(deal: Deal, reader: int, total: int) -> list[int]:
    return [x for start, stop in deal.owned(reader, 0, total) for x in range(start, stop)]


def test_one_reader_owns_the_stream_after_its_prefix() -> None:
    deal = Deal(1, 8, StreamPosition(5))
    assert list(deal.owned(0, 0, 40)) == [(5, 40)]
    assert deal.position_after([7]) == StreamPosition(12)


def test_blocks_go_round_robin_and_every_example_once() -> None:
    deal = Deal(3, 4)
    shares = [owned_examples(deal, r, 30) for r in range(3)]
    assert shares[0][:6] == [0, 1, 2, 3, 12, 13]
    assert shares[1][:4] == [4, 5, 6, 7]
    assert sorted(x for share in shares for x in share) == list(range(30))


def test_position_is_a_prefix_once_every_reader_reached_the_same_block() -> None:
    deal = Deal(2, 4)
    assert deal.position_after([4, 4]) == StreamPosition(8)
    assert deal.position_after([6, 4]) == StreamPosition(10)
    assert deal.position_after([4, 6]) == StreamPosition(8, ((12, 14),))
    assert deal.position_after([0, 3]) == StreamPosition(0, ((4, 7),))


def test_handed_counts_every_example_once() -> None:
    deal = Deal(3, 4, StreamPosition(3, ((9, 11),)))
    position = deal.position_after([5, 9, 2])
    assert position.handed == 3 + 2 + 5 + 9 + 2


@pytest.mark.parametrize("seed", range(20))
def test_resumes_onto_any_number_of_readers_hand_out_everything_once(seed: int) -> None:
    rng = random.Random(seed)
    total, base, handed = 300, StreamPosition(), []
    for _ in range(4):  # a job, cut and resumed onto another number of readers, 4 times
        deal = Deal(rng.randint(1, 4), rng.choice([1, 3, 8]), base)
        shares = [owned_examples(deal, r, total) for r in range(deal.num_readers)]
        counts = [rng.randint(0, len(share)) for share in shares]
        for share, count in zip(shares, counts, strict=True):
            handed.extend(share[:count])
        base = deal.position_after(counts)
        assert base.handed == len(handed)
    assert len(set(handed)) == len(handed)
    last = Deal(2, 5, base)
    rest = [x for r in range(2) for x in owned_examples(last, r, total)]
    assert sorted(handed + rest) == list(range(total))


def test_limit_shares_add_up_to_the_limit() -> None:
    deal = Deal(3, 4)
    for limit in range(0, 60):
        shares = [deal.limit_share(r, limit) for r in range(3)]
        assert sum(shares) == limit
        for r in range(3):
            assert len([x for x in owned_examples(deal, r, 100) if x < limit]) == shares[r]


def test_sequence_numbers_batches_as_one_reader_would() -> None:
    deal = Deal(2, 8)  # batches of 4: reader 0 holds batches 0, 1, 4, 5, ...
    assert [deal.sequence(0, 4 * i, 4) for i in range(4)] == [0, 1, 4, 5]
    assert [deal.sequence(1, 4 * i, 4) for i in range(4)] == [2, 3, 6, 7]
    assert [Deal(1, 8).sequence(0, 4 * i, 4) for i in range(4)] == [0, 1, 2, 3]


def test_block_is_whole_batches() -> None:
    assert block_for(64) == 4096
    assert block_for(1000) == 5000
    assert block_for(10_000) == 10_000


def test_default_readers_rule() -> None:
    assert readers_for(4, 2, 64) == 1
    assert readers_for(1000, 500, 64) == 16
    assert readers_for(1000, 4, 64) == 4


def test_no_readers_is_a_mistake() -> None:
    with pytest.raises(ValueError, match="num_readers"):
        Deal(0, 4)
