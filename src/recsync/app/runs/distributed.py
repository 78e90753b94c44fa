"""A distributed run on the Ray engine, driven by a config, into a run directory."""

from __future__ import annotations

from typing import Any

from rich.markup import escape

from recsync.app.config.schema import Config
from recsync.app.runs.checkpoints import BEST, CheckpointWriter, save_checkpoint
from recsync.app.runs.interrupts import interrupts
from recsync.app.runs.plots import plot_curves
from recsync.app.runs.progress import examples_bar, warn
from recsync.app.runs.run_dir import CURVES, RAY_LOG, RunDir
from recsync.coordinator.checkpoint import JobState
from recsync.coordinator.cuts import CheckpointEvery
from recsync.coordinator.spec import JobSpec
from recsync.errors import ConfigError, JobFailed
from recsync.runtime.ray.errors import NodeFailure
from recsync.runtime.ray.job import RayJob, run_job
from recsync.runtime.ray.ray_log import ray_messages_to


def job_spec(
    config: Config, resume: JobState | None = None, stop_after: int | None = None
) -> JobSpec:
    """The run's JobSpec; `resume` starts it from a checkpoint, `stop_after` stops handing
    out batches after that many examples (then the end state is the checkpoint)."""
    specs = config.to_specs()
    if specs.strategy is None:
        raise ConfigError(
            "strategy.name: 'reference' trains in one process; this needs a distributed strategy"
        )
    if stop_after is not None and stop_after < 1:
        raise ConfigError(f"--stop-after must be >= 1 example, got {stop_after}")
    return JobSpec(
        model=specs.model,
        train=specs.train,
        cluster=specs.cluster,
        strategy=specs.strategy,
        synthetic=specs.synthetic,
        files=specs.files,
        resume=resume,
        stop_after_examples=stop_after,
    )


def run_distributed(
    config: Config,
    run_dir: RunDir,
    progress: bool = True,
    resume: JobState | None = None,
    stop_after: int | None = None,
) -> dict[str, Any]:
    """Train one pass on the Ray engine; writes config, metrics, summary, plot, checkpoint,
    and Ray's own messages to ray.log (the terminal shows a line per loss and recovery)."""
    spec = job_spec(config, resume, stop_after)
    run_dir.write_config(config)
    bar = examples_bar(spec.strategy.describe().split()[0], progress)
    jobs: list[RayJob] = []
    writer = CheckpointWriter(run_dir.path, config.run.checkpoint.deltas_per_full)

    def on_start(job: RayJob) -> None:
        jobs.append(job)
        signals.attach(job.request_stop)

    try:
        with interrupts() as signals, bar, ray_messages_to(run_dir.path / RAY_LOG):
            task = bar.add_task("train", total=None, eps=0.0)

            def on_progress(done: int, total: int | None, eps: float) -> None:
                bar.update(task, completed=done, total=total, eps=eps)

            summary = run_job(
                spec,
                config.cluster.address,
                config.cluster.num_cpus,
                on_progress=on_progress,
                on_start=on_start,
                eval_every=config.run.eval_every,
                eval_examples=config.run.eval_examples,
                on_eval=run_dir.append_metrics,
                early_stopping=config.run.early_stopping.to_spec(),
                keep_best=config.run.keep_best,
                checkpoint_every=checkpoints_while_training(config, spec),
                on_checkpoint=writer.write,
                recovery=config.recovery.to_spec(),
                on_recovery=lambda line: bar.console.print(escape(line), highlight=False),
            )
    except NodeFailure as error:
        writer.wait()
        raise JobFailed(with_checkpoint(str(error), writer, run_dir)) from None
    writer.wait()
    summary["interrupted"] = signals.received
    job = jobs[0]
    assert job.final_state is not None
    path = writer.save_final(job.final_state)
    summary["checkpoint"] |= {"path": str(path), "written": writer.stats()}
    return write_run_end(run_dir, summary, job.evaluations.records, job.evaluations.best_state)


def checkpoints_while_training(config: Config, spec: JobSpec) -> CheckpointEvery:
    """[run.checkpoint] as the run can take it: none while training (a warning says why)
    for a strategy whose running job cannot be cut."""
    every = config.run.checkpoint.to_spec()
    refusal = spec.cut_refusal()
    if every.enabled and refusal is not None:
        warn(f"run.checkpoint: {refusal}")
        return CheckpointEvery()
    return every


def with_checkpoint(message: str, writer: CheckpointWriter, run_dir: RunDir) -> str:
    """A failed run's message, with where it can be resumed from: its last cut's
    checkpoint, if it took one."""
    if not writer.written:
        return (
            f"{message}\nno checkpoint was taken while training (see [run.checkpoint]): "
            "run the same command again"
        )
    return (
        f"{message}\nthe run's last checkpoint ({writer.written} taken while training) "
        f"is in {run_dir.path}: continue with --resume {run_dir.path}"
    )


def write_run_end(
    run_dir: RunDir,
    summary: dict[str, Any],
    records: list[dict[str, Any]],
    best: JobState | None = None,
) -> dict[str, Any]:
    """A distributed run's end: its last metrics record (`records[-1]`; the earlier ones
    were written as they came), the best model (`best`, to best.pt), summary and plot of
    every record; closes the dir."""
    summary["run_dir"] = str(run_dir.path)
    summary["storage_retries"] = summary.get("storage_retries", 0) + run_dir.storage_retries()
    if best is not None:
        summary["best"]["path"] = str(save_checkpoint(run_dir.path, best, BEST))
    run_dir.append_metrics(records[-1])
    run_dir.write_summary(summary)
    plot_curves(
        records, run_dir.path / CURVES, teacher_auc=summary["teacher_auc"], title=run_dir.path.name
    )
    run_dir.close()
    return summary
