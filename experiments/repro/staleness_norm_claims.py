"""The staleness-normalization reproduction's headline claims (Liu & Zhao's Fig. 5; and
Fig. 6 at each size for results with every variant tuned), the verdicts its report's
findings give (`staleness_norm_shape.shape`, `data_norm`), for the docs' claims table. All
are measured (real math, paired by seed)."""

from __future__ import annotations

from typing import Any

from experiments.repro.claims import MEASURED, Claim, Effect
from experiments.repro.staleness_norm_shape import (
    NEAR,
    DataNorm,
    by_label,
    data_norm,
    labels_of,
    per_seed,
    shape,
    size_name,
)


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
        *(fig6_claims(result) if "tuned" in result else []),
    ]


def fig6_claims(result: dict[str, Any]) -> list[Claim]:
    """Fig. 6 at each size run: data normalization over rho raises the AUC."""
    names, runs = labels_of(result), by_label(result)
    pairs = {
        size_name(names.small): (names.rho_small_data, names.rho_small),
        size_name(names.large): (names.rho_large_data, names.rho_large),
    }
    paper = result["paper"]["fig6_gain"]
    out = []
    for d in data_norm(result):
        if not isinstance(d, DataNorm):
            continue
        with_data, plain = (per_seed(runs, label) for label in pairs[d.size])
        out.append(
            Claim(
                f"data normalization over rho raises the AUC at {d.size} workers",
                f"Fig. 6: {paper[d.paper_workers]} at {int(d.paper_workers) // 1000}K",
                f"{d.size} rho + data normalization {d.gain:+.4f} AUC above rho alone "
                f"({d.verdict.seeds} seeds)",
                d.verdict,
                "staleness_norm",
                effect=Effect.difference(
                    with_data, plain, f"AUC, rho + data norm minus rho at {d.size}", "higher"
                ),
                evidence=MEASURED,
            )
        )
    return out
