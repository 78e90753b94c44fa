"""Carrying out, on Ray, what the job's supervisor (coordinator/supervisor.py) says on
losing a node: replacing only the lost node (an embedding shard restored from the last cut,
a trainer restarted with the batches it held handed out again), or rolling every node back
to the last cut on the machines left, or ending the job with `NotRecovered`, which says
what the job was doing and what it recovered from (a reader replaced alone,
runtime/ray/reader_recovery.py, abandons the cut under way). A node lost while the job
starts, restarts or replaces a node is a loss like any other (only a rollback recovers
from it).
Each loss recovered from, and each recovery once done, is told in one line (`on_recovery`:
the CLI's terminal; Ray's own messages meanwhile go to the run's log, runtime/ray/ray_log.py).
A part of `RayJob` (runtime/ray/job.py), which holds the job's actors and topology."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import Any

import ray

from recsync.coordinator.family import Reports, TrainerSpec, family_of
from recsync.coordinator.node_specs import ReaderSpec, ShardSpec
from recsync.coordinator.reader_replay import ReaderLedger
from recsync.coordinator.recovery import Loss, RecoveryPolicy, restarted_trainer, restored_shard
from recsync.coordinator.spec import JobSpec
from recsync.coordinator.supervision import (
    AbandonCut,
    Command,
    Event,
    Fail,
    NodeLost,
    Replaced,
    ReplaceNode,
    RollBack,
)
from recsync.coordinator.supervisor import Supervisor
from recsync.coordinator.topology import Topology, build_topology
from recsync.protocol.address import READER, Address, Role
from recsync.protocol.messages import Message
from recsync.protocol.reading import ReaderProgress, Requeue, Requeued
from recsync.ps.placement import JobPlan
from recsync.runtime.ray.cluster import machines_answering
from recsync.runtime.ray.errors import NodeFailure, NotRecovered
from recsync.runtime.ray.evaluator import Scoring
from recsync.runtime.ray.hosts import JobActors
from recsync.runtime.ray.reader_recovery import replace_reader
from recsync.runtime.timeouts import PING_TIMEOUT_S, CallWaits
from recsync.runtime.transport import wire


class RolledBack(Exception):
    """Every node was rolled back while the job trained: the job starts again."""


class Recovering:
    """What a job does on losing a node (mixed into `RayJob`, whose state it reads)."""

    spec: JobSpec
    plan: JobPlan
    cpus: int
    topology: Topology
    hosts: JobActors
    first_machines: list[str]  # the machines' addresses when the job first started
    policy: RecoveryPolicy
    waits: CallWaits
    scoring: Scoring | None
    supervisor: Supervisor
    replaced: dict[Address, TrainerSpec]
    reader_ledger: ReaderLedger  # what a lost reader's replacement needs, this start
    started: float
    doing: str
    on_recovery: Callable[[str], None] | None
    _recovering: Loss | None  # the loss recovered from by the restart under way
    _lost_machine: str | None  # the Ray node id of the last lost node's machine, if lost too
    _runs: dict[Any, Any]
    _done: set[Any]
    _position: int

    def _ask_reader(self, message: Message, reader: Address = READER) -> Any:
        raise NotImplementedError

    def _actors_up(self) -> None:
        raise NotImplementedError

    def _feed(self, event: Event) -> None:
        raise NotImplementedError

    def _carry(self, command: Command) -> None:
        raise NotImplementedError

    @property
    def _seconds(self) -> float:
        """Seconds since training began (0 before it did)."""
        return time.perf_counter() - self.started if self.started else 0.0

    def _lost(self, error: NodeFailure, in_flight: bool) -> bool:
        """Tell the supervisor that `error.lost` was lost (`in_flight`: noticed while the
        job trains) and carry out what it says; True: every node was rolled back. Raises
        the error if it is no loss or the job does not recover from it."""
        if error.lost is None or error.lost not in {n.address.name for n in self.topology.nodes}:
            raise error  # no loss, or of no node (a helper that could not be replaced)
        node = next(n.address for n in self.topology.nodes if n.address.name == error.lost)
        suspect = self.hosts.machine_id(node)  # its machine may be lost with it
        answers = suspect is None or suspect in machines_answering([suspect])
        self._lost_machine = None if answers else suspect
        position, exact = self._stream_position()
        event = NodeLost(error.lost, position, exact, self._seconds, in_flight, answers)
        rolled_back = False
        for command in self.supervisor.handle(event):
            match command:
                case Fail():
                    if command.why is None:  # no recovery policy
                        raise error
                    lost, doing, why = command.node, self.doing, command.why
                    raise NotRecovered(error.message, lost, doing, why, command.recovered_from)
                case ReplaceNode():
                    self._tell(lost_line(command.loss))
                    self._replace(command)
                    self._tell(recovered_line(command.loss, self._seconds))
                case RollBack():
                    self._tell(lost_line(command.loss))
                    self._roll_back(command.spec)
                    self._recovering = command.loss
                    rolled_back = True
                case AbandonCut():
                    self._carry(command)
        return rolled_back

    def _in_flight(self, step: Callable[[], None]) -> None:
        """`step()` while the job trains: a node it finds lost (NodeFailure) is a loss for
        the supervisor to recover from (RolledBack: every node restarts)."""
        try:
            step()
        except NodeFailure as error:
            if self._lost(error, in_flight=True):
                raise RolledBack from None

    def _tell(self, line: str) -> None:
        if self.on_recovery is not None:
            self.on_recovery(line)

    def _restarted(self) -> None:
        """Every node is back after a rollback (or the job's first start)."""
        if self._recovering is not None:
            self._tell(recovered_line(self._recovering, self._seconds))
            self._recovering = None

    def _replace(self, command: ReplaceNode) -> None:
        """Replace only the lost node (CPR's partial recovery of an embedding shard, a
        restarted trainer, or a replaced reader) while the others go on."""
        self.doing = f"replacing {command.node} alone"
        address = next(n.address for n in self.topology.nodes if n.address.name == command.node)
        node = self.replaced.get(address) or next(
            n for n in self.topology.nodes if n.address == address
        )
        if isinstance(node, TrainerSpec):
            self._restart_trainer(node, command)
        elif isinstance(node, ReaderSpec):
            self._replace_reader(node)
        else:
            assert isinstance(node, ShardSpec), node
            self.hosts.replace(restored_shard(node, command.back))
        self._feed(Replaced())
        self.doing = "training"

    def _replace_reader(self, node: ReaderSpec) -> None:
        """A lost reader alone is replaced (runtime/ray/reader_recovery.py): its trainers'
        workers wait for their next batch meanwhile."""
        index = node.address.index
        trainers = [self.replaced.get(t.address) or t for t in self.topology.of_role(Role.TRAINER)]
        mine = [
            t
            for t in trainers
            if isinstance(t, TrainerSpec) and self.spec.cluster.reader_of(t.address.index) == index
        ]
        replace_reader(self.hosts, node, mine, self.reader_ledger, self.supervisor.stop_sent)
        if self.scoring is not None and node.address == READER:
            self.scoring.resample(self.hosts)  # the held-out samples it had not given

    def _restart_trainer(self, node: TrainerSpec, command: ReplaceNode) -> None:
        """A lost trainer alone restarts: its replica from the center (EASGD) or the last
        cut, and the batches it held handed out again."""
        address = node.address
        reader = Address(Role.READER, self.spec.cluster.reader_of(address.index))
        requeued = self._ask_reader(Requeue(address.index, node.workers), reader)
        assert isinstance(requeued, Requeued), requeued
        examples = self.reader_ledger.requeued(reader.index, address.index, requeued)
        command.loss.replayed_examples = examples
        restarted = restarted_trainer(node, self.spec, command.back, self._restart_reports())
        self.replaced[address] = restarted
        old_loops = [r for r, a in self._runs.items() if a == address and r not in self._done]
        self._done.update(old_loops)
        for actor in self.hosts.restart(restarted):
            self._runs[actor.run.remote()] = address
        read_ended(old_loops)

    def _restart_reports(self) -> Reports:
        """The reports a lost trainer's next replica is made from (its family's
        `restart_roles`: EASGD's sync servers), by role, in index order."""
        strategy = self.spec.strategy
        nodes = [
            n.address
            for role in family_of(strategy).restart_roles(strategy)
            for n in self.topology.of_role(role)
        ]
        reports = self.hosts.reports(nodes) if nodes else {}
        return lambda role: [reports[a] for a in nodes if a.role == role]

    def _roll_back(self, spec: JobSpec) -> None:
        """Every node goes: the job restarts as `spec` says, on the machines left (the lost
        node's machine left out if it does not answer)."""
        lost = frozenset[str]() if self._lost_machine is None else frozenset({self._lost_machine})
        if lost:
            self._tell("the lost node's machine does not answer: the job goes on without it")
        self.hosts.shutdown(lost)
        read_ended([r for r in self._runs if r not in self._done])
        self._runs, self._done = {}, set()
        if self.scoring is not None:
            self.scoring.forget()
        self.spec = spec
        self._position = spec.handed_before
        self.replaced.clear()
        self.reader_ledger = ReaderLedger()
        self.topology = build_topology(spec, self.plan, self.cpus)
        self.hosts = self._new_actors(self.first_machines, lost)
        if self.hosts.unpinned:
            roles = ", ".join(self.hosts.unpinned)
            self._tell(f"every machine pinned for {roles} was lost: placed by the rule")

    def _new_actors(self, first_machines: list[str] | None, lost: frozenset[str]) -> JobActors:
        """The actors of the job's current topology (not started yet), on the machines
        left (`first_machines`: those of the job's first start; `lost`: Ray node ids of
        machines lost), pinged and waiting as the recovery policy says."""
        return JobActors(
            self.topology,
            self._actors_up,
            first_machines,
            lost,
            self.policy.ping_timeout_s,
            self.waits,
        )

    def _stream_position(self) -> tuple[int, bool]:
        """Examples handed out so far, from the job's start, and whether the count is exact:
        the readers' count if they all still answer, else the last one polled (a lower
        bound)."""
        readers = [n.address for n in self.topology.of_role(Role.READER)]
        if any(a not in self.hosts.actors for a in readers):
            return self._position, False
        try:
            message = wire.encode(ReaderProgress())
            refs = [self.hosts.actors[a].ask.remote(message) for a in readers]
            replies = ray.get(refs, timeout=PING_TIMEOUT_S)
            return self.spec.handed_before + sum(int(reply[0]) for reply in replies), True
        except ray.exceptions.RayError:
            return self._position, False


def read_ended(loops: list[Any]) -> None:
    """Read how the loops of killed actors (or calls to them) ended (errors that follow
    from a loss already recovered from), so that Ray does not print them as unhandled
    errors when dropped."""
    if not loops:
        return
    ended, _ = ray.wait(loops, num_returns=len(loops), timeout=PING_TIMEOUT_S)
    for ref in ended:
        with contextlib.suppress(ray.exceptions.RayError):
            ray.get(ref)


def lost_line(loss: Loss) -> str:
    """One line for a loss the job recovers from: which node, where, and what it does."""
    where = f"{loss.position:,} examples in" if loss.exact else f"about {loss.position:,} in"
    does = {
        "rollback": f"every node goes back to {loss.back_to:,} examples",
        "partial": f"it alone comes back from the cut at {loss.back_to:,} examples",
        "restart": "it alone restarts; what it held is handed out again",
    }[loss.action]
    if loss.action == "restart" and loss.node.startswith(READER.name):
        does = "it alone is replaced, replaying the stream; what no worker took goes out"
    return f"lost {loss.node} ({where}, {loss.at_seconds:.1f} s): {does}"


def recovered_line(loss: Loss, seconds: float) -> str:
    """One line once the job recovered from `loss`, `seconds` into training."""
    return f"recovered from losing {loss.node} in {seconds - loss.at_seconds:.1f} s"
