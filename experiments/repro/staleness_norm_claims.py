"""The staleness-normalization reproduction's headline claims (Liu & Zhao's Fig. 5), the
verdicts its report's findings give (`staleness_norm_report.shape`), for the docs' claims
table. All three are measured (real math, paired by seed)."""

from __future__ import annotations

from typing import Any

from experiments.repro.claims import MEASURED, Claim, Effect
from experiments.repro.staleness_norm_report import NEAR, labels_of, shape, size_name


def claims(result: dict[str, Any]) -> list[Claim]:
    """The report's headline claims (Fig. 5), from its results file."""
    names, s = labels_of(result), shape(result)
    small, large = size_name(names.small), size_name(names.large)
    seeds = f"{s.near.seeds} seed" + ("s" if s.near.seeds != 1 else "")
    return [
        Claim(
            f"with rho, asynchronous SGD at {large} workers reaches about the AUC at {small}",
            "Fig. 5: rho at 3K workers about the 1K AUC, both baselines short",
            f"{large} with rho {-s.mean_rho_gap:+.4f} AUC from {small} un-normalized, gap "
            f"below {NEAR} ({seeds})",
            s.near,
            "staleness_norm",
            effect=Effect.of(
                s.rho_gap, f"AUC, |{small} un-normalized - {large} with rho|", "lower", NEAR
            ),
            evidence=MEASURED,
        ),
        Claim(
            "rho closes the gap that no normalization leaves",
            "Fig. 5: no normalization at 3K short of 1K",
            f"gap to {small}: rho {-s.mean_rho_gap:+.4f}, none {-s.mean_none_gap:+.4f} ({seeds})",
            s.closer,
            "staleness_norm",
            effect=Effect.difference(
                s.rho_gap, s.none_gap, f"AUC gap to {small}, rho's minus none's", "lower"
            ),
            evidence=MEASURED,
        ),
        Claim(
            "linear normalization (1/tau) converges worst",
            "Fig. 5: 1/tau the lowest curve",
            f"1/tau below the next lowest {large} run, {s.runner_up} ({seeds})",
            s.worst_verdict,
            "staleness_norm",
            effect=Effect.difference(
                s.auc[names.inverse], s.auc[s.runner_up], f"AUC, 1/tau minus {s.runner_up}", "lower"
            ),
            evidence=MEASURED,
        ),
    ]
