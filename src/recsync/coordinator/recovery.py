"""What a distributed job does when it loses a node, and the accounting of what it redid.

A node is lost when its process dies, its machine leaves the cluster, or it stops answering.
The job then either stops (an error naming the node; the last checkpoint taken while it
trained stays, to `--resume` from) or rolls back: every node restarts from the job's last
cut (coordinator/cuts.py), or from the job's start if none was taken yet, and the reader
hands out again every batch that came after it. A cut holds exactly the batches handed out
before it, so nothing is lost and every batch handed out between the cut and the loss is
trained a second time: it is counted as replayed. A node's own error (a diverged worker,
bad data) always ends the job: a restart would repeat it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import asdict, dataclass, field
from typing import Any

from recsync.coordinator.checkpoint import JobState
from recsync.coordinator.spec import JobSpec
from recsync.protocol.address import Role

ACTIONS = ("rollback", "stop")


@dataclass(frozen=True)
class RecoveryPolicy:
    """The action on losing a node, by its role (`rollback` or `stop`), and the most
    restarts one job may make."""

    trainer: str = "rollback"
    embedding_server: str = "rollback"
    sync_server: str = "rollback"
    dense_server: str = "rollback"
    reader: str = "rollback"
    max_restarts: int = 3

    def __post_init__(self) -> None:
        for role in Role:
            action = getattr(self, _key(role))
            if action not in ACTIONS:
                raise ValueError(f"{_key(role)} must be one of {list(ACTIONS)}, got {action!r}")
        if self.max_restarts < 0:
            raise ValueError(f"max_restarts must be >= 0, got {self.max_restarts}")

    def action(self, node: str) -> str:
        """What to do on losing the node named `node` (e.g. `embedding-server-1`)."""
        return str(getattr(self, _key(_role_of(node))))

    def refusal(self, node: str, restarts: int) -> str | None:
        """Why losing `node` after `restarts` rollbacks ends the job (None: roll back)."""
        if self.action(node) == "stop":
            return f"recovery.{_key(_role_of(node))} is stop"
        if restarts >= self.max_restarts:
            return f"recovery.max_restarts ({self.max_restarts}) reached"
        return None


def _role_of(node: str) -> Role:
    for role in sorted(Role, key=lambda r: -len(r.value)):
        if node == role.value or node.startswith(f"{role.value}-"):
            return role
    raise ValueError(f"no node role in the name {node!r}")


def _key(role: Role) -> str:
    return role.value.replace("-", "_")


@dataclass
class Loss:
    """One node lost: which, when (seconds into training), where the stream was (examples
    handed out, counted from the job's start; `exact` False: the reader was lost too, and
    this is its count when last asked, a lower bound), and where the job went back to."""

    node: str
    at_seconds: float
    position: int
    back_to: int
    exact: bool = True

    @property
    def replayed(self) -> int:
        """Examples handed out after the cut the job went back to: handed out again."""
        return self.position - self.back_to


@dataclass
class Recoveries:
    """The losses a job recovered from, and what they cost."""

    losses: list[Loss] = field(default_factory=list)

    def add(self, loss: Loss) -> None:
        assert loss.back_to <= loss.position, loss
        self.losses.append(loss)

    @property
    def examples_replayed(self) -> int:
        return sum(loss.replayed for loss in self.losses)

    def summary(self) -> dict[str, Any]:
        """What the run's summary says: every loss, examples replayed and lost (none: a
        rollback goes back to a consistent cut)."""
        return {
            "losses": [{**asdict(loss), "replayed": loss.replayed} for loss in self.losses],
            "examples_replayed": self.examples_replayed,
            "examples_lost": 0,
        }


def restart_spec(first: JobSpec, back: JobState | None) -> JobSpec:
    """The job `first` restarted from cut `back` (None: from its own start): the rest of
    its stream, and the rest of its `stop_after_examples`."""
    if back is None:
        return first
    limit = first.stop_after_examples
    if limit is not None:
        limit -= back.data_position - first.start_example
    return dataclasses.replace(first, resume=back, stop_after_examples=limit)


def account(
    summary: dict[str, Any], first: JobSpec, last: JobSpec, recoveries: Recoveries, seconds: float
) -> None:
    """A rolled-back job's summary, from its last restart's (`last`): every example trained
    since `first` began counted once, EPS over the whole `seconds`, the losses."""
    summary["examples_trained"] += last.start_example - first.start_example
    summary["train_seconds"] = seconds
    summary["eps"] = summary["examples_trained"] / seconds
    summary["recovery"] = recoveries.summary()
