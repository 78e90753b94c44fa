"""The distributed job on Ray: one actor per node of the job's topology, watched until the
loops end; then the same end of job as the simulator's (coordinator/outcome.py).

While it trains, the job's supervisor (coordinator/supervisor.py) says when to evaluate,
cut, stop, and what to do on losing a node; this driver feeds it what it sees (the reader's
progress, polled: more often as an evaluation mark nears; evaluations scored in order in
another process; lost actors) and carries out its commands (its `Recovery`, recovery.py,
for a loss, on the nodes they share: `JobNodes`)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import ray

from recsync.coordinator.checkpoint import JobState
from recsync.coordinator.cuts import CheckpointEvery, cut_nodes, cut_state
from recsync.coordinator.evaluation import EarlyStopping, Evaluations
from recsync.coordinator.measures import answer_times, steady_measures
from recsync.coordinator.outcome import JobEnd, finish_job
from recsync.coordinator.readers import pause_together
from recsync.coordinator.recovery import Recoveries, RecoveryPolicy, account
from recsync.coordinator.spec import JobSpec, plan_for
from recsync.coordinator.supervision import (
    AbandonCut,
    AwaitScored,
    Checkpoint,
    Command,
    CutSettled,
    Ended,
    Evaluate,
    Event,
    PauseReaders,
    Progressed,
    Record,
    Resumed,
    ResumeReaders,
    Started,
    StopAsked,
    StopReaders,
)
from recsync.coordinator.supervisor import Supervisor
from recsync.coordinator.topology import Topology, build_topology
from recsync.protocol import reading
from recsync.protocol.address import READER, Address, Role
from recsync.protocol.messages import Message
from recsync.protocol.reading import AwaitCut, ReaderProgress
from recsync.ps.placement import JobPlan
from recsync.runtime.ray.cluster import check_machines_answer, cluster_facts, connect
from recsync.runtime.ray.errors import NodeFailure, failure
from recsync.runtime.ray.evaluator import Scoring
from recsync.runtime.ray.host_summary import machines_summary
from recsync.runtime.ray.hosts import JobActors
from recsync.runtime.ray.polls import Polls
from recsync.runtime.ray.reader_calls import ask_reader, ask_readers, reply_of
from recsync.runtime.ray.recovery import (
    JobHooks,
    JobNodes,
    Recovery,
    RolledBack,
    new_actors,
    read_ended,
)
from recsync.runtime.timeouts import CallWaits
from recsync.runtime.transport import wire

__all__ = ["RayJob", "connect", "run_job"]


Progress = Callable[[int, int | None, float], None]
OnEval = Callable[[dict[str, Any]], None]
OnCheckpoint = Callable[[JobState], None]
OnRecovery = Callable[[str], None]


class RayJob:
    """One training job on Ray actors, one per node of its topology."""

    def __init__(
        self,
        spec: JobSpec,
        plan: JobPlan,
        eval_every: int = 0,
        early_stopping: EarlyStopping | None = None,
        keep_best: bool = False,
        checkpoint_every: CheckpointEvery | None = None,
        recovery: RecoveryPolicy | None = None,
        eval_examples: int = 0,
    ):
        self.first_spec = spec
        self.plan = plan
        cpus = int(ray.cluster_resources().get("CPU", 0))  # type: ignore[no-untyped-call]
        self.policy = policy = recovery or RecoveryPolicy()  # and failure detection's settings
        waits = CallWaits(policy.call_timeout_s, policy.replace_wait_s)
        self.pings: list[float] = []  # seconds each round of pings took to be answered
        hooks = JobHooks(
            self._feed,
            self._carry,
            self._ask_reader,
            self._actors_up,
            self._tell,
            self._since_start,
        )
        topology = build_topology(spec, plan, cpus)
        hosts = new_actors(topology, hooks, policy, waits)
        self.nodes = JobNodes(spec, topology, hosts, position=spec.handed_before)
        self.on_actors_up: Callable[[RayJob], None] | None = None  # a hook for fault injection
        self.final_state: JobState | None = None
        self.stop_reason: str | None = None  # set from a signal handler: stop reading
        evaluations = Evaluations(
            self.topology, eval_every, early_stopping, keep_best, eval_examples
        )
        self.supervisor = Supervisor(spec, evaluations, checkpoint_every, recovery)
        self.scoring = (
            Scoring(self.topology, evaluations.mark_examples, self._tell) if eval_every else None
        )
        self.recovery = Recovery(
            self.nodes, plan, cpus, policy, waits, self.supervisor, self.scoring, hooks
        )
        self.on_eval: OnEval | None = None
        self.on_checkpoint: OnCheckpoint | None = None
        self.on_recovery: OnRecovery | None = None  # a line per loss and per recovery
        self.cut_seconds = 0.0  # time the reader was paused for cuts
        self._last_ping = 0.0
        self.polls = Polls()
        self._paused = 0.0  # when the cut under way paused the reader (perf_counter)
        self.started = 0.0  # when training began (perf_counter); losses count from it

    @property
    def spec(self) -> JobSpec:
        return self.nodes.spec

    @property
    def topology(self) -> Topology:
        return self.nodes.topology

    @property
    def hosts(self) -> JobActors:
        return self.nodes.hosts

    def _since_start(self) -> float:
        """Seconds since training began (0 before it did)."""
        return time.perf_counter() - self.started if self.started else 0.0

    def _tell(self, line: str) -> None:
        if self.on_recovery is not None:
            self.on_recovery(line)

    @property
    def evaluations(self) -> Evaluations:
        return self.supervisor.evaluations

    @property
    def recoveries(self) -> Recoveries:
        return self.supervisor.recoveries

    @property
    def last_cut(self) -> JobState | None:
        return self.supervisor.last_cut

    @property
    def before(self) -> int:
        """Examples the job trained before its current start (a rollback's cut)."""
        return self.supervisor.before

    def _actors_up(self) -> None:
        """Actors just started answer (the job's start, a restart, a replaced node)."""
        if self.on_actors_up is not None:
            self.on_actors_up(self)

    def request_stop(self, reason: str) -> None:
        """Stop handing out batches (safe from a signal handler: the watch loop sends it)."""
        self.stop_reason = reason

    def _ask_reader(self, message: Message, reader: Address = READER) -> Any:
        return ask_reader(self.hosts, reader, message)

    def _ask_readers(self, message: Message) -> list[Any]:
        readers = [n.address for n in self.topology.of_role(Role.READER)]
        return ask_readers(self.hosts, readers, message)

    def _feed(self, event: Event) -> None:
        """Tell the supervisor what happened; carry out what it says."""
        for command in self.supervisor.handle(event):
            self._carry(command)

    def _carry(self, command: Command) -> None:
        match command:
            case Evaluate():
                assert self.scoring is not None
                self.scoring.start(self.hosts, command.seconds)  # scored in the background
            case AwaitScored():
                self._await_scored()
            case Record():
                if self.on_eval is not None:
                    self.on_eval(command.record)
            case StopReaders():
                self._ask_readers(reading.StopReading())
            case PauseReaders():
                self._cut()
            case ResumeReaders():
                self._ask_readers(reading.ResumeReading())
                self.cut_seconds += time.perf_counter() - self._paused
                self._feed(Resumed())
            case AbandonCut():  # its reader was lost, and replaced: the others go on
                self._ask_readers(reading.ResumeReading())
                self.cut_seconds += time.perf_counter() - self._paused
            case Checkpoint():
                if self.on_checkpoint is not None:
                    self.on_checkpoint(command.state)
            case _:
                raise AssertionError(f"a loss's command outside a loss: {command!r}")

    def _watch(self, looping: list[Any], on_progress: Progress | None, started: float) -> None:
        actors = self.hosts
        self.nodes.runs = {actor.run.remote(): a for a in looping for actor in actors.actors_of(a)}
        self.nodes.done = set()
        self._last_ping = time.perf_counter()
        while self._training():
            if self.stop_reason is not None:  # asked by a signal handler
                self._feed(StopAsked(self.stop_reason))
            mark = None if self.scoring is None else self.evaluations.next_mark
            self._check_runs(wait_s=self.polls.wait_s(mark))
            self.recovery.in_flight(lambda: self._poll(on_progress, started))
        self._poll(on_progress, started)  # the marks passed since the last poll

    def _training(self) -> bool:
        """Some node's loops still run."""
        return len(self.nodes.done) < len(self.nodes.runs)

    def _poll(self, on_progress: Progress | None, started: float) -> None:
        """Ask the readers how far they went; tell the progress bar and the supervisor; record
        the evaluations scored meanwhile."""
        replies = self._ask_readers(ReaderProgress())
        total = replies[0][1]
        self.nodes.position = self.spec.handed_before + sum(p for p, _, _ in replies)
        handed = sum(examples for _, _, examples in replies) + self.before
        total = None if total is None else total + self.before
        seconds = time.perf_counter() - started
        self.polls.polled(handed, seconds, self.before)
        if on_progress is not None:
            on_progress(handed, total, handed / max(seconds, 1e-9))
        self._feed(Progressed(handed, total, seconds))
        while self.scoring is not None and self.scoring.oldest_done():
            self._feed(self.scoring.oldest())

    def _await_scored(self) -> None:
        """Wait until the oldest evaluation under way was scored (watching the nodes while
        they train: a loss is recovered from as any) and record it."""
        assert self.scoring is not None
        while self._training() and not self.scoring.oldest_done(timeout=0.05):
            self._check_runs(wait_s=0.0)
        self._feed(self.scoring.oldest())

    def _check_runs(self, wait_s: float) -> None:
        """Wait up to `wait_s` for a node's loops to end; a failed one is a loss, for the
        supervisor to recover from (RolledBack: every node restarts). Every actor is
        pinged now and then (a dead one is named)."""
        self.recovery.in_flight(lambda: self._check_loops(wait_s))

    def _check_loops(self, wait_s: float) -> None:
        runs, done = self.nodes.runs, self.nodes.done
        ready, _ = ray.wait([r for r in runs if r not in done], num_returns=1, timeout=wait_s)
        for ref in ready:
            try:
                ray.get(ref)
            except (ray.exceptions.RayTaskError, ray.exceptions.RayActorError) as error:
                raise self.hosts.explained(failure(runs[ref].name, error)) from None
            done.add(ref)
        if time.perf_counter() - self._last_ping > self.policy.ping_every_s:
            began = time.perf_counter()
            self.hosts.check_alive()
            self._last_ping = time.perf_counter()
            self.pings.append(self._last_ping - began)

    def _cut(self) -> None:
        """A checkpoint while the job trains (coordinator/cuts.py): pause the reader, wait
        until every worker parked (watching for failures meanwhile), take the model's
        reports; the supervisor then says to resume and hand the state on."""
        readers = [n.address for n in self.topology.of_role(Role.READER)]
        self._paused = time.perf_counter()
        pause_together(self._ask_readers)
        at_cut = [self.hosts.actors[a].ask.remote(wire.encode(AwaitCut())) for a in readers]
        while len(ray.wait(at_cut, num_returns=len(at_cut), timeout=0)[0]) < len(at_cut):
            self._check_runs(wait_s=0.01)
            if not self.supervisor.cutting:  # abandoned: a reader was lost and replaced
                read_ended(at_cut)
                return
        handed = [reply_of(ref, a) for ref, a in zip(at_cut, readers, strict=True)]
        state = None
        if all(h is not None for h in handed):
            reports = self.hosts.reports(cut_nodes(self.topology))
            state = cut_state(self.topology, reports, handed)
        examples = sum(reply[2] for reply in self._ask_readers(ReaderProgress()))
        self._feed(CutSettled(state, self.before + examples, self.polls.polled_s))

    def run(self, on_progress: Progress | None = None) -> dict[str, Any]:
        """Train one pass; returns the summary (measures and held-out quality)."""
        while True:
            try:
                looping = self._start()
                if not self.started:
                    self.started = time.perf_counter()
                self.nodes.doing = "training"
                self.recovery.restarted()
                self._feed(Started(self.topology, self._since_start()))
                self._watch(looping, on_progress, self.started)
                train_seconds = time.perf_counter() - self.started
                reports = self.hosts.reports(list(self.hosts.actors))  # a loss now is one too
                measures = {a: self.hosts.measures(a) for a in self.hosts.actors}
                break
            except RolledBack:
                continue
            except NodeFailure as error:  # in a start, a recovery, or after the loops ended
                self.recovery.lost(error, in_flight=False)
        self._feed(Ended())  # every evaluation under way is scored and recorded
        end = JobEnd("ray", reports, measures, train_seconds)
        try:
            summary, self.final_state = finish_job(self.topology, end)
        except ValueError as error:
            raise NodeFailure(str(error)) from None
        self.evaluations.final(summary, self.final_state)
        account(summary, self.supervisor.before, self.recoveries, train_seconds)
        summary["cuts"] = {
            "taken": self.supervisor.cuts.cuts,
            "paused_seconds": round(self.cut_seconds, 3),
        }
        if self.scoring is not None:
            summary["recovery"]["evaluator_restarts"] = self.scoring.restarts
        summary["recovery"]["pings"] = answer_times(self.pings)
        summary.update(steady_measures(self.polls.progress, *_threads(self.spec)))
        summary.update(machines_summary(self.hosts, measures, self.topology.collectives))
        return summary

    def _start(self) -> list[Any]:
        """Start every node (the job's first start, or a rollback's restart)."""
        losses = self.recoveries.losses
        doing = "starting" if not losses else f"restarting after losing {losses[-1].node}"
        self.nodes.doing = doing
        if self.scoring is not None:
            self.scoring.launch()
        looping = self.hosts.start(self.supervisor.replaceable())
        if self.scoring is not None:
            self.scoring.ready(self.hosts)
        return looping

    def shutdown(self) -> None:
        self.hosts.shutdown()
        if self.scoring is not None:
            self.scoring.shutdown()


def run_job(
    spec: JobSpec,
    address: str | None = None,
    num_cpus: int | None = None,
    on_progress: Progress | None = None,
    on_start: Callable[[RayJob], None] | None = None,
    eval_every: int = 0,
    on_eval: OnEval | None = None,
    early_stopping: EarlyStopping | None = None,
    keep_best: bool = False,
    checkpoint_every: CheckpointEvery | None = None,
    on_checkpoint: OnCheckpoint | None = None,
    recovery: RecoveryPolicy | None = None,
    on_recovery: OnRecovery | None = None,
    eval_examples: int = 0,
) -> dict[str, Any]:
    """Plan, start, train (evaluating every `eval_every` examples handed out, on
    `eval_examples` of the held-out set (0: all; the end's on all): each record to
    `on_eval`; cutting as `checkpoint_every` says: each cut's state to `on_checkpoint`;
    recovering from a lost node as `recovery` says, None: never, a line per loss and per
    recovery to `on_recovery`), evaluate, stop. Starts (and stops) a local Ray if no
    address."""
    started_ray = connect(address, num_cpus)
    if not started_ray:
        check_machines_answer()
    job = RayJob(
        spec,
        plan_for(spec),
        eval_every,
        early_stopping,
        keep_best,
        checkpoint_every,
        recovery,
        eval_examples,
    )
    job.on_eval = on_eval
    job.on_checkpoint = on_checkpoint
    job.on_recovery = on_recovery
    try:
        if on_start is not None:
            on_start(job)
        return job.run(on_progress) | {"ray": cluster_facts(address)}
    finally:
        job.shutdown()
        if started_ray:
            ray.shutdown()


def _threads(spec: JobSpec) -> tuple[int, int]:
    """(batch size, worker threads): what a steady window's length is counted in."""
    return spec.train.batch_size, spec.cluster.num_trainers * spec.cluster.workers_per_trainer
