"""The simulator's two math modes: `real` (the model's math done, in virtual-time order) and
`priced` (the model's tensors shapes only, model/priced.py: nothing computed, no memory for
replicas, shards or servers' parameters; the cost model prices the work as it always does).

A job is assembled priced in one place, `assembled`: its topology and every node but the
readers are built under `priced_math()` (the readers read the data for real: the ids decide
which rows a batch looks up, and so what its messages carry; a synthetic training stream
comes without its teacher's labels, `labelled`). Everything that needs the
model's values is refused up front (`check_math`), and the summary says which mode ran and
has no quality or loss in priced mode (`summary_of_math`).
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from typing import Any

from recsync.coordinator.cuts import CheckpointEvery
from recsync.coordinator.evaluation import EarlyStopping
from recsync.coordinator.recovery import RecoveryPolicy
from recsync.coordinator.spec import JobSpec
from recsync.model.priced import priced_math
from recsync.protocol.address import Role
from recsync.strategy.family import family_of

MATH_MODES = ("real", "priced")
QUALITY_KEYS = ("train_loss", "test_auc", "test_ne", "test_logloss", "test_calibration")


def assembled(math: str, role: Role | None = None) -> AbstractContextManager[Any]:
    """The context a job's topology (`role` None) or a node of `role` is built in."""
    if math == "priced" and role is not Role.READER:
        return priced_math()
    return nullcontext()


def labelled(math: str) -> bool:
    """The synthetic training stream's labels are made (priced math needs the ids only:
    the teacher's labels cost twice what the ids do, and decide nothing it measures)."""
    return math != "priced"


def check_math(
    math: str,
    spec: JobSpec,
    eval_every: int | None,
    early_stopping: EarlyStopping | None,
    keep_best: bool,
    checkpoint_every: CheckpointEvery | None,
    recovery: RecoveryPolicy | None,
) -> None:
    """A ValueError naming the option for what `math` cannot do."""
    if math not in MATH_MODES:
        raise ValueError(f"simulate.math must be one of {list(MATH_MODES)}, got {math!r}")
    if math == "real":
        return
    refused = {
        "run.eval_every (evaluations)": bool(eval_every),
        "run.early_stopping": early_stopping is not None and early_stopping.patience > 0,
        "run.keep_best": keep_best,
        "run.checkpoint (cuts while training)": (
            checkpoint_every is not None and checkpoint_every.enabled
        ),
        "node losses and [recovery]": recovery is not None,
    }
    needed = family_of(spec.strategy).values_needed_by(spec.strategy)
    if needed is not None:
        refused[needed] = True
    named = [option for option, used in refused.items() if used]
    if named:
        raise ValueError(
            "simulate.math = 'priced' keeps no model values; it cannot run with "
            f"{', '.join(named)} (turn them off, or simulate with math = 'real')"
        )


def summary_of_math(summary: dict[str, Any], math: str) -> dict[str, Any]:
    """The summary as `math` ran it: a priced run's says so and has no loss or quality
    (a real run's summary is left as it always was)."""
    if math == "priced":
        summary["math"] = "priced"
        for key in QUALITY_KEYS:
            if key in summary:
                summary[key] = None
    return summary
