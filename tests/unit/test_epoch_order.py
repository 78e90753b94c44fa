"""A later epoch's order under line shares (data/epoch_order.py): epoch 0 in order, later
epochs a permutation of the line blocks seeded by (seed, epoch) and of each block's examples
seeded by (seed, epoch, block), the same on every call (a resumed owner recomputes it)."""

from __future__ import annotations

import pytest

from recsync.data.epoch_order import block_order, example_order


def test_epoch_zero_is_in_order() -> None:
    assert block_order(3, 0, 6).tolist() == list(range(6))
    assert example_order(3, 0, 2, 5).tolist() == list(range(5))


def test_later_epochs_are_permutations_drawn_from_the_seed_epoch_and_block() -> None:
    orders = {
        (seed, epoch): block_order(seed, epoch, 50).tolist() for seed in (0, 1) for epoch in (1, 2)
    }
    assert all(sorted(order) == list(range(50)) for order in orders.values())
    assert len({tuple(order) for order in orders.values()}) == 4  # each (seed, epoch) its own
    assert block_order(0, 1, 50).tolist() == orders[0, 1]  # recomputed alike
    within = [example_order(0, 1, block, 40).tolist() for block in range(3)]
    assert all(sorted(order) == list(range(40)) for order in within)
    assert within[0] != within[1] != within[2] != within[0]
    assert example_order(0, 2, 0, 40).tolist() != within[0]
    assert example_order(0, 1, 1, 40).tolist() == within[1]


def test_pinned_values() -> None:
    """numpy's PCG64 and `Generator.permutation` as of numpy 2.4: a change of either would
    change a resumed job's later epochs (its checkpoint's slots would name other examples)."""
    assert block_order(0, 1, 8).tolist() == [0, 5, 6, 2, 1, 7, 3, 4]
    assert block_order(1, 1, 8).tolist() == [7, 3, 0, 2, 5, 4, 1, 6]
    assert example_order(0, 1, 3, 10).tolist() == [6, 7, 0, 5, 3, 9, 8, 4, 2, 1]


def test_negative_counts_are_refused() -> None:
    with pytest.raises(ValueError, match="must be >= 0"):
        block_order(0, 1, -1)
    with pytest.raises(ValueError, match="must be >= 0"):
        example_order(0, -1, 0, 3)
