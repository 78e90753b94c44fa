"""The gba-global-batch reproduction's headline claims (GBA Fig. 8, right), the verdicts its
report's findings give at sync's rates (`gba_global_batch_report.untuned`), one for the
smallest and one for the largest global batch against sync's, for the docs' claims table.
Measured: real math after a real checkpoint; the stragglers are injected but act alike on
every batch compared. Results it cannot read give none."""

from __future__ import annotations

import statistics
from typing import Any

from experiments.repro import gba_global_batch_report as report
from experiments.repro.claims import MEASURED, Claim, Effect

PAPER = "Fig. 8 (right): 400 workers, the local batch varied after switching from sync"


def _readable(result: Any) -> bool:
    if not isinstance(result, dict) or not {"runs", "settings"} <= result.keys():
        return False
    runs = result["runs"]
    if not runs or not all(isinstance(r, dict) and "mean_auc" in r for r in runs):
        return False
    here = report.batches(result)
    return (
        report.matched(result) in here
        and len(here) >= 2
        and report.UNTUNED in report.factors(result)
    )


def claims(result: Any) -> list[Claim]:
    if not _readable(result):
        return []
    m, workers = report.matched(result), int(result["settings"]["workers"])
    out = []
    others = [b for b in report.batches(result) if b != m]
    for b in dict.fromkeys((others[0], others[-1])):
        gaps = report.gaps(result, b)
        if not gaps:
            continue
        side = "smaller" if b < m else "larger"
        seeds = f"{len(gaps)} seed" + ("s" if len(gaps) != 1 else "")
        out.append(
            Claim(
                f"after switching from sync, GBA at a {side} global batch than sync's reaches "
                "a lower AUC without re-tuning",
                PAPER + ", sync's hyper-parameters kept (no numbers in the text)",
                f"AUC at sync's global batch {m * workers:,} minus at {b * workers:,}: "
                f"{statistics.fmean(gaps.values()):+.4f}, {workers} workers, sync's rates "
                f"({seeds})",
                report.untuned(result, b),
                "gba",
                effect=Effect.of(gaps, f"AUC, sync's global batch minus {b * workers:,}", "higher"),
                evidence=MEASURED,
            )
        )
    return out
