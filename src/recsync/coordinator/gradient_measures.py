"""Measures of a gradient-strategy run, from its servers' stats (the same for both drivers):
staleness histograms (dense per block, sparse per row), gradients dropped by reason, global
steps and their rate, and queries per second per worker."""

from __future__ import annotations

from collections import Counter
from typing import Any


def histogram_summary(histogram: Counter) -> dict[str, Any]:
    """{"histogram": {staleness: count}, "mean": ..., "max": ...} of a staleness Counter."""
    total = sum(histogram.values())
    mean = sum(tau * n for tau, n in histogram.items()) / total if total else None
    return {
        "histogram": {int(k): int(v) for k, v in sorted(histogram.items())},
        "mean": mean,
        "max": max(histogram) if histogram else None,
    }


def gradient_measures(
    server_stats: dict[str, Any], train_seconds: float, iterations: int, num_workers: int
) -> dict[str, Any]:
    """Dense staleness is counted on dense server 0 (every worker step pushes one gradient to
    each block, so block 0 sees each gradient once); row staleness over all shards. Without
    dense servers (all-reduce), steps and gradients are counted on embedding server 0."""
    dense = [s for name, s in server_stats.items() if name.startswith("dense-server")]
    sparse = [s for name, s in server_stats.items() if name.startswith("embedding-server")]
    first = dense[0] if dense else sparse[0]
    rows: Counter = Counter()
    for s in sparse:
        rows.update(s.row_staleness)
    dropped_rows: Counter = Counter()
    for s in sparse:
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
