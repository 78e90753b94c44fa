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
`RayJob` (runtime/ray/job.py) runs the job; its `Recovery` works on the nodes they share
(`JobNodes`: the spec, topology and actors a rollback makes anew)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import ray

from recsync.coordinator.node_specs import ReaderSpec, ShardSpec, TrainerSpec
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
from recsync.strategy.family import Reports, family_of


class RolledBack(Exception):
    """Every node was rolled back while the job trained: the job starts again."""


@dataclass
class JobNodes:
    """The job's nodes as they run now, which a rollback makes anew: its spec (a
    rollback's resumes from the last cut), topology and actors, the runs of their loops,
    the examples handed out when last polled, what a lost node's replacement needs of
    this start, and what the job does (for an error's message). `RayJob` and its
    `Recovery` share it."""

    spec: JobSpec
    topology: Topology
    hosts: JobActors
    position: int  # examples handed out, from the job's start, when last polled
    doing: str = "starting"
    runs: dict[Any, Address] = field(default_factory=dict)  # a loop's run -> its node
    done: set[Any] = field(default_factory=set)
    replaced: dict[Address, TrainerSpec] = field(default_factory=dict)  # restarted trainers
    reader_ledger: ReaderLedger = field(default_factory=ReaderLedger)  # for a lost reader


@dataclass(frozen=True)
class JobHooks:
    """What a recovery asks of its job: tell the supervisor an event and carry a command
    of its answer, ask a reader, note that actors just started answer, tell the user a
    line, and the seconds since training began."""

    feed: Callable[[Event], None]
    carry: Callable[[Command], None]
    ask_reader: Callable[[Message, Address], Any]
    actors_up: Callable[[], None]
    tell: Callable[[str], None]
    seconds: Callable[[], float]


def new_actors(
    topology: Topology,
    hooks: JobHooks,
    policy: RecoveryPolicy,
    waits: CallWaits,
    first_machines: list[str] | None = None,
    lost: frozenset[str] = frozenset(),
) -> JobActors:
    """The actors of a topology (not started yet), on the machines left (`first_machines`:
    those of the job's first start; `lost`: Ray node ids of machines lost), pinged and
    waiting as the recovery policy says."""
    return JobActors(topology, hooks.actors_up, first_machines, lost, policy.ping_timeout_s, waits)


