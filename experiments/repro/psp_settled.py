"""How the PSP reproduction's claims that ran against the paper settle: the rate tuning
(every variant on one grid, `settle.tune`), the run length (`settle.Flattening` on each
run's held-out loss curve, the curves plotted) and, for each such claim, which way it went
with its number, its spread over seeds and its verdict. Read off the results file alone."""

from __future__ import annotations

import math
import statistics
from pathlib import Path
from typing import Any

from experiments.repro import settle
from experiments.repro.claims import Effect
from experiments.repro.psp_rows import (
    ByVariant,
    Results,
    Rows,
    by_variant,
    mean,
    no_delay_runs,
    per_seed,
    rows_of,
    seeds_of,
    tuning_of,
)
from experiments.repro.psp_settings import (
    DENSE_LR,
    EVALS,
    FLATTENING,
    GRID,
    NO_DELAY,
    PAPER,
    PUSH,
    PUSH_PULL,
    ROW_LR,
    STEPS_PER_WORKER,
    SYNC,
    TUNE_SEED,
)
from experiments.repro.settled_words import settled
from experiments.repro.verdict import WITHIN_NOISE, judge

CURVES = {NO_DELAY: "psp_curves_no_delays.png", PAPER: "psp_curves_delayed.png"}
SHORT = {NO_DELAY: "no delays", PAPER: "0.16% of dense pulls delayed"}  # the plots' titles


def tuning_section(results: Results) -> list[str]:
    """The tuning's table: each variant's factors tried with their scores, the chosen one
    and whether it sits at an edge of what was tried."""
    tuning = tuning_of(results)
    title = "## Learning rates: every variant tuned on one grid"
    if not tuning:
        return [
            title,
            "",
            "Not in these results (one rate, set for sync, served every variant).",
            "",
        ]
    lines = [
        title,
        "",
        f"Each variant's dense SGD rate ({DENSE_LR:g}) and row Adagrad rate ({ROW_LR:g}) are "
        "multiplied by one factor (then by d, linear scaling), tuned per variant on the same "
        f"grid {', '.join(f'{v:g}' for v in GRID.values)}, extended by x{GRID.step:g} past an "
        f"edge up to {settle.MAX_EXTENSIONS} times. Score: the final held-out logloss of a "
        f"tuning run (seed {TUNE_SEED}, none of the claims' seeds; no delays; "
        f"{STEPS_PER_WORKER} steps a worker, as every run). The chosen factor serves the "
        "variant in every setting (the delays change no update of sync's, and which 4 of "
        "32 gradients a step of c=28 drops, not how many).",
        "",
        "| variant | factors tried: held-out logloss | chosen | at an edge |",
        "| --- | --- | --- | --- |",
    ]
    for t in tuning:
        tried, edge = settle.tried_text(t, digits=4), settle.edge_text(t)
        lines.append(f"| {t['variant']} | {tried} | {t['chosen']:g} | {edge} |")
    return [*lines, ""]


def change(run: dict[str, Any]) -> float:
    """The held-out loss's relative improvement over the last part of the run (NaN where
    the run kept no curve)."""
    curve = [tuple(p) for p in run.get("curve", [])]
    return FLATTENING.change(curve) if curve else math.nan


def mean_curve(runs: Rows) -> list[tuple[float, float]]:
    """The seeds' mean held-out loss at each evaluation (the runs share their marks)."""
    curves = [r["curve"] for r in runs if r.get("curve")]
    if not curves:
        return []
    marks = min(len(c) for c in curves)
    return [
        (statistics.fmean(c[i][0] for c in curves), statistics.fmean(c[i][1] for c in curves))
        for i in range(marks)
    ]


