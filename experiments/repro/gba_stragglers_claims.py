"""The GBA stragglers reproduction's headline claims, the verdicts its report's findings
give (`gba_stragglers_report.main_claims`), for the docs' claims table. Results written
before issue 55's setting (one seed a strategy) give none."""

from __future__ import annotations

from typing import Any

from experiments.repro.claims import Claim
from experiments.repro.gba_stragglers_report import PAPER_SPEEDUP, WITHIN, main_claims, mean


def claims(result: Any) -> list[Claim]:
    if not isinstance(result, dict):  # the older, one-seed results
        return []
    m = main_claims(result)
    seeds = f"{m.close.seeds} seed" + ("s" if m.close.seeds != 1 else "")
    gba, sync, bsp = mean(m.auc["GBA"]), mean(m.auc["sync"]), mean(m.auc["BSP"])
    return [
        Claim(
            "GBA keeps sync's AUC under stragglers",
            "Tab. 5.3: GBA 0.7864-0.7866, sync 0.7864",
            f"GBA {gba:.4f}, sync {sync:.4f}: within {WITHIN} ({seeds})",
            m.close,
            "gba",
        ),
        Claim(
            f"GBA trains at least {PAPER_SPEEDUP}x as fast as sync under stragglers",
            f"abstract: at least {PAPER_SPEEDUP}x; Tab. 5.2: 2.0-2.3x",
            f"{mean(m.speedup):.2f}x (set by the injected stragglers, see the report; {seeds})",
            m.faster,
            "gba",
        ),
        Claim(
            "GBA's staleness decay does better than BSP's same buffer without it",
            "Sec. 5: GBA above BSP",
            f"AUC GBA {gba:.4f}, BSP {bsp:.4f} ({seeds})",
            m.over_bsp,
            "gba",
        ),
    ]
