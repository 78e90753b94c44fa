"""Recovering a Ray job from a lost node, as its `RecoveryPolicy` says (coordinator/
recovery.py): replacing only the lost node (an embedding shard restored from the last cut,
a trainer restarted with the batches it held handed out again), or rolling every node back
to the last cut on the machines left. A part of `RayJob` (runtime/ray/job.py), which holds
the job's actors, topology and cuts."""

from __future__ import annotations

import time
from typing import Any

import ray
import torch

from recsync.coordinator.checkpoint import JobState
from recsync.coordinator.evaluation import Evaluations
from recsync.coordinator.family import TrainerSpec
from recsync.coordinator.node_specs import ShardSpec
from recsync.coordinator.recovery import (
    ONE_NODE,
    Loss,
    Recoveries,
    RecoveryPolicy,
    restart_spec,
    restarted_trainer,
    restored_shard,
)
from recsync.coordinator.spec import JobSpec
from recsync.coordinator.topology import Topology, build_topology
from recsync.protocol.address import READER, Address, Role
from recsync.protocol.messages import Message
from recsync.protocol.reading import ReaderProgress, Requeue
from recsync.ps.placement import JobPlan
from recsync.runtime.ray import wire
from recsync.runtime.ray.errors import NodeFailure
from recsync.runtime.ray.evaluator import Scoring
from recsync.runtime.ray.hosts import PING_TIMEOUT_S, JobActors


class Recovering:
    """What a job does on losing a node (mixed into `RayJob`, whose state it reads)."""

    first_spec: JobSpec
    spec: JobSpec
    plan: JobPlan
    cpus: int
    topology: Topology
    hosts: JobActors
    evaluations: Evaluations
    scoring: Scoring | None
    last_cut: JobState | None
    recovery: RecoveryPolicy | None
    recoveries: Recoveries
    replaced: dict[Address, TrainerSpec]
    started: float
    _runs: dict[Any, Any]
    _done: set[Any]
    _position: int
    _stop_sent: bool

    @property
    def before(self) -> int:
        """Examples the job trained before its current start (a rollback's cut)."""
        return self.spec.start_example - self.first_spec.start_example

    def _ask_reader(self, message: Message) -> Any:
        raise NotImplementedError

    def _replace_lost(self, error: NodeFailure) -> bool:
        """Recover from losing one node by replacing only it, if the policy says so for its
        role (CPR's partial recovery of an embedding shard); False: another action's."""
        policy, lost = self.recovery, error.lost
        if lost is None or policy is None or policy.action(lost) not in ONE_NODE:
            return False
        noticed = time.perf_counter() - self.started
        why = policy.refusal(lost, len(self.recoveries.losses))
        if why is not None:
            raise NodeFailure(f"{error.message} ({why})", lost) from None
        address = next(n.address for n in self.topology.nodes if n.address.name == lost)
        node = self.replaced.get(address) or next(
            n for n in self.topology.nodes if n.address == address
        )
        if isinstance(node, TrainerSpec):
            self._restart_trainer(node, lost, noticed)
            return True
        assert isinstance(node, ShardSpec), node
        back = self.last_cut
        position, exact = self._stream_position()
        self.hosts.replace(restored_shard(node, back or self.spec.resume))
        first = self.first_spec.start_example
        back_to = self.spec.start_example if back is None else back.data_position
        loss = Loss(lost, noticed, position - first, back_to - first, exact, action="partial")
        self.recoveries.add(loss)
        return True

    def _restart_trainer(self, node: TrainerSpec, lost: str, noticed: float) -> None:
        """A lost trainer alone restarts: its replica from the center (EASGD) or the last
        cut, and the batches it held handed out again."""
        address = node.address
        position, exact = self._stream_position()
        requeued = int(self._ask_reader(Requeue(address.index, node.workers)))
        back = self.last_cut or self.spec.resume
        restarted = restarted_trainer(node, self.spec, back, self._center())
        self.replaced[address] = restarted
        for ref, where in self._runs.items():
            if where == address:
                self._done.add(ref)  # its old loops: gone
        for actor in self.hosts.restart(restarted):
            self._runs[actor.run.remote()] = address
        first = self.first_spec.start_example
        loss = Loss(lost, noticed, position - first, position - first, exact, "restart", requeued)
        self.recoveries.add(loss)

    def _center(self) -> torch.Tensor | None:
        """The center variable, put together from the sync servers (None: none)."""
        servers = [n.address for n in self.topology.of_role(Role.SYNC_SERVER)]
        if not servers:
            return None
        slices = ray.get([self.hosts.actors[a].report.remote() for a in servers])
        return torch.cat([s.values for s in slices])

    def _recover(self, error: NodeFailure, started: float) -> None:
        """After losing a node: roll every node back to the last cut, on the machines left,
        if the policy says so (else the job ends with the error, and why)."""
        policy = self.recovery
        if error.lost is None or policy is None:
            raise error
        why = policy.refusal(error.lost, len(self.recoveries.losses))
        if why is not None:
            raise NodeFailure(f"{error.message} ({why})", error.lost) from None
        back = self.last_cut
        position, exact = self._stream_position()
        first = self.first_spec.start_example
        back_to = first if back is None else back.data_position
        seconds = time.perf_counter() - started
        loss = Loss(error.lost, seconds, position - first, back_to - first, exact)
        self.recoveries.add(loss)
        self.hosts.shutdown()
        if self.scoring is not None:
            self.scoring.forget()
        self.spec = restart_spec(self.first_spec, back)
        self.topology = build_topology(self.spec, self.plan, self.cpus)
        self.hosts = JobActors(self.topology)
        self.evaluations.new_segment(self.topology, self.before)
        self._stop_sent = False

    def _stream_position(self) -> tuple[int, bool]:
        """Examples handed out so far, from the job's start, and whether the count is exact:
        the reader's count if it still answers, else its last one polled (a lower bound)."""
        try:
            reply = self.hosts.actors[READER].call.remote(wire.encode(ReaderProgress()))
            handed, _ = ray.get(reply, timeout=PING_TIMEOUT_S)
            return self.spec.start_example + int(handed), True
        except ray.exceptions.RayError:
            return self._position, False
