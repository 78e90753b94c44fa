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


def test_a_speed_slice_gives_every_reader_blocks_and_every_thread_batches():
    from recsync.app.advise.advice import AdviseOptions, speed_slice
    from recsync.app.advise.candidates import Candidate
    from recsync.data.shares import block_for

    options = AdviseOptions(slice_examples=1000)

    def candidate(trainers: int, readers: int | None) -> Candidate:
        return Candidate("easgd", trainers, 2, 2, 1, {}, {"name": "easgd"}, 10, readers)

    block = block_for(256)
    assert speed_slice(options, candidate(2, None), 256, 10**9) == 4 * block  # the job's: 1
    assert speed_slice(options, candidate(2, 4), 256, 10**9) == 4 * 4 * block
    assert speed_slice(options, candidate(16, 1), 256, 10**9) == 6 * 32 * 256
    assert speed_slice(options, candidate(2, 4), 256, 5000) == 5000  # never past the data
