"""The GBA Fig. 8 reproduction's headline claims (workers at a fixed global batch), the
verdicts its report's findings give (`gba_scaling_report.faster` and `.steady`, at the
largest worker count against the smallest), for the docs' claims table. The AUC claims are
measured (real math); the throughput's growth is built in: priced math, where n workers
sharing a fixed global batch each compute 1/n of it. Results it cannot read (not a list of
its rows, or without priced and real-math runs at two counts or more) give none."""

from __future__ import annotations

from statistics import fmean
from typing import Any

from experiments.repro.claims import BUILT_IN, MEASURED, Claim, Effect
from experiments.repro.gba_scaling import AUC_TOLERANCE
from experiments.repro.gba_scaling_report import auc_gaps, by_seed, counts, faster, steady

PAPER = "Fig. 8: 100 to 800 workers, global batch unchanged"
AUC_UNIT = "AUC, at {} minus at {} workers"


def _readable(rows: Any) -> bool:
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        return False
    needed = {"kind", "workers", "seed", "eps", "test_auc"}
    return all(needed <= r.keys() for r in rows) and all(
        len(counts(rows, kind)) >= 2 for kind in ("eps", "auc")
    )


def _seeds(values: dict[int, float]) -> str:
    return f"{len(values)} seed" + ("s" if len(values) != 1 else "")


def claims(rows: Any) -> list[Claim]:
    """The report's headline claims, from its results file (its rows)."""
    if not _readable(rows):
        return []
    eps_low, eps_high = counts(rows, "eps")[0], counts(rows, "eps")[-1]
    auc_low, auc_high = counts(rows, "auc")[0], counts(rows, "auc")[-1]
    low_eps = by_seed(rows, "eps", eps_low, "eps")
    high_eps = by_seed(rows, "eps", eps_high, "eps")
    ratio = fmean(high_eps.values()) / fmean(low_eps.values())
    gaps = auc_gaps(rows, auc_high, auc_low)
    gap = fmean(gaps.values()) if gaps else float("nan")
    below, above = steady(rows, auc_high, auc_low, AUC_TOLERANCE)
    setting = f"{auc_low} to {auc_high} workers, the global batch fixed"
    return [
        Claim(
            "at a fixed global batch, GBA's throughput grows with the workers",
            PAPER + ", global QPS growing (no numbers in the text)",
            f"EPS at {eps_high} workers {ratio:.2f}x the EPS at {eps_low} (priced math, "
            f"under stragglers; {_seeds(high_eps)})",
            faster(rows, eps_high, eps_low),
            "gba",
            effect=Effect.of(
                {seed: high_eps[seed] / low_eps[seed] for seed in high_eps.keys() & low_eps.keys()},
                f"x the EPS at {eps_low} workers",
                "higher",
                1.0,
                digits=2,
            ),
            evidence=BUILT_IN,
            mechanism="priced math: n workers sharing a fixed global batch each compute 1/n of "
            "it a step",
        ),
        Claim(
            f"GBA's AUC does not fall as the workers grow (not more than {AUC_TOLERANCE:g} below)",
            PAPER + ", AUC steady (the paper's bound lost in its text's extraction)",
            f"AUC({auc_high}) - AUC({auc_low}) {gap:+.4f}, {setting}; tolerance "
            f"{AUC_TOLERANCE:g} is ours ({_seeds(gaps)})",
            below,
            "gba",
            effect=Effect.of(gaps, AUC_UNIT.format(auc_high, auc_low), "higher", -AUC_TOLERANCE),
            evidence=MEASURED,
        ),
        Claim(
            f"GBA's AUC does not rise as the workers grow (not more than {AUC_TOLERANCE:g} above)",
            PAPER + ", AUC steady",
            f"AUC({auc_high}) - AUC({auc_low}) {gap:+.4f}, {setting}; tolerance "
            f"{AUC_TOLERANCE:g} is ours ({_seeds(gaps)})",
            above,
            "gba",
            effect=Effect.of(gaps, AUC_UNIT.format(auc_high, auc_low), "lower", AUC_TOLERANCE),
            evidence=MEASURED,
        ),
    ]
