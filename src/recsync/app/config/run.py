"""The run's own sections of a config: [run] (name, seed, evaluations, the best model,
early stopping, checkpoints while training), [recovery] (what a lost node does) and
[simulate] (the simulator's cost profile)."""

from __future__ import annotations

import dataclasses
from typing import Literal

from pydantic import Field

from recsync.app.config.base import Section
from recsync.coordinator.cuts import CheckpointEvery
from recsync.coordinator.evaluation import EarlyStopping
from recsync.coordinator.recovery import RecoveryPolicy


class EarlyStoppingSection(Section):
    """[run.early_stopping]: when a run stops before its data ends, for want of progress
    on the held-out set."""

    metric: Literal["test_logloss", "test_ne", "test_auc"] = Field(
        default="test_logloss",
        description="The held-out metric watched (lower is better, but for test_auc); it "
        "also picks the best model that run.keep_best keeps.",
    )
    patience: int = Field(
        default=0,
        ge=0,
        description="Stop once this many evaluations in a row did not improve the metric "
        "(0: never stop early).",
    )
    min_delta: float = Field(
        default=0.0,
        ge=0.0,
        description="The least change of the metric that counts as an improvement.",
    )
    min_examples: int = Field(
        default=0,
        ge=0,
        description="Never stop before this many examples were trained.",
    )

    def to_spec(self) -> EarlyStopping:
        return EarlyStopping(self.metric, self.patience, self.min_delta, self.min_examples)


class CheckpointSection(Section):
    """[run.checkpoint]: checkpoints a distributed run takes while it trains (consistent
    cuts of every node); the end of a run is always checkpointed."""

    every_examples: int = Field(
        default=0,
        ge=0,
        description="Checkpoint after every this many examples handed out (0: not by examples).",
    )
    every_seconds: float = Field(
        default=60.0,
        ge=0.0,
        description="Checkpoint every this many seconds of training, virtual seconds in the "
        "simulator (0: not by time; both 0: only at the end).",
    )
    deltas_per_full: int = Field(
        default=4,
        ge=0,
        description="With hash tables: this many checkpoints in a row hold only the rows "
        "changed since the one before, then a full one (0: every checkpoint full).",
    )

    def to_spec(self) -> CheckpointEvery:
        return CheckpointEvery(self.every_examples, self.every_seconds)


RecoveryAction = Literal["rollback", "stop"]


_ROLLBACK = "rollback: every node restarts from the last checkpoint taken while training"
_STOP = "stop: an error naming the node, the last checkpoint kept"


class RecoverySection(Section):
    """[recovery]: what a distributed run does when it loses a node (its process died, its
    machine left the cluster, it stopped answering), by the node's role, and how a lost node
    is noticed. A node's own error (a diverged worker) always stops the run."""

    trainer: Literal["rollback", "restart", "stop"] = Field(
        default="rollback",
        description=f"A lost trainer: {_ROLLBACK}; restart: that trainer alone restarts; {_STOP}.",
    )
    embedding_server: Literal["rollback", "partial", "stop"] = Field(
        default="rollback",
        description=f"A lost embedding server: {_ROLLBACK}; partial: that server alone "
        f"restarts from the last checkpoint; {_STOP}.",
    )
    sync_server: RecoveryAction = Field(
        default="rollback", description=f"A lost sync server (EASGD): {_ROLLBACK}; {_STOP}."
    )
    dense_server: RecoveryAction = Field(
        default="rollback",
        description=f"A lost dense server (gradient strategies): {_ROLLBACK}; {_STOP}.",
    )
    group_server: RecoveryAction = Field(
        default="rollback",
        description=f"A lost group server (hierarchical training): {_ROLLBACK}; {_STOP}.",
    )
    reader: Literal["restart", "rollback", "stop"] = Field(
        default="restart",
        description="A lost reader: restart: replaced alone, it replays the stream to where "
        f"it stood, nothing handed out twice; {_ROLLBACK}; {_STOP}.",
    )
    max_restarts: int = Field(
        default=3,
        ge=0,
        description="The node losses a run recovers from, counting those while it starts or "
        "recovers; one more stops it.",
    )
    ping_every_s: float = Field(
        default=2.0,
        gt=0,
        description="Seconds between the driver's pings of every node (failure detection "
        "on the Ray engine).",
    )
    ping_timeout_s: float = Field(
        default=10.0,
        gt=0,
        description="A node that has not answered a ping within this many seconds is lost.",
    )
    call_timeout_s: float = Field(
        default=1_000.0,
        gt=0,
        description="Seconds a node's call to another waits for the reply before it names "
        "the callee as failed (a backstop behind the pings).",
    )
    replace_wait_s: float = Field(
        default=300.0,
        gt=0,
        description="Seconds a node's call waits for a lost callee's replacement (a reader "
        "replaying a long stream takes a while).",
    )

    def to_spec(self) -> RecoveryPolicy:
        """The policy: the kernel's roles by field, the families' servers (every other
        key) by key."""
        values = self.model_dump()
        own = {f.name for f in dataclasses.fields(RecoveryPolicy)}
        servers = {key: values.pop(key) for key in list(values) if key not in own}
        return RecoveryPolicy(**values, servers=servers)


class RunSection(Section):
    """[run]: name, seed and bookkeeping of one run."""

    name: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$",
        description="The run directory's name under runs_dir (--name sets it).",
        json_schema_extra={"unset": "a timestamp"},
    )
    seed: int = Field(
        default=0,
        description="Seed of every random draw of training: initial weights, data order, "
        "the held-out split.",
    )
    runs_dir: str = Field(
        default="runs",
        description="The directory run directories are made in, relative to the working directory.",
    )
    eval_every: int = Field(
        default=50_000,
        ge=0,
        description="Examples handed out between evaluations on the held-out set (0: only "
        "at the end).",
    )
    eval_examples: int = Field(
        default=10_000,
        ge=0,
        description="Held-out examples a mid-run evaluation scores (0: all); the last "
        "evaluation scores all.",
    )
    tensorboard: bool = Field(
        default=False,
        description="Also write the run's scalars as TensorBoard events (needs the extra: "
        "pip install 'recsync[tensorboard]').",
    )
    keep_best: bool = Field(
        default=True,
        description="Keep best.pt, the model of the best evaluation by "
        "run.early_stopping.metric, beside the final one.",
    )
    early_stopping: EarlyStoppingSection = Field(
        default_factory=EarlyStoppingSection,
        description="When to stop early for want of progress on the held-out set.",
    )
    checkpoint: CheckpointSection = Field(
        default_factory=CheckpointSection,
        description="Checkpoints taken while a distributed run trains.",
    )


class SimulateSection(Section):
    """[simulate]: how `recsync simulate` prices and computes a run."""

    profile: str | None = Field(
        default=None,
        description="The cost profile file, as `recsync calibrate` writes it, relative to "
        "the working directory (`recsync simulate --profile FILE` sets it).",
        json_schema_extra={"unset": "the cost model's defaults"},
    )
    math: Literal["real", "priced"] = Field(
        default="real",
        description="real: the model's math done in virtual-time order; priced: tensor "
        "shapes only, the same virtual times but no model quality, little memory (--math).",
    )
