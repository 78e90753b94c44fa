"""What a driver tells the job's supervisor (events: what it saw) and what the supervisor
answers (commands: what the driver carries out, in order); coordinator/supervisor.py holds
the rules between them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from recsync.coordinator.checkpoint import JobState
from recsync.coordinator.recovery import Loss
from recsync.coordinator.spec import JobSpec
from recsync.coordinator.topology import Topology
from recsync.metrics.quality import Quality
from recsync.protocol.address import Address

# events: what a driver saw


@dataclass(frozen=True)
class Started:
    """Every node of the job (re)started and trains, `topology` built for the current spec;
    `seconds` into training (the driver's own clock)."""

    topology: Topology
    seconds: float


@dataclass(frozen=True)
class Progressed:
    """`handed` examples went out since the job's first start (`total`: the stream's, if
    known), `seconds` into training. `trained`: the examples the model's state stands for
    if not `handed` (the simulator looks before the batch just handed out is trained)."""

    handed: int
    total: int | None
    seconds: float
    trained: int | None = None


@dataclass(frozen=True)
class CutSettled:
    """Every worker parked (or the data ran out: `state` None) after `handed` examples
    since the job's first start; `state`: the job's state at the cut."""

    state: JobState | None
    handed: int
    seconds: float


@dataclass(frozen=True)
class Resumed:
    """The reader goes on after a cut."""


@dataclass(frozen=True)
class Scored:
    """The oldest evaluation under way was scored: the model nodes' `reports`, their
    `quality` (None: the held-out set had no example yet, no record), taken `seconds` into
    training."""

    reports: dict[Address, Any]
    quality: Quality | None
    seconds: float


@dataclass(frozen=True)
class StopAsked:
    """Stop handing out batches (a signal, early stopping), for `reason`."""

    reason: str


@dataclass(frozen=True)
class NodeLost:
    """Node `node` was lost, noticed `seconds` into training, the stream at `position`
    (examples handed out, absolute; `exact` False: a lower bound, the reader is gone too).
    `in_flight`: noticed while the other nodes train on (one node can be replaced alone);
    False: while the job starts, restarts, replaces a node or ends (only a rollback).
    `machine_answers` False: the node's machine does not answer either (lost with it, or
    cut off by a partition, behind which the node may still run)."""

    node: str
    position: int
    exact: bool
    seconds: float
    in_flight: bool = True
    machine_answers: bool = True


@dataclass(frozen=True)
class Replaced:
    """The node being replaced alone is back."""


@dataclass(frozen=True)
class Ended:
    """Every loop ended: nothing more to stop or cut."""


Event = (
    Started | Progressed | CutSettled | Resumed | Scored | StopAsked | NodeLost | Replaced | Ended
)

# commands: what a driver does


@dataclass(frozen=True)
class Evaluate:
    """Score the model as it is now, `seconds` into training, for evaluation mark `mark`
    (examples handed out): take its snapshot now, score it in turn (then feed `Scored`)."""

    seconds: float
    mark: int


@dataclass(frozen=True)
class AwaitScored:
    """Wait until the oldest evaluation under way was scored, and feed its `Scored`."""


@dataclass(frozen=True)
class Record:
    """Hand an evaluation's metrics record on (to the run's metrics)."""

    record: dict[str, Any]


@dataclass(frozen=True)
class PauseReaders:
    """Begin a cut: the reader pauses; feed `CutSettled` once every worker parked."""


@dataclass(frozen=True)
class ResumeReaders:
    """The cut is taken: the reader goes on (then feed `Resumed`)."""


@dataclass(frozen=True)
class AbandonCut:
    """The cut under way is dropped (its reader was lost): resume every reader, the parked
    workers go on; no state is taken."""


@dataclass(frozen=True)
class Checkpoint:
    """Hand a cut's state on (to the checkpoint writer)."""

    state: JobState


@dataclass(frozen=True)
class StopReaders:
    """Tell the reader to stop handing out batches (those in flight finish)."""

    reason: str


@dataclass(frozen=True)
class ReplaceNode:
    """Replace lost node `node` alone (`action`: partial, an embedding shard restored from
    `back`; restart, a trainer restarted from the center or `back` (None: the start), or a
    reader replaced, its stream replayed: coordinator/reader_replay.py)."""

    node: str
    action: str
    back: JobState | None
    loss: Loss


@dataclass(frozen=True)
class RollBack:
    """Restart every node as `spec` says (from the last cut, or the job's start)."""

    spec: JobSpec
    loss: Loss


@dataclass(frozen=True)
class Fail:
    """End the job: losing `node` is not recovered from, `why` (None: no recovery policy);
    `recovered_from` the nodes lost before; `last_cut` the state to `--resume` from."""

    node: str
    why: str | None
    seconds: float
    recovered_from: list[str]
    last_cut: JobState | None


Command = (
    Evaluate
    | AwaitScored
    | Record
    | PauseReaders
    | ResumeReaders
    | AbandonCut
    | Checkpoint
    | StopReaders
    | ReplaceNode
    | RollBack
    | Fail
)
