"""The distributed job in virtual time: the nodes of the job's topology and the real model
math, run on a virtual clock in a deterministic order."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from recsync.coordinator.checkpoint import JobState
from recsync.coordinator.cuts import CheckpointEvery, cut_nodes, cut_state
from recsync.coordinator.evaluation import EarlyStopping, Evaluations, model_quality
from recsync.coordinator.host_traffic import host_traffic
from recsync.coordinator.machines import assign_machines, resolve_pins
from recsync.coordinator.measures import steady_measures
from recsync.coordinator.node_specs import BuildContext
from recsync.coordinator.outcome import JobEnd, finish_job
from recsync.coordinator.reader import ReaderNode
from recsync.coordinator.readers import ReaderGroup
from recsync.coordinator.recovery import RecoveryPolicy
from recsync.coordinator.spec import JobSpec
from recsync.coordinator.supervision import (
    AwaitScored,
    Checkpoint,
    Command,
    CutSettled,
    Evaluate,
    Event,
    PauseReaders,
    Progressed,
    Record,
    Resumed,
    ResumeReaders,
    Scored,
    Started,
    StopReaders,
)
from recsync.coordinator.supervisor import Supervisor
from recsync.coordinator.topology import Topology, build_topology
from recsync.data.held_out import mark_test_set
from recsync.errors import ConfigError
from recsync.protocol import reading
from recsync.protocol.address import Address, Role
from recsync.protocol.messages import Message
from recsync.protocol.reading import HandedBatch
from recsync.ps.placement import JobPlan
from recsync.runtime.sim.clock import Clock, young_collections
from recsync.runtime.sim.cost import CostModel, WorkerSpeeds
from recsync.runtime.sim.dispatch import EffectDispatch
from recsync.runtime.sim.host import SimHost
from recsync.runtime.sim.links import Link
from recsync.runtime.sim.math_modes import assembled, check_math, labelled, summary_of_math
from recsync.runtime.sim.network import Collective, Machine, Network
from recsync.runtime.sim.runner import LoopRunner
from recsync.runtime.sim.transport import Transport


class SimJob:
    """Builds the job's nodes in one process and runs their loops in virtual time."""

    def __init__(
        self,
        spec: JobSpec,
        plan: JobPlan,
        cost: CostModel,
        server_threads: int = 4,
        eval_every: int | None = None,
        on_handed: Callable[[int], None] | None = None,
        on_eval: Callable[[dict[str, Any]], None] | None = None,
        early_stopping: EarlyStopping | None = None,
        keep_best: bool = False,
        checkpoint_every: CheckpointEvery | None = None,
        on_checkpoint: Callable[[JobState], None] | None = None,
        recovery: RecoveryPolicy | None = None,
        supervisor: Supervisor | None = None,
        math: str = "real",
        eval_examples: int = 0,
    ):
        """`server_threads`: CPU slots of a server's machine. `eval_every`: evaluate the
        current model on the test set each time that many more examples were handed out
        (in virtual time, at no cost; coordinator/evaluation.py): `curve`, and each record
        to `on_eval`. `on_handed(n)`: called each time the reader hands out a batch, with
        the examples handed out so far (a progress bar). `checkpoint_every`: cut the job
        (coordinator/cuts.py) as often, each cut's state to `on_checkpoint`. `recovery`: how
        the job recovers from a lost node (runtime/sim/faulty.py loses them). `supervisor`:
        the job's rules (coordinator/supervisor.py), if this run restarts a job that has
        them (its records, cuts and losses go on; `eval_every`, `early_stopping`,
        `keep_best`, `checkpoint_every` and `recovery` are then its own). `math`: "real"
        (the model's math done) or "priced" (its tensors shapes only, no values: the same
        virtual times and events where compute is priced by the cost model, no model
        quality; runtime/sim/math_modes.py). `eval_examples`: held-out examples a mark in
        the middle of the run is scored on (0: all; coordinator/evaluation.py)."""
        check_math(math, spec, eval_every, early_stopping, keep_best, checkpoint_every, recovery)
        self.math = math
        fmt = None if spec.files is None else spec.files.fmt
        num_readers = spec.cluster.readers
        cost = cost.for_model(spec.model).for_data(fmt, spec.train.batch_size, num_readers)
        self.spec, self.plan, self.cost = spec, plan, cost
        self.on_handed = on_handed
        cluster = spec.cluster
        with assembled(math):
            topology = build_topology(spec, plan, cost.shared_cpus or None)
        self.topology = topology
        self.clock = clock = Clock()
        self.speeds = WorkerSpeeds(cost, cluster.hogwild_threads, spec.train.seed)
        self.network = Network(clock, cost, self.speeds.delayed, topology.num_processes())
        context = BuildContext(one_at_a_time=True, labelled=labelled(math))
        self.link_of = self._links(topology)
        self.hosts: dict[Address, SimHost] = {}
        for node_spec in topology.nodes:
            address = node_spec.address
            machine = Machine(
                address.name,
                node_spec.threads or server_threads,
                cost.message_cpu_at(address.role),
                cost.byte_cpu_at(address.role),
                self.link_of[address],
            )
            with assembled(math, address.role):
                node = node_spec.build(context)
            host = SimHost(address, node, machine)
            if node_spec.slowdown > 1.0:
                host.slowdown_at = node_spec.slowdown_at
            self.hosts[address] = host
        readers = []
        for r, host in enumerate(self.hosts_of(Role.READER)):
            assert isinstance(host.node, ReaderNode)
            host.observer = partial(self._handed, r)
            readers.append(host.node)
        self.reader = ReaderGroup(topology, readers)
        self._check_faults(topology)
        self.transport = Transport(clock, self.network, self.hosts)
        collectives = {}
        for members in topology.collectives:
            links = [self.link_of[a] for a in members]
            collective = Collective(clock, cost, len(members), links, self.network.shared)
            collectives.update({a: (collective, rank) for rank, a in enumerate(members)})
        self.dispatch = EffectDispatch(
            clock,
            self.network,
            self.transport,
            self.speeds,
            spec.model.dense_flops_per_example(),
            collectives,
        )
        if supervisor is None:
            evaluations = Evaluations(
                topology, eval_every or 0, early_stopping, keep_best, eval_examples
            )
            supervisor = Supervisor(spec, evaluations, checkpoint_every, recovery)
        self.supervisor = supervisor
        self.on_eval = on_eval
        self.crashed: set[int] = set()
        self.on_checkpoint = on_checkpoint
        self.cut_started: float | None = None  # virtual time the cut under way began
        self.cuts = 0  # cuts begun
        self.cut_seconds = 0.0  # virtual time the reader was paused for cuts
        self.running = 0  # loops started and not ended
        self.runners: dict[Address, list[LoopRunner]] = {}  # each node's loops not ended
        self.final_state: JobState | None = None
        self.handed: list[tuple[float, int]] = []  # (virtual time, examples handed so far)
        self.feed(Started(topology, 0.0))

    def _links(self, topology: Topology) -> dict[Address, Link]:
        """Each node's machine's link: the cost model's machines, the nodes placed on them
        as on the engine (coordinator/machines.py, the job's pins); or a machine each."""
        nodes = [n.address for n in topology.nodes]
        machines = self.cost.machines
        if not machines.count:
            return {a: Link(a.name, self.cost.bandwidth_bytes_s) for a in nodes}
        names = [machines.name(m) for m in range(machines.count)]
        try:
            pins = resolve_pins(self.spec.cluster.placement, names)
        except ValueError as error:
            raise ConfigError(f"cost.machines: {error}") from None
        links = self.network.machine_links(self.spec.train.seed)
        return {a: links[m] for a, m in assign_machines(nodes, machines.count, pins).items()}

    def _machines_summary(self, measures: dict[Address, Any]) -> dict[str, Any]:
        """Where each node ran and what crossed each machine's link (with machines given)."""
        if not self.cost.machines.count:
            return {}
        host_of = {a: link.name for a, link in self.link_of.items()}
        return {
            "machines": self.cost.machines.count,
            "node_hosts": {a.name: name for a, name in host_of.items()},
            "hosts": host_traffic(measures, host_of, self.topology.collectives),
        }

    @property
    def evaluations(self) -> Evaluations:
        return self.supervisor.evaluations

    def feed(self, event: Event) -> None:
        """Tell the supervisor what happened; carry out what it says."""
        for command in self.supervisor.handle(event):
            self._carry(command)

    def _carry(self, command: Command) -> None:
        match command:
            case Evaluate():
                self._evaluate(command.seconds)
            case AwaitScored():
                pass  # every evaluation was scored as it was taken
            case Record():
                if self.on_eval is not None:
                    self.on_eval(command.record)
            case StopReaders():
                self.reader.handle_all(reading.StopReading())  # as at a data limit
            case PauseReaders():
                self.cut_started = self.clock.now
                self.cuts += 1
                self.reader.pause()
            case ResumeReaders():  # once the state was handed over
                self.clock.at(self.clock.now + self.cost.faults.cut_s, self._resume, self.cuts)
            case Checkpoint():
                if self.on_checkpoint is not None:
                    self.on_checkpoint(command.state)
            case _:
                raise AssertionError(f"not a command of a running simulation: {command!r}")

    def hosts_of(self, role: Role) -> list[SimHost]:
        return [h for a, h in self.hosts.items() if a.role is role]

    def nodes_of(self, role: Role) -> list[Any]:
        return [h.node for h in self.hosts_of(role)]

    def run(self) -> dict[str, Any]:
        """Train one pass in virtual time; returns the same summary as the Ray engine."""
        self.start()
        self.advance()
        return self.finish()

    def start(self) -> None:
        """Start every node's loops (at virtual time 0)."""
        faults = self.cost.faults
        for host in self.hosts.values():
            self.start_loops(host, faults.crash_at_s if self._crashes(host.address) else None)

    def start_loops(self, host: SimHost, crash_at: float | None = None) -> None:
        """Start the loops of the node `host` holds (`crash_at`: when they crash)."""
        runners = self.runners.setdefault(host.address, [])
        for spec in host.node.loops():
            runner = LoopRunner(
                self.clock,
                host,
                spec.worker,
                spec.loop,
                self.dispatch,
                crash_at,
                self._loop_ended,
                self._crash,
            )
            runners.append(runner)
            self.running += 1
            runner.start()

    def kill_loops(self, address: Address) -> None:
        """The node at `address` was lost: its loops end now, wherever they were."""
        for runner in self.runners.pop(address, []):
            runner.kill()
            self.running -= 1

    def advance(self, until: float | None = None) -> bool:
        """Run the job in virtual time until `until` (None: to its end); True once every
        loop ended (else the clock stands at `until`)."""
        with young_collections():
            self.clock.run(until=until)
        return not self.running

    def _loop_ended(self, runner: LoopRunner) -> None:
        """A loop ended (its node noted what it must)."""
        self.runners[runner.host.address].remove(runner)
        self.running -= 1

    def finish(self) -> dict[str, Any]:
        """The end of a job whose loops all ended: the summary, the final state."""
        end = self._end()
        with assembled(self.math):  # the final model of priced math is priced too
            summary, self.final_state = finish_job(self.topology, end)
        summary.update(steady_measures(self.handed, *_threads(self.spec)))
        summary.update(self._machines_summary(end.measures))
        summary["cuts"] = {"taken": self.supervisor.cuts.cuts, "paused_seconds": self.cut_seconds}
        self.evaluations.final(summary, self.final_state)
        return summary_of_math(summary, self.math)

    @property
    def curve(self) -> list[dict[str, Any]]:
        """The run's metrics records: one per evaluation, and the end's."""
        return self.evaluations.records

    def _end(self) -> JobEnd:
        for host in self.hosts.values():  # what the cost model charged, as the engine measures
            host.measures.cpu_s["process"] = host.machine.cpu_s
            host.measures.bytes_to.update(host.machine.sent_to)
        lost = [
            handed - trainer.stats.total_examples if t in self.crashed else 0
            for t, (handed, trainer) in enumerate(
                zip(self.reader.handed_examples, self.nodes_of(Role.TRAINER), strict=True)
            )
        ]
        return JobEnd(
            "sim",
            {a: h.node.report() for a, h in self.hosts.items()},
            {a: h.measures for a, h in self.hosts.items()},
            self.clock.now,
            lost,
        )

    def _handed(self, r: int, message: Message, reply: Any) -> None:
        """Reader `r` answered a request: take a cut once every worker parked; mark a batch
        handed out in time, evaluate and begin a cut when due, report progress."""
        if self.supervisor.cutting and self.reader.cut_settled:
            self._take_cut()
        if not isinstance(reply, HandedBatch) or reply.batch is None:
            return
        handed = self.reader.recount(r)  # only a reader's own answer changes its count
        self.handed.append((self.clock.now, handed))
        if self.on_handed is not None:
            self.on_handed(handed)
        handed += self.supervisor.before  # examples since the job's first start
        trained = handed - reply.batch.batch_size  # evaluated before the batch is trained
        self.feed(Progressed(handed, None, self.clock.now, trained))

    def _take_cut(self) -> None:
        """Every worker parked: the model's state holds exactly the batches handed out (or
        the data ran out: no cut)."""
        handed, state = self.reader.total_examples, None
        if self.reader.at_cut:
            reports = {a: self.hosts[a].node.report() for a in cut_nodes(self.topology)}
            state = cut_state(self.topology, reports, self.reader.positions)
        self.feed(CutSettled(state, self.supervisor.before + handed, self.clock.now))

    def _resume(self, cut: int) -> None:
        """The cut's state was handed over (`faults.cut_s` after every worker parked), if
        that cut (`cut`: its count) was not abandoned meanwhile."""
        if cut == self.cuts and self.cut_started is not None:
            self.feed(Resumed())
            self.resume_readers()

    def resume_readers(self) -> None:
        """The readers paused for the cut under way go on, once: its state was handed over,
        or it was abandoned (its reader was lost)."""
        if self.cut_started is not None:
            self.cut_seconds += self.clock.now - self.cut_started
            self.cut_started = None
        self.reader.handle_all(reading.ResumeReading())
        self.transport.changed.fire()  # the parked workers' requests re-check

    def _evaluate(self, seconds: float) -> None:
        """Quality of the model as it is now, at the exact mark (in no virtual time)."""
        nodes = Evaluations.nodes(self.topology)
        reports = {a: self.hosts[a].node.report() for a in nodes}
        # None: no usable held-out set yet (a split of the stream fills it as it goes)
        test = mark_test_set(self.reader.test_set(), self.evaluations.mark_examples)
        quality = None if test is None else model_quality(self.topology, reports, test)
        self.feed(Scored(reports, quality, float(seconds)))

    def _crashes(self, address: Address) -> bool:
        faults = self.cost.faults
        return address.role is Role.TRAINER and faults.crash_trainer == address.index

    def _check_faults(self, topology: Topology) -> None:
        crash = self.cost.faults.crash_trainer
        if crash is None:
            return
        cluster = self.spec.cluster
        if crash >= cluster.num_trainers:
            raise ValueError(
                f"faults.crash_trainer {crash}: the job has {cluster.num_trainers} trainers"
            )
        if topology.collectives:
            raise ValueError(
                f"faults.crash_trainer: {self.spec.strategy.describe()} all-reduces among "
                "its nodes; a crash would stop the job (the Ray engine reports it as a node "
                "failure)"
            )

    def _crash(self, runner: LoopRunner) -> None:
        """A crashed loop: a worker's batch is lost; the others learn it is gone."""
        self.runners[runner.host.address].remove(runner)
        self.running -= 1
        host = runner.host
        self.crashed.add(host.address.index)
        if runner.worker is None:
            return
        self.reader.of_trainer(host.address.index).worker_left()
        if self.supervisor.cutting and self.reader.cut_settled:
            self._take_cut()
        worker, transport = runner.worker, self.transport
        gone = host.node.leave(worker)
        if gone:
            transport.after_drain(worker, lambda _: transport.tell(host, gone))


def _threads(spec: JobSpec) -> tuple[int, int]:
    """(batch size, worker threads): what a steady window's length is counted in."""
    return spec.train.batch_size, spec.cluster.num_trainers * spec.cluster.workers_per_trainer
