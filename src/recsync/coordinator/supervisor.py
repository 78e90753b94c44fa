"""The rules of a running job, the same on both drivers: events in, commands out.

A driver (runtime/ray/job.py, runtime/sim/job.py and faulty.py) feeds the `Supervisor`
what happened (`Started`, `Progressed`, `CutSettled`, `Resumed`, `Scored`, `StopAsked`,
`NodeLost`, `Replaced`, `Ended`) and carries out the commands it answers with, in order.
The supervisor decides: when to evaluate (coordinator/evaluation.py) and stop early, when
to cut for a checkpoint (coordinator/cuts.py: pause reading, take the cut once every worker
parked, resume), when to stop reading on a signal, and what to do on losing a node
(coordinator/recovery.py: refuse, replace it alone, or roll every node back to the last
cut), with the accounting of each loss. A reader replaced alone abandons the cut under way
(its workers' batches are no longer known until it is back) and no cut begins while a node
is being replaced. It holds no threads, clocks or IO: seconds and positions come in the
events, so a driver's own time (wall or virtual) is its business.

Evaluation marks: the marks the stream goes past (coordinator/evaluation.py) in one
`Progressed` are one `Evaluate` (a snapshot of the model, standing for the last of them:
one model is one record; the marks it stands for besides are counted, the summary's
`evaluation_marks_merged`), each scored in order, its `Scored` one `Record`, none dropped:
at most `MAX_SCORING` are under way (snapshots held: copies of the model), a further one
first waits for the oldest (`AwaitScored`), and the job's end waits for all of them, before
the run's last record (the drivers' `Evaluations.final`, once).

How a driver carries a command is its own: the engine polls the reader and scores an
evaluation in another process (its `Scored` comes later), the simulator evaluates at the
exact mark and hands the state on at once.
"""

from __future__ import annotations

from collections import deque

from recsync.coordinator.checkpoint import JobState
from recsync.coordinator.cuts import CheckpointEvery, CutSchedule
from recsync.coordinator.evaluation import Evaluations
from recsync.coordinator.recovery import (
    ONE_NODE,
    Loss,
    Recoveries,
    RecoveryPolicy,
    restart_spec,
    role_of,
)
from recsync.coordinator.spec import JobSpec
from recsync.coordinator.supervision import (
    AbandonCut,
    AwaitScored,
    Checkpoint,
    Command,
    CutSettled,
    Ended,
    Evaluate,
    Event,
    Fail,
    NodeLost,
    PauseReaders,
    Progressed,
    Record,
    Replaced,
    ReplaceNode,
    Resumed,
    ResumeReaders,
    RollBack,
    Scored,
    Started,
    StopAsked,
    StopReaders,
)
from recsync.protocol.address import Role

MAX_SCORING = 4  # evaluations under way at most: each holds a snapshot (a copy) of the model


