"""The PSP reproduction's rows (one a run), picked out by what each panel compares: the
paper setting, the no-delay panel, the delay-rate sweep. Rows written before the panel and
the sweep existed hold only sync's no-delay runs, in the paper setting under NO_DELAYS.

Its results file is {"rows": [...], "tuning": [...], "tuning_runs": [...]}: the runs, each
variant's tuning (`settle.Tuned.as_dict`) and the tuning's own runs; one written before the
tuning is the list of rows alone (`rows_of`, `tuning_of` read either)."""

from __future__ import annotations

import statistics
from typing import Any

from experiments.repro.psp_settings import (
    FAULTS,
    NO_DELAY,
    NO_DELAYS,
    PAPER,
    SWEEP,
    SWEEP_VARIANTS,
    SYNC,
)

Rows = list[dict[str, Any]]
ByVariant = dict[str, Rows]
Results = Rows | dict[str, Any]


def rows_of(results: Results) -> Rows:
    """The runs of a results file of either shape."""
    return results["rows"] if isinstance(results, dict) else results


def tuning_of(results: Results) -> list[dict[str, Any]]:
    """Each tuned variant's `Tuned.as_dict()`; none in a results file of before the tuning."""
    return results.get("tuning", []) if isinstance(results, dict) else []


def tuning_runs_of(results: Results) -> Rows:
    """The tuning's own runs; none before the tuning."""
    return results.get("tuning_runs", []) if isinstance(results, dict) else []


def by_variant(rows: Rows, setting: str) -> ByVariant:
    by: ByVariant = {}
    for r in rows:
        if r["setting"] == setting:
            by.setdefault(r["variant"], []).append(r)
    return by


def no_delay_runs(rows: Rows) -> ByVariant:
    """Every variant's runs without delays; rows that predate the panel hold only sync's,
    in the paper setting under NO_DELAYS."""
    by = by_variant(rows, NO_DELAY)
    legacy = by_variant(rows, PAPER).get(NO_DELAYS)
    if not by and legacy:
        by[SYNC] = legacy
    return by


def paper_runs(rows: Rows) -> ByVariant:
    """The paper setting's runs by variant, the no-delay sync runs first (as NO_DELAYS)."""
    by = {v: runs for v, runs in by_variant(rows, PAPER).items() if v != NO_DELAYS}
    clean = no_delay_runs(rows).get(SYNC)
    return {NO_DELAYS: clean, **by} if clean else by


def sweep_runs(rows: Rows) -> dict[float, ByVariant]:
    """The sweep's variants by delay rate: its own rates, the panel's 0, the paper's rate."""
    sources = [(0.0, no_delay_runs(rows)), (FAULTS.delay_fraction, by_variant(rows, PAPER))]
    for r in rows:
        if r["setting"] == SWEEP:
            sources.append((r["delay_fraction"], {r["variant"]: [r]}))
    sweep: dict[float, ByVariant] = {}
    for fraction, by in sources:
        for variant in SWEEP_VARIANTS:
            sweep.setdefault(fraction, {}).setdefault(variant, []).extend(by.get(variant, []))
    return {f: sweep[f] for f in sorted(sweep) if sweep[f][SYNC]}


def mean(runs: Rows, key: str) -> float:
    return statistics.fmean(r[key] for r in runs)


def per_seed(runs: Rows, key: str) -> dict[int, float]:
    return {r["seed"]: r[key] for r in runs}


def ratios(runs: Rows, base: Rows) -> dict[int, float]:
    """Each seed's virtual time over the base runs' of the same seed."""
    base_s = per_seed(base, "virtual_seconds")
    return {s: t / base_s[s] for s, t in per_seed(runs, "virtual_seconds").items() if s in base_s}


def seeds_of(by: ByVariant) -> int:
    return min(len(runs) for runs in by.values())