class Recovery:
    """What a job does on losing a node (module docstring), on the nodes it shares with
    its `RayJob`."""

    def __init__(
        self,
        nodes: JobNodes,
        plan: JobPlan,
        cpus: int,
        policy: RecoveryPolicy,
        waits: CallWaits,
        supervisor: Supervisor,
        scoring: Scoring | None,
        hooks: JobHooks,
    ):
        self.nodes, self.plan, self.cpus = nodes, plan, cpus
        self.policy, self.waits = policy, waits
        self.supervisor, self.scoring, self.hooks = supervisor, scoring, hooks
        self.first_machines = list(nodes.hosts.machine_ips)  # those of the job's first start
        self.recovering: Loss | None = None  # the loss recovered from by the restart under way
        self.lost_machine: str | None = None  # the last lost node's machine, if lost too

    def lost(self, error: NodeFailure, in_flight: bool) -> bool:
        """Tell the supervisor that `error.lost` was lost (`in_flight`: noticed while the
        job trains) and carry out what it says; True: every node was rolled back. Raises
        the error if it is no loss or the job does not recover from it."""
        nodes, tell = self.nodes, self.hooks.tell
        if error.lost is None or error.lost not in {n.address.name for n in nodes.topology.nodes}:
            raise error  # no loss, or of no node (a helper that could not be replaced)
        node = next(n.address for n in nodes.topology.nodes if n.address.name == error.lost)
        suspect = nodes.hosts.machine_id(node)  # its machine may be lost with it
        answers = suspect is None or suspect in machines_answering([suspect])
        self.lost_machine = None if answers else suspect
        position, exact = self._stream_position()
        seconds = self.hooks.seconds()
        event = NodeLost(error.lost, position, exact, seconds, in_flight, answers)
        rolled_back = False
        for command in self.supervisor.handle(event):
            match command:
                case Fail():
                    if command.why is None:  # no recovery policy
                        raise error
                    lost, doing, why = command.node, nodes.doing, command.why
                    raise NotRecovered(error.message, lost, doing, why, command.recovered_from)
                case ReplaceNode():
                    tell(lost_line(command.loss))
                    self._replace(command)
                    tell(recovered_line(command.loss, self.hooks.seconds()))
                case RollBack():
                    tell(lost_line(command.loss))
                    self._roll_back(command.spec)
                    self.recovering = command.loss
                    rolled_back = True
                case AbandonCut():
                    self.hooks.carry(command)
        return rolled_back

    def in_flight(self, step: Callable[[], None]) -> None:
        """`step()` while the job trains: a node it finds lost (NodeFailure) is a loss for
        the supervisor to recover from (RolledBack: every node restarts)."""
        try:
            step()
        except NodeFailure as error:
            if self.lost(error, in_flight=True):
                raise RolledBack from None

    def restarted(self) -> None:
        """Every node is back after a rollback (or the job's first start)."""
        if self.recovering is not None:
            self.hooks.tell(recovered_line(self.recovering, self.hooks.seconds()))
            self.recovering = None

    def _replace(self, command: ReplaceNode) -> None:
        """Replace only the lost node (CPR's partial recovery of an embedding shard, a
        restarted trainer, or a replaced reader) while the others go on."""
        nodes = self.nodes
        nodes.doing = f"replacing {command.node} alone"
        address = next(a.address for a in nodes.topology.nodes if a.address.name == command.node)
        node = nodes.replaced.get(address) or next(
            n for n in nodes.topology.nodes if n.address == address
        )
        if isinstance(node, TrainerSpec):
            self._restart_trainer(node, command)
        elif isinstance(node, ReaderSpec):
            self._replace_reader(node)
        else:
            assert isinstance(node, ShardSpec), node
            nodes.hosts.replace(restored_shard(node, command.back))
        self.hooks.feed(Replaced())
        nodes.doing = "training"

    def _replace_reader(self, node: ReaderSpec) -> None:
        """A lost reader alone is replaced (runtime/ray/reader_recovery.py): its trainers'
        workers wait for their next batch meanwhile."""
        nodes, index = self.nodes, node.address.index
        trainers = [
            nodes.replaced.get(t.address) or t for t in nodes.topology.of_role(Role.TRAINER)
        ]
        mine = [
            t
            for t in trainers
            if isinstance(t, TrainerSpec) and nodes.spec.cluster.reader_of(t.address.index) == index
        ]
        replace_reader(nodes.hosts, node, mine, nodes.reader_ledger, self.supervisor.stop_sent)
        if self.scoring is not None and node.address == READER:
            self.scoring.resample(nodes.hosts)  # the held-out samples it had not given

    def _restart_trainer(self, node: TrainerSpec, command: ReplaceNode) -> None:
        """A lost trainer alone restarts: its replica as its family makes it (EASGD: from
        the center) or from the last cut, and the batches it held handed out again."""
        nodes, address = self.nodes, node.address
        reader = Address(Role.READER, nodes.spec.cluster.reader_of(address.index))
        requeued = self.hooks.ask_reader(Requeue(address.index, node.workers), reader)
        assert isinstance(requeued, Requeued), requeued
        examples = nodes.reader_ledger.requeued(reader.index, address.index, requeued)
        command.loss.replayed_examples = examples
        restarted = restarted_trainer(node, nodes.spec, command.back, self._restart_reports())
        nodes.replaced[address] = restarted
        old_loops = [r for r, a in nodes.runs.items() if a == address and r not in nodes.done]
        nodes.done.update(old_loops)
        for actor in nodes.hosts.restart(restarted):
            nodes.runs[actor.run.remote()] = address
        read_ended(old_loops)

    def _restart_reports(self) -> Reports:
        """The reports a lost trainer's next replica is made from (its family's
        `restart_roles`: EASGD's sync servers), by role, in index order."""
        nodes = self.nodes
        strategy = nodes.spec.strategy
        addresses = [
            n.address
            for role in family_of(strategy).restart_roles(strategy)
            for n in nodes.topology.of_role(role)
        ]
        reports = nodes.hosts.reports(addresses) if addresses else {}
        return lambda role: [reports[a] for a in addresses if a.role == role]

    def _roll_back(self, spec: JobSpec) -> None:
        """Every node goes: the job restarts as `spec` says, on the machines left (the lost
        node's machine left out if it does not answer)."""
        nodes, tell = self.nodes, self.hooks.tell
        lost = frozenset[str]() if self.lost_machine is None else frozenset({self.lost_machine})
        if lost:
            tell("the lost node's machine does not answer: the job goes on without it")
        nodes.hosts.shutdown(lost)
        read_ended([r for r in nodes.runs if r not in nodes.done])
        nodes.runs, nodes.done = {}, set()
        if self.scoring is not None:
            self.scoring.forget()
        nodes.spec = spec
        nodes.position = spec.handed_before
        nodes.replaced.clear()
        nodes.reader_ledger = ReaderLedger()
        nodes.topology = build_topology(spec, self.plan, self.cpus)
        nodes.hosts = new_actors(
            nodes.topology, self.hooks, self.policy, self.waits, self.first_machines, lost
        )
        if nodes.hosts.unpinned:
            roles = ", ".join(nodes.hosts.unpinned)
            tell(f"every machine pinned for {roles} was lost: placed by the rule")

    def _stream_position(self) -> tuple[int, bool]:
        """Examples handed out so far, from the job's start, and whether the count is exact:
        the readers' count if they all still answer, else the last one polled (a lower
        bound)."""
        nodes = self.nodes
        readers = [n.address for n in nodes.topology.of_role(Role.READER)]
        if any(a not in nodes.hosts.actors for a in readers):
            return nodes.position, False
        try:
            message = wire.encode(ReaderProgress())
            refs = [nodes.hosts.actors[a].ask.remote(message) for a in readers]
            replies = ray.get(refs, timeout=PING_TIMEOUT_S)
            return nodes.spec.handed_before + sum(int(reply[0]) for reply in replies), True
        except ray.exceptions.RayError:
            return nodes.position, False


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