class Supervisor:
    """The state of one running job's rules (module docstring): its cut schedule and the
    cut under way, its evaluations and the marks under way, the stop asked for, the last
    cut, the losses."""

    def __init__(
        self,
        first: JobSpec,
        evaluations: Evaluations,
        checkpoint_every: CheckpointEvery | None = None,
        policy: RecoveryPolicy | None = None,
    ):
        if policy is not None:
            policy.check(first.strategy)
        self.first = self.spec = first
        self.evaluations = evaluations
        self.cuts = CutSchedule(checkpoint_every or CheckpointEvery())
        self.policy = policy
        self.recoveries = Recoveries()
        self.last_cut: JobState | None = None
        self.examples_at_cut = 0  # examples handed out since the first start, at `last_cut`
        self.examples_before = 0  # ... before the current start (a rollback's cut's)
        self.cutting = False  # a cut is under way: paused until `Resumed`
        self.stop_reason: str | None = None
        self.stop_sent = False  # to the reader of the current start
        self.replacing = False  # a one-node recovery is under way
        self.ended = False
        self.scoring: deque[int] = deque()  # the marks of the evaluations under way, in order

    @property
    def before(self) -> int:
        """Examples (not stream positions) trained before the current start."""
        return self.examples_before

    def replaceable(self) -> frozenset[Role]:
        """The roles whose lost node may be replaced alone: calls to it wait for its
        replacement (even while the job starts: the loss itself may roll back)."""
        policy = self.policy
        if policy is None:
            return frozenset()
        roles = {Role.EMBEDDING_SERVER} if policy.embedding_server == "partial" else set()
        return frozenset(roles | ({Role.READER} if policy.reader == "restart" else set()))

    def handle(self, event: Event) -> list[Command]:
        """The commands that follow `event`, in the order to carry them out."""
        match event:
            case Started():
                return self._started(event)
            case Progressed():
                return self._progressed(event)
            case CutSettled():
                return self._cut_settled(event)
            case Resumed():
                self.cutting = False
                return []
            case Scored():
                return self._scored(event)
            case StopAsked():
                return self._stop(event.reason)
            case NodeLost():
                return self._lost(event)
            case Replaced():
                self.replacing = False
                return []
            case Ended():
                self.ended = True
                return [AwaitScored() for _ in self.scoring]
        raise AssertionError(f"not an event: {event!r}")

    def _started(self, event: Started) -> list[Command]:
        """A start counts its evaluations and its time to the next cut from here; a stop
        asked for before a rollback holds for the restarted reader too."""
        self.evaluations.new_segment(event.topology, self.before)
        self.cuts.last_seconds = event.seconds
        self.cutting = self.replacing = self.ended = False
        return [] if self.stop_reason is None else self._stop(self.stop_reason)

    def _progressed(self, event: Progressed) -> list[Command]:
        commands: list[Command] = []
        handed, total = event.handed, event.total
        trained = handed if event.trained is None else event.trained
        marks = self.evaluations.passed(handed, trained)
        if marks:  # one snapshot stands for every mark this progress passed: one record
            self.evaluations.merged += len(marks) - 1
            if len(self.scoring) >= MAX_SCORING:
                commands.append(AwaitScored())
            self.scoring.append(marks[-1])
            commands.append(Evaluate(event.seconds, marks[-1]))
        cut = not self.cutting and not self.replacing and handed != total
        if cut and self.cuts.due(handed, event.seconds):
            self.cutting = True
            commands.append(PauseReaders())
        return commands

    def _cut_settled(self, event: CutSettled) -> list[Command]:
        assert self.cutting, "a cut settled that was not begun"
        if event.state is None:
            return [ResumeReaders()]
        self.last_cut = event.state
        self.examples_at_cut = event.handed
        self.cuts.taken(event.handed, event.seconds)
        return [ResumeReaders(), Checkpoint(event.state)]

    def _scored(self, event: Scored) -> list[Command]:
        assert self.scoring, "scored with no evaluation under way"
        self.scoring.popleft()
        if event.quality is None:
            return []
        record = self.evaluations.record(event.reports, event.quality, event.seconds)
        commands: list[Command] = [Record(record)]
        if self.evaluations.stop_now:
            commands += self._stop("early stopping")
        return commands

    def _stop(self, reason: str) -> list[Command]:
        if self.stop_reason is None:
            self.stop_reason = reason
        if self.stop_sent or self.ended:
            return []
        self.stop_sent = True
        return [StopReaders(self.stop_reason)]

    def _lost(self, event: NodeLost) -> list[Command]:
        """Refuse, replace the node alone, or roll back, as the policy says for its role."""
        policy, losses = self.policy, self.recoveries.losses
        why = None if policy is None else policy.refusal(event.node, len(losses))
        if policy is None or why is not None:
            recovered = [loss.node for loss in losses]
            return [Fail(event.node, why, event.seconds, recovered, self.last_cut)]
        action = policy.action(event.node)
        cut_off = not event.machine_answers and role_of(event.node) is Role.TRAINER
        if cut_off:  # it may push on once a partition heals: a rollback fences every node
            action = "rollback"
        if action in ONE_NODE and event.in_flight and not self.replacing:
            loss = self._loss(event, action)
            self.replacing = True
            back = self.last_cut or self.spec.resume
            commands: list[Command] = [ReplaceNode(event.node, action, back, loss)]
            if self.cutting and role_of(event.node) is Role.READER:
                self.cutting = False
                commands.append(AbandonCut())
            return commands
        if self.replacing:  # the rollback redoes what the replacement was redoing
            losses[-1].action = "superseded"
        loss = self._loss(event, "rollback")
        if self.scoring:  # the driver drops the evaluations under way: their marks again
            self.evaluations.again_from(self.scoring[0])
            self.scoring.clear()
        self.spec = restart_spec(self.first, self.last_cut, self.examples_at_cut)
        self.examples_before = self.examples_at_cut  # 0 while no cut was taken
        self.cutting = self.replacing = self.stop_sent = False
        return [RollBack(self.spec, loss)]

    def _loss(self, event: NodeLost, action: str) -> Loss:
        """The loss as the job counts it: where the stream was, where the job goes back to
        (a restarted trainer: nowhere, what it held goes out again)."""
        first = self.first.handed_before
        position = event.position - first
        if action == "restart":
            back_to = position
        elif self.last_cut is not None:
            back_to = self.last_cut.stream_position.handed - first
        else:
            back_to = (self.spec.handed_before if action == "partial" else first) - first
        loss = Loss(event.node, event.seconds, position, back_to, event.exact, action)
        self.recoveries.add(loss)
        return loss
