"""Mid-run evaluations on the Ray engine, in a process of their own on the driver's machine
(the reports it scores cross no other link): the model's held-out quality is computed
there at a low priority (every thread of the process, torch's
included), so that it takes only the CPU training leaves idle."""

from __future__ import annotations

import dataclasses
import importlib
import os
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import ray
import torch
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from recsync.coordinator.evaluation import Evaluations, model_quality
from recsync.coordinator.supervision import Scored
from recsync.coordinator.topology import Topology
from recsync.metrics.quality import Quality
from recsync.protocol.address import READER, Address
from recsync.protocol.reading import HeldOutSample
from recsync.runtime.ray.errors import NodeFailure, failure
from recsync.runtime.ray.hosts import JobActors
from recsync.runtime.timeouts import START_TIMEOUT_S
from recsync.runtime.transport import wire

EVAL_NICE = 10
MAX_EVALUATOR_RESTARTS = 3  # a job's evaluator lost more often ends the job


@dataclass(frozen=True)
class _UnderWay:
    """An evaluation under way: the evaluator's answer to come, the nodes whose reports
    (snapshots, `refs`) it scores on `test` (the reader's sample), taken `seconds` into
    training."""

    quality: Any
    nodes: list[Address]
    refs: list[Any]
    test: Any
    seconds: float


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

    def pid(self) -> int:
        return os.getpid()

    def quality(self, test: Any, nodes: list[Address], *reports: Any) -> Quality | None:
        """`reports[i]`: the report of `nodes[i]` (object refs, resolved here), scored on
        `test`: the reader's reply to `HeldOutSample` (None while it has no set to score:
        a split of the stream holds its first examples out as it goes)."""
        test = wire.decode(test)
        if test is None:
            return None
        return model_quality(self.topology, dict(zip(nodes, reports, strict=True)), test)