def length_section(results: Results) -> list[str]:
    """Whether each run's held-out loss has flattened, by setting and variant."""
    rows = rows_of(results)
    title = "## Run length: has the held-out loss flattened?"
    settings = {s: by_variant(rows, s) for s in (NO_DELAY, PAPER)}
    if not any(r.get("curve") for r in rows):
        return [title, "", "Not in these results (they kept no held-out loss curves).", ""]
    lines = [
        title,
        "",
        f"Criterion (settle.Flattening): {FLATTENING.describe()}. Every run is "
        f"{STEPS_PER_WORKER} steps a worker, its held-out logloss evaluated {EVALS} times.",
        "",
        "| setting | variant | flattened (seeds) | improvement over the last "
        f"{FLATTENING.last_fraction:.0%}: mean (max) |",
        "| --- | --- | --- | --- |",
    ]
    for setting, by in settings.items():
        for variant, runs in by.items():
            changes = [change(r) for r in runs]
            flat = sum(not math.isnan(c) and c < FLATTENING.tolerance for c in changes)
            lines.append(
                f"| {setting} | {variant} | {flat} of {len(runs)} | "
                f"{statistics.fmean(changes):.2%} ({max(changes):.2%}) |"
            )
    lines += [
        "",
        "The curves: each variant's held-out logloss, the mean over seeds at each "
        f"evaluation; grey, the last {FLATTENING.last_fraction:.0%} that the rule reads.",
        "",
    ]
    for setting, name in CURVES.items():
        if settings[setting]:
            lines += [f"![held-out loss, {setting}]({name})", ""]
    return lines


def write_curves(results: Results, out_dir: Path) -> None:
    """The seeds' mean held-out loss curve of every variant, one figure a setting."""
    rows = rows_of(results)
    for setting, name in CURVES.items():
        by = by_variant(rows, setting)
        curves = settle.Curves({v: mean_curve(runs) for v, runs in by.items()})
        curves.curves = {v: c for v, c in curves.curves.items() if c}
        if curves.curves:
            curves.plot(
                out_dir / name,
                f"PSP, {SHORT[setting]}: held-out logloss (mean over seeds)",
                "steps a worker",
                FLATTENING,
            )


def loss_gap(by: ByVariant, variant: str) -> Effect:
    """`variant`'s final test logloss minus sync's, paired by seed (the paper: not above)."""
    return Effect.difference(
        per_seed(by[variant], "test_logloss"),
        per_seed(by[SYNC], "test_logloss"),
        f"test logloss, {variant} minus sync",
        "lower",
    )


def settled_section(results: Results) -> list[str]:
    """Which way each claim that ran against the paper went: the no-delay panel's (Fig. 3)
    losses of c=28 and c=28 + b=90% against sync's, and their time."""
    by = no_delay_runs(rows_of(results))
    title = "## How the claims that ran against the paper settle"
    if PUSH not in by or SYNC not in by:
        return [title, "", "Not in these results (they predate the no-delay panel).", ""]
    seeds = seeds_of(by)
    lines = [
        title,
        "",
        'Without delays (the paper\'s Fig. 3: PSP performs "as good as the baseline" and '
        f"converges faster), {seeds} seeds, "
        + (
            f"every variant at its tuned rate, {STEPS_PER_WORKER} steps a worker:"
            if tuning_of(results)
            else "every variant at the rate set for sync (no tuning in these results):"
        ),
        "",
    ]
    sync_s = per_seed(by[SYNC], "virtual_seconds")
    for variant in (PUSH, PUSH_PULL):
        if variant not in by:
            continue
        gap = loss_gap(by, variant)
        v = judge(
            per_seed(by[variant], "test_logloss"), per_seed(by[SYNC], "test_logloss"), "lower"
        )
        time = judge(per_seed(by[variant], "virtual_seconds"), sync_s, "lower")
        # within noise on "lower" is still as good as sync by the match rule
        match = ": as good as sync by the match rule" if v.label == WITHIN_NOISE else ""
        faster = 1 - mean(by[variant], "virtual_seconds") / mean(by[SYNC], "virtual_seconds")
        lines.append(
            f"- {variant}: test logloss {mean(by[variant], 'test_logloss'):.4f} against "
            f"sync's {mean(by[SYNC], 'test_logloss'):.4f}, {gap.describe_size()} "
            f"({gap.describe_spread()}); as good as sync: {v.describe()}: "
            f"{settled(v)}{match}. Time: {abs(faster):.1%} "
            f"{'less' if faster >= 0 else 'more'} than sync's, {time.describe(1)}."
        )
    return [*lines, ""]
