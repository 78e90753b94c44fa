"""What a distributed job does when it loses a node, and the accounting of what it redid.

A node is lost when its process dies, its machine leaves the cluster, or it stops answering.
The job then, as the policy says for the node's role:

- `stop`s: an error naming the node; the last checkpoint taken while it trained stays, to
  `--resume` from;
- `rollback`s: every node restarts from the job's last cut (coordinator/cuts.py), or from
  the job's start if none was taken yet, and the reader hands out again every batch that
  came after it. A cut holds exactly the batches handed out before it, so nothing is lost
  and every batch handed out between the cut and the loss is trained a second time: it is
  counted as replayed;
- `partial` (an embedding server, CPR's partial recovery): only the lost shard restarts,
  from its state at the last cut, while every other node goes on (its callers wait for it
  and send again what was in flight); the updates it had received since the cut are lost:
  the examples handed out since are counted as examples whose updates were lost;
- `restart` (a trainer): only the trainer restarts, its replica from the center (EASGD) or
  from the last cut, and the batches it was handed and had not pushed are handed out again
  (counted as replayed);
- `restart` (a reader, the default): only the reader is replaced, while the trainers wait
  for its batches and the servers go on; its replacement replays its share of the stream
  up to where it stood, from what the trainers' workers took (coordinator/reader_replay.py),
  so that every batch is handed out once: nothing is replayed or lost. A cut under way is
  abandoned.

A node lost while the job starts, or while it recovers from an earlier loss, is a loss
like any other; every loss counts against `max_restarts` (a one-node recovery a further
loss interrupts gives way to a rollback: its action becomes `superseded`, as the rollback
redoes what it replayed or lost).

`partial` and a trainer's `restart` need a family that allows them
(`Family.partial_shards`, `Family.restarts_trainer`: the replica family's Hogwild embedding
shards, a trainer whose replica has a source; a collective one, MA or BMUF, cannot lose a
rank). A reader's `restart` suits every family: no node's state is lost, the workers only
wait for their next batch. A node's own error (a diverged worker, bad data) always ends
the job: a restart would repeat it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from recsync.coordinator.checkpoint import JobState
from recsync.coordinator.node_specs import ShardSpec, TrainerSpec
from recsync.coordinator.spec import JobSpec
from recsync.optim.state import copy_state
from recsync.protocol.address import Role
from recsync.strategy.config import StrategyConfig
from recsync.strategy.family import Reports, family_of
from recsync.strategy.roles import KERNEL_ROLES, known_roles, role_key, traits_of
from recsync.trainer.replica import DenseReplica

ONE_NODE = ("partial", "restart")  # actions that replace the lost node only


@dataclass(frozen=True)
class RecoveryPolicy:
    """The action on losing a node, by its role (module docstring), and the most losses
    one job may recover from."""

    trainer: str = "rollback"
    embedding_server: str = "rollback"
    dense_server: str = "rollback"
    reader: str = "restart"
    servers: Mapping[str, str] = field(default_factory=dict)  # the families' roles, by key
    max_restarts: int = 3
    ping_every_s: float = 2.0  # the engine asks every node this often whether it answers
    ping_timeout_s: float = 10.0  # a node that does not answer within this is lost
    call_timeout_s: float = 1_000.0  # the longest a node's call waits for its reply
    replace_wait_s: float = 300.0  # the longest a call waits for a lost node's replacement

    def __post_init__(self) -> None:
        for key in ("ping_every_s", "ping_timeout_s", "call_timeout_s", "replace_wait_s"):
            if not getattr(self, key) > 0:
                raise ValueError(f"{key} must be > 0, got {getattr(self, key)}")
        roles = known_roles()
        for key in self.servers:
            if not any(role_key(role) == key for role in roles):
                known = [role_key(role) for role in roles]
                raise ValueError(f"no role {key!r} to recover; the roles: {known}")
        for role, traits in roles.items():
            action = self._action(role)
            if action not in traits.recovery:
                allowed = list(traits.recovery)
                raise ValueError(f"{role_key(role)} must be one of {allowed}, got {action!r}")
        if self.max_restarts < 0:
            raise ValueError(f"max_restarts must be >= 0, got {self.max_restarts}")

    def action(self, node: str) -> str:
        """What to do on losing the node named `node` (e.g. `embedding-server-1`)."""
        return self._action(role_of(node))

    def _action(self, role: Role) -> str:
        key = role_key(role)
        if role in KERNEL_ROLES:
            return str(getattr(self, key))
        return self.servers.get(key, traits_of(role).recovery[0])

    def refusal(self, node: str, restarts: int) -> str | None:
        """Why losing `node` after `restarts` recoveries ends the job (None: recover)."""
        if self.action(node) == "stop":
            return f"recovery.{role_key(role_of(node))} is stop"
        if restarts >= self.max_restarts:
            return f"recovery.max_restarts ({self.max_restarts}) reached"
        return None

    def check(self, strategy: StrategyConfig) -> None:
        """A ValueError if an action cannot recover a job of `strategy`."""
        family = family_of(strategy)
        if self.embedding_server == "partial" and not family.partial_shards(strategy):
            raise ValueError(
                f"embedding_server = partial: {strategy.describe()}'s shards run its policy, "
                "whose versions the workers wait on; a shard restored from a cut would break "
                "them (use rollback, or a replica strategy)"
            )
        if self.trainer == "restart" and not family.restarts_trainer(strategy):
            raise ValueError(
                f"trainer = restart: {strategy.describe()} cannot lose one trainer (its "
                "servers or its all-reduce wait for every worker); use rollback"
            )


def role_of(node: str) -> Role:
    """The role of the node named `node` (e.g. `embedding-server-1`)."""
    for role in sorted(known_roles(), key=lambda r: -len(r.value)):
        if node == role.value or node.startswith(f"{role.value}-"):
            return role
    raise ValueError(f"no node role in the name {node!r}")


@dataclass
class Loss:
    """One node lost: which, when it was noticed (seconds into training), where the stream
    was (examples handed out, counted from the job's start; `exact` False: the reader was
    lost too, and this is its count when last asked, a lower bound), where the job went
    back to, and how it recovered."""

    node: str
    at_seconds: float
    position: int
    back_to: int
    exact: bool = True
    action: str = "rollback"  # or partial, restart; superseded: a rollback redid it
    replayed_examples: int | None = None  # a restarted trainer's: what it held

    @property
    def replayed(self) -> int:
        """Examples handed out again: after the cut the job went back to (rollback), or
        those the lost trainer held (restart; a replaced reader hands out none again)."""
        if self.action == "restart":
            return self.replayed_examples or 0
        return self.position - self.back_to if self.action == "rollback" else 0

    @property
    def lost(self) -> int:
        """Examples whose updates of the lost shard were lost (partial): those handed out
        since the cut its state came back from."""
        return self.position - self.back_to if self.action == "partial" else 0


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
        """What the run's summary says: every loss, the examples replayed, and those whose
        updates of a lost shard were lost."""
        return {
            "losses": [
                {**asdict(loss), "replayed": loss.replayed, "lost": loss.lost}
                for loss in self.losses
            ],
            "examples_replayed": self.examples_replayed,
            "examples_lost": sum(loss.lost for loss in self.losses),
        }


def restart_spec(first: JobSpec, back: JobState | None, examples_at_cut: int = 0) -> JobSpec:
    """The job `first` restarted from cut `back` (None: from its own start), taken when
    `examples_at_cut` examples had gone out since it began: the rest of its stream, and
    the rest of its `stop_after_examples`."""
    if back is None:
        return first
    limit = first.stop_after_examples
    if limit is not None:
        limit -= examples_at_cut
    return dataclasses.replace(first, resume=back, stop_after_examples=limit)


def account(
    summary: dict[str, Any], examples_before: int, recoveries: Recoveries, seconds: float
) -> None:
    """A rolled-back job's summary, from its last restart's: every example trained since
    the first start counted once (`examples_before`: those before the last restart), EPS
    over the whole `seconds`, the losses."""
    summary["examples_trained"] += examples_before
    summary["train_seconds"] = seconds
    summary["eps"] = summary["examples_trained"] / seconds
    summary["recovery"] = recoveries.summary()


def restarted_trainer(
    node: TrainerSpec, spec: JobSpec, back: JobState | None, reports: Reports
) -> TrainerSpec:
    """The next incarnation of lost trainer `node`: its replica as its family makes it from
    `reports` (the nodes' of its `restart_roles`: EASGD's center) if it does, else from
    cut `back` (None: the job's start), its optimizer state from the same cut."""
    fresh = DenseReplica(spec.model, spec.train.seed, spec.train.dense_optimizer)
    optimizer = copy_state(fresh.optimizer.state_dict()) if back is None else back.dense_optimizer
    dense = family_of(spec.strategy).restarted_dense(spec, reports)
    if dense is None:
        dense = fresh.flat.detach().clone() if back is None else back.dense.clone()
    setup = dataclasses.replace(
        node.setup, initial=(dense, optimizer), incarnation=node.setup.incarnation + 1
    )
    return dataclasses.replace(node, setup=setup)


def restored_shard(node: ShardSpec, back: JobState | None) -> ShardSpec:
    """Lost embedding shard `node` as it was at cut `back` (None: as the job started)."""
    state = None if back is None else back.shards[node.address.index]
    return dataclasses.replace(node, state=state)
