"""Mid-run evaluations on the Ray engine, in a process of their own: the model's held-out
quality is computed there at a low priority (every thread of the process, torch's
included), so that it takes only the CPU training leaves idle."""

from __future__ import annotations

import importlib
import os
from typing import Any

import ray
import torch

from recsync.coordinator.evaluation import Evaluations, model_quality
from recsync.coordinator.outcome import two_classes
from recsync.coordinator.reader import ReaderReport
from recsync.coordinator.topology import Topology
from recsync.metrics.quality import Quality
from recsync.protocol.address import READER, Address
from recsync.runtime.ray.errors import failure
from recsync.runtime.ray.hosts import START_TIMEOUT_S, JobActors

EVAL_NICE = 10


@ray.remote(num_cpus=0)
class EvaluatorActor:
    """Scores the model that nodes' reports hold on the job's held-out set."""

    def __init__(self, topology: Topology):
        os.nice(EVAL_NICE)
        torch.set_num_threads(1)
        self.topology = topology
        importlib.import_module("sklearn.metrics")  # AUC's: now, while the nodes start

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


class Scoring:
    """Mid-run evaluations of a job: at most one under way, scored by an evaluator actor
    (started before training: it imports torch) on copies of the model nodes' reports."""

    def __init__(self, topology: Topology):
        self.topology = topology
        self.actor: Any = None
        self._under_way: tuple[Any, list[Address], list[Any], float] | None = None

    def launch(self) -> None:
        """Start the evaluator actor (once), without waiting: its process starts while the
        nodes' do."""
        if self.actor is None:
            self.actor = EvaluatorActor.remote(self.topology)  # type: ignore[attr-defined]

    def ready(self) -> None:
        """Wait until the evaluator actor answers (started if it was not)."""
        self.launch()
        ray.get(self.actor.ready.remote(), timeout=START_TIMEOUT_S)

    def start(self, hosts: JobActors, seconds: float) -> None:
        """Score the model as it is now, `seconds` into training, while training goes on (a
        mark that comes while one is scored is skipped)."""
        if self._under_way is not None:
            return
        nodes = Evaluations.nodes(self.topology)
        refs = [hosts.actors[a].report.remote() for a in nodes]
        reader = hosts.actors[READER].report.remote()
        quality = self.actor.quality.remote(reader, nodes, *refs)
        self._under_way = (quality, nodes, refs, seconds)

    def result(self, wait: bool) -> tuple[Quality, dict[Address, Any], float] | None:
        """The evaluation under way once scored (`wait`: wait for it): its quality, the
        reports it scored and when; None if none is done, or none had a held-out example."""
        if self._under_way is None:
            return None
        quality, nodes, refs, seconds = self._under_way
        if not wait and not ray.wait([quality], timeout=0)[0]:
            return None
        self._under_way = None
        try:
            scored = ray.get(quality)
        except (ray.exceptions.RayTaskError, ray.exceptions.RayActorError) as error:
            raise failure("evaluator", error) from None
        if scored is None:
            return None  # no held-out example yet
        return scored, dict(zip(nodes, ray.get(refs), strict=True)), seconds

    def forget(self) -> None:
        """Drop the evaluation under way (the actors it read from are gone)."""
        self._under_way = None

    def shutdown(self) -> None:
        if self.actor is not None:
            ray.kill(self.actor, no_restart=True)
            self.actor = None
