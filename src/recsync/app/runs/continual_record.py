"""What a continual run records: each stretch's measures (what the controller reads) and
decision, and each day's record in metrics.jsonl."""

from __future__ import annotations

import dataclasses
from typing import Any

from recsync.app.config.schema import Config
from recsync.app.runs.cost_profile import simulation_cost
from recsync.strategy.controller import Decision, StretchMeasures

BARRIER = "AwaitStart"  # the label of a synchronous step's wait for its start


def stretch_measures(summary: dict[str, Any], strategy: str) -> StretchMeasures:
    """The measures of a run's summary as the controller reads them. Shares are of the
    workers' time: workers x train seconds (every worker loop runs the whole job)."""
    workers = summary["num_trainers"] * summary["workers_per_trainer"]
    worker_s = max(workers * summary["train_seconds"], 1e-12)
    blocked = summary.get("blocked_seconds", {})
    dense_s = sum(seconds for label, seconds in blocked.items() if "Dense" in label)
    pushed = summary.get("gradients_pushed") or 0
    dropped = sum((summary.get("gradients_dropped") or {}).values())
    staleness = (summary.get("dense_staleness") or {}).get("mean")
    return StretchMeasures(
        strategy=strategy,
        step_time_spread=summary.get("step_time_spread"),
        barrier_share=blocked.get(BARRIER, 0.0) / worker_s,
        dense_share=dense_s / worker_s,
        dropped_share=dropped / pushed if pushed else 0.0,
        staleness_mean=staleness,
        examples=summary["examples_trained"],
        seconds=summary["train_seconds"],
        workers=workers,
    )


def stretch_record(
    run_name: str, measured: StretchMeasures, decision: Decision | None
) -> dict[str, Any]:
    """A stretch's record: its run dir, its measures (`measured_of` reads them back) and the
    controller's decision after it."""
    record: dict[str, Any] = {
        "run_dir": run_name,
        **dataclasses.asdict(measured),
    }
    if decision is not None:
        record["decision"] = decision.strategy
        record["reason"] = decision.reason
    return record


def measured_of(stretch: dict[str, Any]) -> StretchMeasures:
    """The measures a stretch's record holds."""
    return StretchMeasures(**{f.name: stretch[f.name] for f in dataclasses.fields(StretchMeasures)})


def day_record(
    day: int,
    engine: str,
    config: Config,
    stretches: list[dict[str, Any]],
    summaries: list[dict[str, Any]],
    quality: dict[str, float],
    cluster: dict[str, Any] | None,
) -> dict[str, Any]:
    """A day's record: its strategies (in the order its stretches ran), cluster, speed (`eps`:
    the day's examples over its stretches' whole training time, start-ups included, which a
    day of continual training pays; not the steady rate of one run) and next-day quality,
    and its stretches."""
    names = [s["strategy"] for s in stretches]
    runs = [n for i, n in enumerate(names) if i == 0 or n != names[i - 1]]
    examples = sum(s["examples_trained"] for s in summaries)
    seconds = sum(s["train_seconds"] for s in summaries)
    tree = config.dump()
    return {
        "day": day,
        "strategy": " > ".join(runs),
        "strategy_described": summaries[-1].get("strategy", names[-1]),
        "engine": engine,
        "num_trainers": config.cluster.num_trainers,
        "workers_per_trainer": config.cluster.workers_per_trainer,
        "stragglers": (
            dataclasses.asdict(simulation_cost(config).stragglers) if engine == "sim" else None
        ),
        "trainer_slowdown": tree["cluster"]["trainer_slowdown"],
        "cluster": cluster,
        "examples": examples,
        "eps": examples / max(seconds, 1e-12),
        "train_seconds": seconds,
        "data": tree["data"]["path"] if tree["data"]["source"] != "synthetic" else "synthetic",
        "next_day_auc": quality["auc"],
        "next_day_logloss": quality["logloss"],
        "next_day_ne": quality["ne"],
        "stretches": stretches,
        "run_dirs": [s["run_dir"] for s in stretches],
    }
