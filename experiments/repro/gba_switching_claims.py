"""The GBA switching reproduction's headline claims, the verdicts its report's findings
give (`gba_switching_report.switched`), for the docs' claims table. Results written before
issue 55's setting (one seed, all-reduce on a segment only) give none."""

from __future__ import annotations

import statistics
from typing import Any

from experiments.repro.claims import Claim
from experiments.repro.gba_switching_report import PAPER_EPS_RATIO, WITHIN, switched


def claims(result: Any) -> list[Claim]:
    if not isinstance(result, dict) or "segment" in result:
        return []
    sw = switched(result)
    n = sw.within.seeds
    seeds = f"{n} seed" + ("s" if n != 1 else "")
    return [
        Claim(
            "switching from synchronous training to GBA keeps its AUC with the same "
            "hyper-parameters",
            "Fig. 6: GBA after sync tracks continuing sync",
            f"worst gap to continuing all-reduce {statistics.fmean(sw.gba_worst.values()):.4f} "
            f"AUC, within {WITHIN} ({seeds})",
            sw.within,
            "gba",
        ),
        Claim(
            "GBA after the switch trains faster than the synchronous baseline",
            f"{PAPER_EPS_RATIO} all-reduce's throughput",
            f"{statistics.fmean(sw.speed.values()):.2f}x all-reduce's EPS under the "
            f"stragglers ({seeds})",
            sw.faster,
            "gba",
        ),
    ]
