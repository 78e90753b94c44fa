"""The simulator's commands run torch on one thread and give the process its threads back."""

from __future__ import annotations

import torch

from recsync.app.runs.simulate import simulator_threads


def test_one_thread_inside_the_block_and_the_count_before_it_after() -> None:
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        with simulator_threads():
            assert torch.get_num_threads() == 1
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
