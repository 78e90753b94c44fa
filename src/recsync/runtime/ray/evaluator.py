"""Mid-run evaluations on the Ray engine, in a process of their own: the model's held-out
quality is computed there at a low priority (every thread of the process, torch's
included), so that it takes only the CPU training leaves idle."""

from __future__ import annotations

import os
from typing import Any

import ray
import torch

from recsync.coordinator.evaluation import model_quality
from recsync.coordinator.outcome import two_classes
from recsync.coordinator.reader import ReaderReport
from recsync.coordinator.topology import Topology
from recsync.metrics.quality import Quality
from recsync.protocol.address import Address

EVAL_NICE = 10


@ray.remote(num_cpus=0)
class EvaluatorActor:
    """Scores the model that nodes' reports hold on the job's held-out set."""

    def __init__(self, topology: Topology):
        os.nice(EVAL_NICE)
        torch.set_num_threads(1)
        self.topology = topology

    def ready(self) -> bool:
        return True

    def quality(self, reader: ReaderReport, nodes: list[Address], *reports: Any) -> Quality | None:
        """`reports[i]`: the report of `nodes[i]` (object refs, resolved here); scored on
        the reader's held-out set as it is now (None while it is empty: a split of the
        stream holds its first examples out as it goes)."""
        test = reader.test
        if test is None or not two_classes(test):
            return None
        return model_quality(self.topology, dict(zip(nodes, reports, strict=True)), test)
