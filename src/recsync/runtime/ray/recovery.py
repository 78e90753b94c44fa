"""Recovering a Ray job from a lost node, as its `RecoveryPolicy` says (coordinator/
recovery.py): replacing only the lost node (an embedding shard restored from the last cut,
a trainer restarted with the batches it held handed out again), or rolling every node back
to the last cut on the machines left. A node lost while the job starts, restarts, or
replaces a node is recovered from the same way (a one-node recovery it interrupts gives way
to a rollback); every loss counts against `max_restarts`, and one not recovered from ends
the job with `NotRecovered`, which says what the job was doing and what it recovered
from. A part of `RayJob` (runtime/ray/job.py), which holds the job's actors, topology and
cuts."""

from __future__ import annotations

import contextlib
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
from recsync.runtime.ray.errors import NodeFailure, NotRecovered
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
    doing: str
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

    def _actors_up(self) -> None:
        raise NotImplementedError

    @property
    def _seconds(self) -> float:
        """Seconds since training began (0 before it did)."""
        return time.perf_counter() - self.started if self.started else 0.0

    def _refusal(self, error: NodeFailure) -> NotRecovered | None:
        """The error that ends the job on losing `error.lost`, if the policy refuses to
        recover (None: recover)."""
        assert self.recovery is not None and error.lost is not None
        losses = self.recoveries.losses
        why = self.recovery.refusal(error.lost, len(losses))
        if why is None:
            return None
        return NotRecovered(error.message, error.lost, self.doing, why, [x.node for x in losses])

    def _replace_lost(self, error: NodeFailure) -> bool:
        """Recover from losing one node by replacing only it, if the policy says so for its
        role (CPR's partial recovery of an embedding shard); False: another action's."""
        policy, lost = self.recovery, error.lost
        if lost is None or policy is None or policy.action(lost) not in ONE_NODE:
            return False
        refused = self._refusal(error)
        if refused is not None:
            raise refused from None
        noticed = self._seconds
        self.doing = f"replacing {lost} alone"
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
        first = self.first_spec.start_example
        back_to = self.spec.start_example if back is None else back.data_position
        loss = Loss(lost, noticed, position - first, back_to - first, exact, action="partial")
        self.recoveries.add(loss)
        self.hosts.replace(restored_shard(node, back or self.spec.resume))
        self.doing = "training"
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
        old_loops = [r for r, a in self._runs.items() if a == address and r not in self._done]
        self._done.update(old_loops)
        first = self.first_spec.start_example
        loss = Loss(lost, noticed, position - first, position - first, exact, "restart", requeued)
        self.recoveries.add(loss)
        for actor in self.hosts.restart(restarted):
            self._runs[actor.run.remote()] = address
        _read_ended(old_loops)
        self.doing = "training"

    def _center(self) -> torch.Tensor | None:
        """The center variable, put together from the sync servers (None: none)."""
        servers = [n.address for n in self.topology.of_role(Role.SYNC_SERVER)]
        if not servers:
            return None
        slices = self.hosts.reports(servers)
        return torch.cat([slices[a].values for a in servers])

    def _recover(self, error: NodeFailure) -> None:
        """After losing a node (training, starting, or recovering from an earlier loss):
        roll every node back to the last cut, on the machines left, if the policy says so
        (else the job ends with the error, and why)."""
        if error.lost is None or self.recovery is None:
            raise error
        refused = self._refusal(error)
        if refused is not None:
            raise refused from None
        losses = self.recoveries.losses
        if self.doing.startswith("replacing"):  # the rollback redoes what it was redoing
            losses[-1].action = "superseded"
        back = self.last_cut
        position, exact = self._stream_position()
        first = self.first_spec.start_example
        back_to = first if back is None else back.data_position
        self.recoveries.add(
            Loss(error.lost, self._seconds, position - first, back_to - first, exact)
        )
        self.hosts.shutdown()
        _read_ended([r for r in self._runs if r not in self._done])
        self._runs, self._done = {}, set()
        if self.scoring is not None:
            self.scoring.forget()
        self.spec = restart_spec(self.first_spec, back)
        self._position = self.spec.start_example
        self.replaced.clear()
        self.topology = build_topology(self.spec, self.plan, self.cpus)
        self.hosts = JobActors(self.topology, self._actors_up)
        self.evaluations.new_segment(self.topology, self.before)
        self._stop_sent = False

    def _stream_position(self) -> tuple[int, bool]:
        """Examples handed out so far, from the job's start, and whether the count is exact:
        the reader's count if it still answers, else its last one polled (a lower bound)."""
        if READER not in self.hosts.actors:
            return self._position, False
        try:
            reply = self.hosts.actors[READER].call.remote(wire.encode(ReaderProgress()))
            handed, _ = ray.get(reply, timeout=PING_TIMEOUT_S)
            return self.spec.start_example + int(handed), True
        except ray.exceptions.RayError:
            return self._position, False


def _read_ended(loops: list[Any]) -> None:
    """Read how the loops of killed actors ended (errors that follow from a loss already
    recovered from), so that Ray does not print them as unhandled errors when dropped."""
    if not loops:
        return
    ended, _ = ray.wait(loops, num_returns=len(loops), timeout=PING_TIMEOUT_S)
    for ref in ended:
        with contextlib.suppress(ray.exceptions.RayError):
            ray.get(ref)
