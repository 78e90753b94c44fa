"""`recsync simulate`: the same job as `recsync train`, in virtual time, into a run dir."""

from __future__ import annotations

from typing import Any

from recsync.app.config.base import build_dataclass
from recsync.app.config.schema import Config
from recsync.app.runs.checkpoints import save_checkpoint
from recsync.app.runs.distributed import job_spec, write_run_end
from recsync.app.runs.progress import examples_bar
from recsync.app.runs.run_dir import RunDir
from recsync.coordinator.checkpoint import JobState
from recsync.coordinator.spec import plan_for
from recsync.runtime.sim.cost import CostModel
from recsync.runtime.sim.job import SimJob


def cost_model(config: Config) -> CostModel:
    cost: CostModel = build_dataclass(CostModel, config.cost, "cost")
    return cost


def run_simulation(
    config: Config,
    run_dir: RunDir,
    progress: bool = True,
    resume: JobState | None = None,
    stop_after: int | None = None,
) -> dict[str, Any]:
    """Simulate one pass; the summary's times (train_seconds, eps) are virtual. Writes the
    end state as the run's checkpoint."""
    spec = job_spec(config, resume, stop_after)
    run_dir.write_config(config)
    bar = examples_bar(f"simulating {spec.strategy.describe().split()[0]}", progress, rate=False)
    with bar:
        task = bar.add_task("simulate", total=None)
        sim = SimJob(
            spec,
            plan_for(spec),
            cost_model(config),
            eval_every=config.run.eval_every,
            on_handed=lambda handed: bar.update(task, completed=handed),
            on_eval=run_dir.append_metrics,
            early_stopping=config.run.early_stopping.to_spec(),
            keep_best=config.run.keep_best,
        )
        bar.update(task, total=sim.reader.source.total_examples)
        summary = sim.run()
    assert sim.final_state is not None
    summary["checkpoint"]["path"] = str(save_checkpoint(run_dir.path, sim.final_state))
    return write_run_end(run_dir, summary, sim.curve, sim.evaluations.best_state)
