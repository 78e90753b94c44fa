"""The held-out examples a mid-run evaluation scores: a bounded sample spread over the set."""

from __future__ import annotations

import torch

from recsync.data.batch import Batch
from recsync.data.held_out import mark_test_set


def held_out(labels: list[float]) -> Batch:
    B = len(labels)
    ids = torch.arange(2 * B, dtype=torch.int64)
    offsets = torch.arange(2 * B + 1, dtype=torch.int64)  # 2 features, one id each
    dense = torch.arange(B, dtype=torch.float32).unsqueeze(1)
    return Batch(dense, ids, offsets, torch.tensor(labels))


def test_a_sample_is_spread_evenly_over_the_set_first_and_last_included():
    test = held_out([float(i % 2) for i in range(100)])
    sample = mark_test_set(test, 5)
    assert sample is not None and sample.batch_size == 5
    assert sample.dense[:, 0].tolist() == [0.0, 25.0, 50.0, 74.0, 99.0]
    assert sample.ids.tolist() == [0, 25, 50, 74, 99, 100, 125, 150, 174, 199]


def test_zero_or_a_set_no_larger_than_asked_is_scored_whole():
    test = held_out([0.0, 1.0] * 10)
    assert mark_test_set(test, 0) is test
    assert mark_test_set(test, 20) is test
    assert mark_test_set(test, 50) is test


def test_no_set_or_one_class_is_nothing_to_score_and_a_one_class_sample_falls_back():
    assert mark_test_set(None, 10) is None
    assert mark_test_set(held_out([1.0] * 10), 5) is None
    lone = held_out([0.0] * 50 + [1.0] + [0.0] * 49)  # samples of 2 see rows 0 and 99
    assert mark_test_set(lone, 2) is lone
    sample = mark_test_set(lone, 3)  # rows 0, 50, 99
    assert sample is not None and sample.batch_size == 3
