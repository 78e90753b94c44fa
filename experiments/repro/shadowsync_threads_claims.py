"""ShadowSync Fig. 8's headline claims, for the docs' claims table: the train and eval loss
rising with the worker threads, the verdicts its report's findings give
(`shadowsync_threads.findings`), from the same rows with the same `judge` calls, measured
(real math); and EPS stopping at 24 threads, which is built in: the stated compute model
(`shadowsync_points.threads_cost`) gives a trainer's threads its full compute at 24 and no
more beyond. Results of another shape give none."""

from __future__ import annotations

from statistics import mean
from typing import Any

from experiments.repro import shadowsync_threads
from experiments.repro.claims import BUILT_IN, MEASURED, Claim, Effect
from experiments.repro.shadowsync_points import SATURATING_THREADS, by_seed
from experiments.repro.verdict import judge

LOSSES = (("train_loss", "train loss"), ("test_logloss", "eval logloss"))
FLAT = 0.1  # ours: EPS at the most threads within 10% of the EPS at 24 is "flat"


def _is_current(rows: list[Any]) -> bool:
    return (
        isinstance(rows, list)
        and bool(rows)
        and all(isinstance(r, dict) and "math" in r and "threads" in r for r in rows)
    )


def claims(rows: Any) -> list[Claim]:
    """The loss at the most threads against one thread, train and eval (real math), from
    results.json (its rows, tuned or not)."""
    rows = shadowsync_threads.rows_of(rows)
    if not _is_current(rows):
        return []
    quality = [r for r in rows if r["math"] == "real"]
    few, most = shadowsync_threads.THREADS[0], shadowsync_threads.THREADS[-1]
    trainers = " and ".join(map(str, sorted({r["trainers"] for r in quality})))
    tuned = "each count at its tuned dense rate, " if quality and "dense_lr" in quality[0] else ""
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
                f"thread, {mean(high.values()):.5f} at {most} ({rise:+.2f}%), {tuned}real "
                f"math ({seeds})",
                v,
                "worker threads",
                effect=Effect.difference(high, low, f"{name}, {most} minus {few} thread", "higher"),
                evidence=MEASURED,
            )
        )
    return made + _flat(rows, most)


def _flat(rows: list[dict[str, Any]], most: int) -> list[Claim]:
    """EPS at the most threads over the EPS at 24 (priced math, the fewest trainers)."""
    eps = [r for r in rows if r["math"] == "priced"]
    if not eps:
        return []
    trainers = min(r["trainers"] for r in eps)
    full = SATURATING_THREADS
    high = by_seed(eps, "eps", threads=most, trainers=trainers)
    base = by_seed(eps, "eps", threads=full, trainers=trainers)
    ratio = {s: high[s] / base[s] for s in sorted(high.keys() & base.keys())}
    if not ratio:
        return []
    v = judge({s: abs(r - 1) for s, r in ratio.items()}, FLAT, "lower")
    seeds = f"{v.seeds} seed" + ("s" if v.seeds != 1 else "")
    return [
        Claim(
            f"EPS stops growing at {full} worker threads a trainer",
            "Fig. 8: EPS flat from 24 threads on (the trainers' memory bandwidth saturates)",
            f"{trainers} trainers: EPS at {most} threads {mean(ratio.values()):.2f}x the EPS at "
            f"{full}; flat is within {FLAT:.0%} (ours); priced math ({seeds})",
            v,
            "worker threads",
            effect=Effect.of(ratio, f"x EPS at {full} threads", "within", 1.0, FLAT, digits=2),
            evidence=BUILT_IN,
            mechanism=f"the stated compute model gives a trainer's threads its full compute at "
            f"{full} threads and no more beyond",
        )
    ]
