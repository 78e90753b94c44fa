"""ShadowSync Fig. 8's headline claims, for the docs' claims table: the train and eval loss
rising with the worker threads, the verdicts its report's findings give
(`shadowsync_threads.findings`), from the same rows with the same `judge` calls. EPS stopping
at 24 threads follows from the stated compute model (its report says so), so it is no
claim here. Results of another shape give none."""

from __future__ import annotations

from statistics import mean
from typing import Any

from experiments.repro import shadowsync_threads
from experiments.repro.claims import Claim
from experiments.repro.shadowsync_points import by_seed
from experiments.repro.verdict import judge

LOSSES = (("train_loss", "train loss"), ("test_logloss", "eval logloss"))


def _is_current(rows: Any) -> bool:
    return (
        isinstance(rows, list)
        and bool(rows)
        and all(isinstance(r, dict) and "math" in r and "threads" in r for r in rows)
    )


def claims(rows: Any) -> list[Claim]:
    """The loss at the most threads against one thread, train and eval (real math)."""
    if not _is_current(rows):
        return []
    quality = [r for r in rows if r["math"] == "real"]
    few, most = shadowsync_threads.THREADS[0], shadowsync_threads.THREADS[-1]
    trainers = " and ".join(map(str, sorted({r["trainers"] for r in quality})))
    made = []
    for key, name in LOSSES:
        high, low = by_seed(quality, key, threads=most), by_seed(quality, key, threads=few)
        if not (high and low):
            return []
        v = judge(high, low, "higher")
        rise = 100 * (mean(high.values()) - mean(low.values())) / mean(low.values())
        seeds = f"{v.seeds} seed" + ("s" if v.seeds != 1 else "")
        made.append(
            Claim(
                f"more Hogwild worker threads a trainer raise the {name}",
                "Fig. 8: losses increase from 1 to 64 threads, mildly against the EPS gained "
                "(5 and 10 trainers; no number given)",
                f"{trainers} trainers: {name} {mean(low.values()):.5f} at {few} "
                f"thread, {mean(high.values()):.5f} at {most} ({rise:+.2f}%), real math "
                f"({seeds})",
                v,
                "worker threads",
            )
        )
    return made
