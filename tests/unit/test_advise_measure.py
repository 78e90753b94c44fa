"""`recsync advise`'s loads (app/advise/measure.py node_loads): each role's busiest
resource per node, on the CPU slots that role has in the simulator."""

from __future__ import annotations

import pytest

from recsync.app.advise.measure import SERVER_SLOTS, node_loads
from recsync.runtime.sim.cost import CostModel


def test_each_role_is_loaded_on_its_own_slots():
    summary = {
        "train_seconds": 10.0,
        "num_trainers": 4,
        "workers_per_trainer": 2,
        "num_embedding_servers": 2,
        "cpu_seconds": {"trainers": 40.0, "reader": 9.8, "embedding_servers": 8.0},
        "bytes_sent": {"embedding_servers": 1.25e9},
    }
    cost = CostModel(bandwidth_bytes_s=1.25e8)
    loads = node_loads(summary, cost, readers=1)
    assert loads["trainers"] == pytest.approx(40 / (4 * 2 * 10))
    assert loads["reader"] == pytest.approx(0.98)  # one slot: the reader is the bottleneck
    # a server's CPU on SERVER_SLOTS, its NIC's sending: the NIC is the busier
    assert 8 / (2 * SERVER_SLOTS * 10) < loads["embedding_servers"] == pytest.approx(0.5)
    assert node_loads(summary, cost, readers=2)["reader"] == pytest.approx(0.49)