class Scoring:
    """Mid-run evaluations of a job, scored in order by an evaluator actor (started before
    training: it imports torch) on snapshots of the model nodes' reports (object refs: the
    copies stay in Ray's object store until scored). How many are under way at once is the
    job's supervisor's to bound (coordinator/supervisor.py, MAX_SCORING)."""

    def __init__(
        self,
        topology: Topology,
        mark_examples: int = 0,
        tell: Callable[[str], None] = lambda line: None,
    ):
        self.topology, self.mark_examples, self.tell = topology, mark_examples, tell
        self.actor: Any = None
        self.restarts = 0  # of the evaluator actor, lost while it scored
        self._under_way: deque[_UnderWay] = deque()

    def launch(self) -> None:
        """Start the evaluator actor (once), without waiting: its process starts while the
        nodes' do."""
        if self.actor is None:
            here = ray.get_runtime_context().get_node_id()  # beside the driver
            options = EvaluatorActor.options(  # type: ignore[attr-defined]
                scheduling_strategy=NodeAffinitySchedulingStrategy(here, soft=False)
            )
            self.actor = options.remote(self.topology)

    def ready(self, hosts: JobActors) -> None:
        """Wait until the evaluator actor answers (started if it was not), and have the
        reader make (or read) its held-out set now, before training: the first mark does
        not wait for it."""
        self.launch()
        sample = hosts.actors[READER].ask.remote(wire.encode(HeldOutSample(self.mark_examples)))
        while True:
            try:
                ray.get(self.actor.ready.remote(), timeout=START_TIMEOUT_S)
                break
            except ray.exceptions.RayActorError as error:  # lost while starting: again
                self.restarts += 1
                if self.restarts > MAX_EVALUATOR_RESTARTS:
                    why = f"the evaluator was lost {self.restarts} times; the last: {error}"
                    raise NodeFailure(why) from None
                self.tell(f"lost the evaluator as it started ({error}); starting another")
                self.actor = None
                self.launch()
            except (ray.exceptions.RayError, ray.exceptions.GetTimeoutError) as error:
                why = f"the evaluator did not start on the driver's machine: {error}"
                raise NodeFailure(why) from None
        try:
            ray.get(sample, timeout=START_TIMEOUT_S)
        except (ray.exceptions.RayTaskError, ray.exceptions.RayActorError) as error:
            raise failure(READER.name, error) from None

    def start(self, hosts: JobActors, seconds: float) -> None:
        """Snapshot the model as it is now, `seconds` into training, and score it after
        those under way (the actor takes its calls in order) while training goes on."""
        nodes = Evaluations.nodes(self.topology)
        refs = [hosts.actors[a].report.remote() for a in nodes]
        sample = wire.encode(HeldOutSample(self.mark_examples))
        test = hosts.actors[READER].ask.remote(sample)  # only the sample crosses
        quality = self.actor.quality.remote(test, nodes, *refs)
        self._under_way.append(_UnderWay(quality, nodes, refs, test, seconds))

    def oldest_done(self, timeout: float = 0.0) -> bool:
        """Whether the oldest evaluation under way was scored (waiting up to `timeout`)."""
        if not self._under_way:
            return False
        return bool(ray.wait([self._under_way[0].quality], timeout=timeout)[0])

    def oldest(self) -> Scored:
        """The oldest evaluation under way, once scored (waits for it): the reports it
        scored, their quality (None: no held-out example yet), and when it was taken. A
        lost evaluator is started again and scores what was under way; a node lost with its
        report is a NodeFailure naming it (the job's recovery takes it)."""
        while True:
            oldest = self._under_way[0]
            try:
                scored = ray.get(oldest.quality)
                break
            except ray.exceptions.RayActorError as error:
                if not self._is_evaluator(error):
                    raise self._lost_report(oldest, error) from None
                self._restart(error)
            except ray.exceptions.RayTaskError as error:
                raise failure("evaluator", error) from None
            except ray.exceptions.ObjectLostError as error:
                raise self._lost_report(oldest, error) from None
        self._under_way.popleft()
        if scored is None:
            return Scored({}, None, oldest.seconds)
        reports = dict(zip(oldest.nodes, ray.get(oldest.refs), strict=True))
        return Scored(reports, scored, oldest.seconds)

    def _is_evaluator(self, error: ray.exceptions.RayActorError) -> bool:
        """Whether `error` says the evaluator actor itself died (not a node whose report
        it was to score)."""
        actor_id = getattr(error, "actor_id", None)
        if isinstance(actor_id, bytes):
            actor_id = actor_id.hex()
        return self.actor is not None and actor_id == self.actor._actor_id.hex()

    def _restart(self, error: BaseException) -> None:
        """The evaluator died: a new one, on the driver's machine, scores every evaluation
        under way again (their snapshots are the driver's objects: they survived)."""
        self.restarts += 1
        if self.restarts > MAX_EVALUATOR_RESTARTS:
            raise NodeFailure(
                f"the evaluator (the process scoring mid-run evaluations, on the driver's "
                f"machine) was lost {self.restarts} times; the last: {error}"
            )
        self.tell(
            f"lost the evaluator ({error}); starting another, which scores again the "
            f"{len(self._under_way)} evaluation(s) under way"
        )
        self.actor = None
        self.launch()
        ray.get(self.actor.ready.remote(), timeout=START_TIMEOUT_S)
        for i, run in enumerate(self._under_way):
            quality = self.actor.quality.remote(run.test, run.nodes, *run.refs)
            self._under_way[i] = dataclasses.replace(run, quality=quality)

    @staticmethod
    def _lost_report(run: _UnderWay, error: BaseException) -> NodeFailure:
        """The failure of the first node whose report (or, the reader, held-out sample) for
        `run` is gone with it."""
        for node, ref in [*zip(run.nodes, run.refs, strict=True), (READER, run.test)]:
            try:
                ray.get(ref, timeout=START_TIMEOUT_S)
            except (ray.exceptions.RayError, ray.exceptions.GetTimeoutError) as lost:
                return failure(node.name, lost)
        return failure("evaluator", error)

    def resample(self, hosts: JobActors) -> None:
        """The reader was replaced alone: every evaluation under way whose held-out sample
        it had not given takes its sample from the replacement (the same one), and is
        scored again."""
        sample = wire.encode(HeldOutSample(self.mark_examples))
        for i, run in enumerate(self._under_way):
            if ray.wait([run.test], timeout=0)[0]:
                try:
                    ray.get(run.test)
                    continue
                except ray.exceptions.RayError:
                    pass
            test = hosts.actors[READER].ask.remote(sample)
            quality = self.actor.quality.remote(test, run.nodes, *run.refs)
            self._under_way[i] = dataclasses.replace(run, quality=quality, test=test)

    def forget(self) -> None:
        """Drop the evaluations under way (the actors they read from are gone)."""
        self._under_way.clear()

    def shutdown(self) -> None:
        if self.actor is not None:
            ray.kill(self.actor, no_restart=True)
            self.actor = None
