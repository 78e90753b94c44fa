"""The GBA Fig. 4 reproduction's headline claims (Insight 1: the L2 norms of the dense
gradients, `sync` against BSP at several local batch sizes), the verdicts its report's
findings give (`gba_norms_report.shrinks` and `.resembles`), for the docs' claims table.
Results it cannot read (not a list of its rows, no `sync` run, fewer than two BSP batch
sizes or none at sync's) give none. All are measured (real math, over seeds)."""

from __future__ import annotations

from statistics import fmean
from typing import Any

from experiments.repro.claims import MEASURED, Claim, Effect
from experiments.repro.gba_norms_report import (
    WHICH,
    by_seed,
    distance,
    resembles,
    shrinks,
    variants,
)

PAPER = "Fig. 4: BSP (M = 100) at several local batches, sync at 6.4K on 64 workers"
NEEDED = {"strategy", "local_batch", "seed", "pushed_mean", "pushed_sd", "applied_mean"}


def _sync_batch(rows: Any) -> int | None:
    """`sync`'s local batch, where the rows are the reproduction's and BSP ran at it and at
    one other batch size at least; else None."""
    if not isinstance(rows, list) or not rows:
        return None
    if not all(isinstance(r, dict) and NEEDED | {"applied_sd"} <= r.keys() for r in rows):
        return None
    found = variants(rows)
    sync = [b for name, b in found if name == "sync"]
    bsp = [b for name, b in found if name == "bsp"]
    if len(sync) != 1 or sync[0] not in bsp or len(bsp) < 2:
        return None
    return sync[0]


def _seeds(n: int) -> str:
    return f"{n} seed" + ("s" if n != 1 else "")


def claims(rows: Any) -> list[Claim]:
    """The report's headline claims, from its results file (its rows)."""
    sync_batch = _sync_batch(rows)
    if sync_batch is None:
        return []
    bsp = [b for name, b in variants(rows) if name == "bsp"]
    lo, hi = bsp[0], bsp[-1]

    def mean_of(batch: int, key: str) -> float:
        return fmean(by_seed(rows, "bsp", batch, key).values())

    mean, sd = shrinks(rows, "pushed", "mean"), shrinks(rows, "pushed", "sd")
    out = [
        Claim(
            "a larger local batch gives lower gradient norms (the batch size sets the mean)",
            PAPER + ": the batch size determines the mean",
            f"BSP-{hi}'s pushed norms mean {mean_of(hi, 'pushed_mean'):.4f} vs BSP-{lo}'s "
            f"{mean_of(lo, 'pushed_mean'):.4f} ({_seeds(mean.seeds)})",
            mean,
            "gba",
            effect=_shrink(rows, "pushed_mean", hi, lo),
            evidence=MEASURED,
        ),
        Claim(
            "a larger local batch gives a narrower spread of gradient norms",
            PAPER + ": the batch size determines the variance",
            f"BSP-{hi}'s pushed norms sd {mean_of(hi, 'pushed_sd'):.4f} vs BSP-{lo}'s "
            f"{mean_of(lo, 'pushed_sd'):.4f} ({_seeds(sd.seeds)})",
            sd,
            "gba",
            effect=_shrink(rows, "pushed_sd", hi, lo),
            evidence=MEASURED,
        ),
    ]
    for which in ("pushed", "applied"):
        near = resembles(rows, which, sync_batch)
        out.append(
            Claim(
                "BSP's gradient norms resemble sync's at a similar aggregation size",
                PAPER + ": BSP-4K resembles sync",
                f"the norms {WHICH[which]}: BSP-{sync_batch} nearer to sync-{sync_batch} than "
                f"any other BSP (|log| of the ratio of means + of sds; {_seeds(near.seeds)})",
                near,
                "gba",
                effect=_nearer(rows, which, sync_batch, bsp),
                evidence=MEASURED,
            )
        )
    return out


def _shrink(rows: Any, key: str, hi: int, lo: int) -> Effect:
    """BSP-`hi`'s `key` minus BSP-`lo`'s, paired by seed (what `shrinks` judges)."""
    high, low = by_seed(rows, "bsp", hi, key), by_seed(rows, "bsp", lo, key)
    return Effect.difference(high, low, f"{key}, BSP-{hi} minus BSP-{lo}", "lower")


def _nearer(rows: Any, which: str, sync_batch: int, bsp: list[int]) -> Effect:
    """BSP-`sync_batch`'s distance to sync minus the nearest other BSP's, by seed (what
    `resembles` judges)."""
    seeds = sorted(by_seed(rows, "sync", sync_batch, f"{which}_mean"))
    others = [b for b in bsp if b != sync_batch]
    gaps = {
        s: distance(rows, sync_batch, which, s) - min(distance(rows, b, which, s) for b in others)
        for s in seeds
    }
    unit = f"distance to sync, BSP-{sync_batch} minus the nearest other BSP"
    return Effect.of(gaps, unit, "lower")
