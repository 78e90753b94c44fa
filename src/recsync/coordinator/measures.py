"""Measures of a finished job, the same for both drivers: staleness and drops of the
strategies whose servers run a gradient policy, the workers' steps, the one-pass check;
and what the families read of their nodes' reports (the trainers' replicas, a policy's
measures)."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from recsync.coordinator.spec import JobSpec
from recsync.protocol.address import Role
from recsync.ps.gradient_servers import GradientServerStats
from recsync.strategy.family import Reports
from recsync.trainer.stats import TrainerReport


def histogram_summary(histogram: Counter[int]) -> dict[str, Any]:
    """{"histogram": {staleness: count}, "mean": ..., "max": ...} of a staleness Counter."""
    total = sum(histogram.values())
    mean = sum(tau * n for tau, n in histogram.items()) / total if total else None
    return {
        "histogram": {int(k): int(v) for k, v in sorted(histogram.items())},
        "mean": mean,
        "max": max(histogram) if histogram else None,
    }


def gradient_measures(
    dense: list[GradientServerStats],
    sparse: list[GradientServerStats],
    train_seconds: float,
    iterations: int,
    num_workers: int,
) -> dict[str, Any]:
    """Dense staleness is counted on dense server 0 (every worker step pushes one gradient to
    each block, so block 0 sees each gradient once); row staleness over all shards. Without
    dense servers (all-reduce), steps and gradients are counted on embedding server 0."""
    first = dense[0] if dense else sparse[0]
    rows: Counter[int] = Counter()
    dropped_rows: Counter[str] = Counter()
    for s in sparse:
        rows.update(s.row_staleness)
        dropped_rows.update(s.dropped)
    seconds = max(train_seconds, 1e-12)
    return {
        "global_steps": first.steps,
        "global_step_rate": first.steps / seconds,
        "gradients_pushed": first.pushes,
        "gradients_applied": first.applied,
        "gradients_dropped": dict(first.dropped),
        "sparse_gradients_dropped": dict(dropped_rows),
        "dense_staleness": histogram_summary(dense[0].staleness if dense else Counter()),
        "sparse_staleness": histogram_summary(rows),
        "qps_per_worker": iterations / seconds / num_workers,
    }


SLOW_STEP = 1.5  # a worker whose mean step takes this many times a typical one's is slow
TYPICAL = 25  # the percentile of the workers' mean steps that stands for a typical worker


def worker_step_measures(compute_s: dict[int, float], steps: dict[int, int]) -> dict[str, Any]:
    """Each worker's mean compute seconds a step (by global worker index), and their
    spread: the slowest worker's over a typical worker's (the lower quartile, so that up to
    three quarters of the workers may be slow; 1.0: all alike; a synchronous step waits for
    the slowest) and the fraction of workers slower than SLOW_STEP x a typical one.
    Workers that computed no step are left out."""
    means = {w: compute_s[w] / n for w, n in sorted(steps.items()) if n > 0}
    if not means:
        return {"worker_step_seconds": {}, "step_time_spread": None, "slow_worker_fraction": None}
    typical = float(np.percentile(list(means.values()), TYPICAL))
    slow = sum(1 for m in means.values() if m > SLOW_STEP * typical)
    return {
        "worker_step_seconds": {w: round(m, 6) for w, m in means.items()},
        "step_time_spread": max(means.values()) / typical if typical > 0 else None,
        "slow_worker_fraction": slow / len(means),
    }


def check_one_pass(handed: list[int], trained: list[int], dataset_examples: int | None) -> None:
    """Every example handed out was trained, once; and all of the data was handed out."""
    if handed != trained:
        raise AssertionError(f"examples handed out {handed} != examples trained {trained}")
    if dataset_examples is not None and sum(handed) != dataset_examples:
        raise AssertionError(
            f"examples handed out {sum(handed)} != dataset size {dataset_examples}"
        )


STEADY_WINDOW = (0.2, 0.8)  # the share of the examples handed out the steady rate spans
# batches per worker thread handed out inside the window: fewer, and the rate leans on a
# few batches of each thread (a sync's or a start's), not a steady state (`check_steady`).
# A run needs at least MIN_STEADY_BATCHES / 0.6 = 17 batches a worker thread in all.
MIN_STEADY_BATCHES = 10


def _window(handed: list[tuple[float, int]], low: float, high: float) -> list[tuple[float, int]]:
    total = handed[-1][1] if handed else 0
    return [(t, n) for t, n in handed if low * total <= n <= high * total]


def steady_eps(
    handed: list[tuple[float, int]],
    low: float = STEADY_WINDOW[0],
    high: float = STEADY_WINDOW[1],
) -> float:
    """Examples/s while the middle of the data (from `low` to `high` of it) was handed out:
    the start (processes starting, threads ramping up) and the tail (threads running dry)
    left out. `handed`: (seconds, examples handed out so far) as the run went (the
    simulator: at every batch; the engine: at every poll of its readers). One definition for
    both drivers and every report (a summary's `eps_steady`; docs/simulator.md, "Examples
    per second"). A run with no two points inside the window has no steady rate: the rate
    over the whole run stands for it, and `steady_batches` says 0."""
    inside = _window(handed, low, high)
    if len(inside) < 2 or inside[-1][0] == inside[0][0]:
        return handed[-1][1] / handed[-1][0] if handed and handed[-1][0] > 0 else 0.0
    return (inside[-1][1] - inside[0][1]) / (inside[-1][0] - inside[0][0])


def steady_batches(
    handed: list[tuple[float, int]],
    batch_size: int,
    worker_threads: int,
    low: float = STEADY_WINDOW[0],
    high: float = STEADY_WINDOW[1],
) -> float:
    """Batches per worker thread that the steady rate spans (0: no steady window)."""
    inside = _window(handed, low, high)
    if len(inside) < 2 or inside[-1][0] == inside[0][0]:
        return 0.0
    return (inside[-1][1] - inside[0][1]) / (batch_size * max(worker_threads, 1))


def steady_measures(
    handed: list[tuple[float, int]], batch_size: int, worker_threads: int
) -> dict[str, float]:
    """A summary's steady rate (`eps_steady`) and how many batches per worker thread it
    spans (`steady_batches_per_thread`)."""
    return {
        "eps_steady": steady_eps(handed),
        "steady_batches_per_thread": round(steady_batches(handed, batch_size, worker_threads), 3),
    }


class ShortSteadyWindow(ValueError):
    """A run too short for a steady rate: too few batches per worker thread inside the
    steady window."""


def check_steady(summary: dict[str, Any], what: str, least: int = MIN_STEADY_BATCHES) -> float:
    """`summary`'s steady rate, or ShortSteadyWindow (naming `what`) where its window spans
    fewer than `least` batches per worker thread: a reproduction's points must be long
    enough, at least `least` / 0.6 batches a worker thread in all."""
    spanned = summary.get("steady_batches_per_thread")
    if spanned is None:
        raise ShortSteadyWindow(f"{what}: the summary does not say how long its steady window is")
    if spanned < least:
        low, high = STEADY_WINDOW
        raise ShortSteadyWindow(
            f"{what}: its steady window ({low:.0%} to {high:.0%} of the examples) spans "
            f"{spanned:.1f} batches per worker thread, fewer than {least}: too short for a "
            f"steady examples/s; give each worker thread at least "
            f"{math.ceil(least / (high - low))} batches"
        )
    return float(summary["eps_steady"])


def answer_times(seconds: Sequence[float]) -> dict[str, float | int]:
    """How long rounds of pings took to be answered: their count, median, 99th
    percentile (the nearest rank) and longest, in seconds (failure detection's margin)."""
    if not seconds:
        return {"count": 0}
    ordered = sorted(seconds)
    p99 = ordered[min(len(ordered) - 1, math.ceil(0.99 * len(ordered)) - 1)]
    return {
        "count": len(ordered),
        "median_s": round(ordered[len(ordered) // 2], 4),
        "p99_s": round(p99, 4),
        "max_s": round(ordered[-1], 4),
    }


def trainer_replicas(reports: Reports) -> list[torch.Tensor]:
    """The trainers' dense replicas (of a family whose trainers hold one)."""
    trainers: list[TrainerReport] = reports(Role.TRAINER)
    return [t.replica for t in trainers if t.replica is not None]


def policy_measures(
    spec: JobSpec, reports: Reports, train_seconds: float, dense: list[GradientServerStats]
) -> dict[str, Any]:
    """The measures of a job whose servers run a gradient policy: its shards and the
    servers of its dense part (`dense`: their stats; none if the trainers hold it)."""
    stats = [t.stats for t in reports(Role.TRAINER)]
    sparse: list[GradientServerStats] = [s.stats for s in reports(Role.EMBEDDING_SERVER)]
    iterations = sum(s.total_iterations for s in stats)
    return gradient_measures(dense, sparse, train_seconds, iterations, spec.cluster.hogwild_threads)
