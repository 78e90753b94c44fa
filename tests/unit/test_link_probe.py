"""`recsync calibrate --network`'s arithmetic (runtime/ray/link_probe.py), without a
cluster: each machine's link from the flows it took part in, the spread of replies that
share a link, and rounds of such replies spaced so that no round shares the link with the
last one's replies."""

from __future__ import annotations

import math

import pytest

from recsync.runtime.ray.link_probe import (
    REPLY_BYTES,
    ROUND_S,
    SHARING_FLOWS,
    LinkMeasures,
    round_spacing_s,
)


def measures(sharing: list[list[float]]) -> LinkMeasures:
    flows = {(0, 1): 3e6, (1, 0): 3e6, (0, 2): 3e6, (2, 0): 3e6, (1, 2): 1e8, (2, 1): 1e8}
    return LinkMeasures(["a", "b", "c"], flows, 2e-4, {1: 3e-4, 2: 4e-4}, sharing)


def test_links_latency_and_spread_from_what_was_measured():
    even = measures([[2e6, 2e6, 2e6, 2e6]] * 3)
    assert even.link_bytes_s() == [3e6, 1e8, 1e8]
    assert even.latency_s() == pytest.approx(7.5e-5)  # the median of 0.5e-4 and 1e-4
    assert even.flow_spread() == 0.0
    uneven = measures([[1e6, 2e6, 1e6, 2e6], [4e6, 2e6, 4e6, 2e6]])  # each about its mean
    expected = math.sqrt(8 * (math.log(2) / 2) ** 2 / (8 - 2))
    assert uneven.flow_spread() == pytest.approx(expected)


def test_rounds_are_spaced_by_the_time_their_replies_take_on_the_link():
    assert round_spacing_s(1.2e8) == ROUND_S  # 1 Gbit/s: a round takes 0.07 s
    slow = 25e6 / 8 * 0.956  # a 25 Mbit/s link's payload
    assert round_spacing_s(slow) == pytest.approx(1.5 * SHARING_FLOWS * REPLY_BYTES / slow)
    assert round_spacing_s(slow) > SHARING_FLOWS * REPLY_BYTES / slow  # the round is over
