"""`recsync simulate`: the same job as `recsync train`, in virtual time, into a run dir."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch

from recsync.app.config.schema import Config
from recsync.app.runs.checkpoints import CheckpointWriter
from recsync.app.runs.cost_profile import simulation_cost, with_profile_in
from recsync.app.runs.distributed import (
    checkpoints_while_training,
    job_spec,
    with_checkpoint,
    write_run_end,
)
from recsync.app.runs.progress import examples_bar
from recsync.app.runs.run_dir import RunDir
from recsync.coordinator.checkpoint import JobState
from recsync.coordinator.spec import plan_for
from recsync.errors import ConfigError, JobFailed
from recsync.ps.hash_shard import TableFullError
from recsync.runtime.sim.faulty import FaultySimJob, NodeLost
from recsync.runtime.sim.job import SimJob

PRICED_SKIPS = ("evaluations (run.eval_every)", "run.keep_best", "checkpoints (run.checkpoint)")


def refuse_priced(config: Config, resume: JobState | None) -> None:
    """What a priced simulation cannot do, named (it has no model values)."""
    if config.run.early_stopping.patience > 0:
        raise ConfigError(
            "run.early_stopping.patience > 0 stops on the model's quality; simulate.math = "
            "'priced' has none (set the patience to 0 or simulate with math = 'real')"
        )
    if resume is not None:
        raise ConfigError("simulate.math = 'priced' cannot resume a checkpoint (it has no values)")


def run_simulation(
    config: Config,
    run_dir: RunDir,
    progress: bool = True,
    resume: JobState | None = None,
    stop_after: int | None = None,
) -> dict[str, Any]:
    """Simulate one pass; the summary's times (train_seconds, eps) are virtual. Writes the
    end state as the run's checkpoint; the cost profile too, named by the run's config.
    With node losses in the profile's [cost.faults], the job loses nodes and recovers as
    `[recovery]` says (runtime/sim/faulty.py). With `[simulate] math = "priced"` the model
    has no values (runtime/sim/math_modes.py): no evaluations, no checkpoints (the summary's
    `priced_math_skipped` names them), no quality."""
    priced = config.simulate.math == "priced"
    if priced:
        refuse_priced(config, resume)
    spec = job_spec(config, resume, stop_after)
    cost = simulation_cost(config)
    if priced and cost.faults.loses_nodes:
        raise ConfigError(
            "simulate.math = 'priced' cannot lose nodes and recover ([cost.faults] *_mtbf_s): "
            "recovery restores the model's values, which priced math has none of"
        )
    config = with_profile_in(config, run_dir.path, cost)
    run_dir.write_config(config)
    bar = examples_bar(f"simulating {spec.strategy.describe().split()[0]}", progress, rate=False)
    writer = CheckpointWriter(run_dir.path, config.run.checkpoint.deltas_per_full)
    every = checkpoints_while_training(config, spec)
    with bar:
        task = bar.add_task("simulate", total=None)
        options: dict[str, Any] = {
            "eval_every": None if priced else config.run.eval_every,
            "eval_examples": config.run.eval_examples,
            "on_handed": lambda handed: bar.update(task, completed=handed),
            "on_eval": run_dir.append_metrics,
            "early_stopping": None if priced else config.run.early_stopping.to_spec(),
            "keep_best": config.run.keep_best and not priced,
        }
        if cost.faults.loses_nodes:
            faulty = FaultySimJob(
                spec, cost, every, config.recovery.to_spec(), writer.write, **options
            )
            try:
                summary = faulty.run()
            except NodeLost as lost:
                writer.wait()
                raise JobFailed(with_checkpoint(str(lost), writer, run_dir)) from None
            final, evaluations = faulty.final_state, faulty.evaluations
        else:
            sim = SimJob(
                spec, plan_for(spec), cost, checkpoint_every=None if priced else every,
                on_checkpoint=writer.write, math=config.simulate.math, **options,
            )  # fmt: skip
            bar.update(task, total=sim.reader.readers[0].stream.source.total_examples)
            try:
                summary = sim.run()
            except TableFullError as error:  # as the engine ends: its checkpoints named
                writer.wait()
                raise JobFailed(with_checkpoint(str(error), writer, run_dir)) from None
            final, evaluations = sim.final_state, sim.evaluations
    writer.wait()
    assert final is not None and evaluations is not None
    if priced:
        summary["priced_math_skipped"] = list(PRICED_SKIPS)
    else:
        path = writer.save_final(final)
        summary["checkpoint"] |= {"path": str(path), "written": writer.stats()}
    return write_run_end(run_dir, summary, evaluations.records, evaluations.best_state)


@contextlib.contextmanager
def simulator_threads() -> Iterator[None]:
    """Torch on one thread inside the block, restored after. The simulator computes one
    node's batch at a time: small tensors, for which a second intra-op thread only spins at
    every operation (on a busy machine, 21x the wall time of one thread for the same
    numbers). Each of the engine's nodes runs on one thread too."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)
