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
    """[run.early_stopping]: stop once `patience` evaluations in a row did not improve
    `metric` (test_logloss, test_ne or test_auc) by more than `min_delta`; 0: never."""

    metric: Literal["test_logloss", "test_ne", "test_auc"] = "test_logloss"
    patience: int = Field(default=0, ge=0)
    min_delta: float = Field(default=0.0, ge=0.0)

    def to_spec(self) -> EarlyStopping:
        return EarlyStopping(self.metric, self.patience, self.min_delta)


class CheckpointSection(Section):
    """[run.checkpoint]: checkpoints while a distributed job trains (consistent cuts,
    coordinator/cuts.py), every `every_examples` examples handed out and/or every
    `every_seconds` seconds (virtual ones in the simulator); 0 and 0: only at the end.
    `deltas_per_full`: with hash tables, that many checkpoints in a row hold only what
    changed since the one before, then a full one (0: every checkpoint full)."""

    every_examples: int = Field(default=0, ge=0)
    every_seconds: float = Field(default=60.0, ge=0.0)
    deltas_per_full: int = Field(default=4, ge=0)

    def to_spec(self) -> CheckpointEvery:
        return CheckpointEvery(self.every_examples, self.every_seconds)


RecoveryAction = Literal["rollback", "stop"]


class RecoverySection(Section):
    """[recovery]: what a distributed run does when it loses a node (its process died, its
    machine left the cluster, it stopped answering), by the node's role: `rollback` (every
    node restarts from the last checkpoint taken while training, on the machines left),
    `stop` (an error naming the node; the last checkpoint stays), `partial` (an embedding
    server alone restarts from the last checkpoint) or `restart` (a trainer alone
    restarts; a reader alone is replaced, replaying the stream, nothing handed out twice);
    at most `max_restarts` losses a run, counting those while it starts or recovers
    (coordinator/recovery.py)."""

    trainer: Literal["rollback", "restart", "stop"] = "rollback"
    embedding_server: Literal["rollback", "partial", "stop"] = "rollback"
    sync_server: RecoveryAction = "rollback"
    dense_server: RecoveryAction = "rollback"
    group_server: RecoveryAction = "rollback"
    reader: Literal["restart", "rollback", "stop"] = "restart"
    max_restarts: int = Field(default=3, ge=0)
    # failure detection on the engine (docs/checkpoints.md, "Failure detection"): the
    # driver pings every node each ping_every_s; no answer within ping_timeout_s: lost
    ping_every_s: float = Field(default=2.0, gt=0)
    ping_timeout_s: float = Field(default=10.0, gt=0)
    # a node's call to another waits call_timeout_s for its reply (then the callee is named
    # as failed), and replace_wait_s for a lost callee's replacement (a reader replaying a
    # long stream needs more); backstops behind failure detection
    call_timeout_s: float = Field(default=1_000.0, gt=0)
    replace_wait_s: float = Field(default=300.0, gt=0)

    def to_spec(self) -> RecoveryPolicy:
        """The policy: the kernel's roles by field, the families' servers (every other
        key) by key."""
        values = self.model_dump()
        own = {f.name for f in dataclasses.fields(RecoveryPolicy)}
        servers = {key: values.pop(key) for key in list(values) if key not in own}
        return RecoveryPolicy(**values, servers=servers)


class RunSection(Section):
    """[run]: name, seed and bookkeeping of one run."""

    name: str | None = Field(default=None, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    seed: int = 0
    runs_dir: str = "runs"
    eval_every: int = Field(default=50_000, ge=0)
    eval_examples: int = Field(default=10_000, ge=0)
    tensorboard: bool = False
    keep_best: bool = True  # best.pt: the best evaluated model by early_stopping.metric
    early_stopping: EarlyStoppingSection = Field(default_factory=EarlyStoppingSection)
    checkpoint: CheckpointSection = Field(default_factory=CheckpointSection)


class SimulateSection(Section):
    """[simulate]: `profile`, the simulator's cost profile: a TOML file with a [cost] table
    as `recsync calibrate` writes it (relative to the working directory); unset: the cost
    model's defaults. `recsync simulate --profile FILE` sets it. `math`: "real" (the
    model's math done in virtual-time order) or "priced" (the model's tensors shapes only:
    the same virtual times and events where the cost model prices the compute, no model
    quality, little memory; `recsync simulate --math priced`)."""

    profile: str | None = None
    math: Literal["real", "priced"] = "real"
