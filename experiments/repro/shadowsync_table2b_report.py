"""The ShadowSync Table 2(b) reproduction's report (numbers from results.json): the tuning
grid of every variant, the table beside the paper's, means over seeds with their range, and
the paper's readings of it judged by `verdict.judge`."""

from __future__ import annotations

from collections.abc import Sequence
from statistics import mean
from typing import Any

from experiments.repro import reviewer
from experiments.repro.verdict import Verdict, judge

# the paper's Table 2(b): average sync gap, train loss, eval loss (20 trainers, 29 embedding
# servers, 6 sync servers; one run a cell)
PAPER = {
    "S-EASGD": (1.008, 0.78958, 0.78565),
    "FR-EASGD-5": (5.0, 0.78971, 0.78565),
    "FR-EASGD-10": (10.0, 0.78977, 0.78589),
    "FR-EASGD-30": (30.0, 0.7899, 0.78491),
    "FR-EASGD-100": (100.0, 0.79008, 0.78557),
}
SHADOW = "S-EASGD"
Rows = list[dict[str, Any]]


def _spread(values: list[float], digits: int = 5) -> str:
    """`mean (min .. max)` over seeds."""
    return f"{mean(values):.{digits}f} ({min(values):.{digits}f} .. {max(values):.{digits}f})"


def of(rows: Rows, variant: str, key: str) -> dict[int, float]:
    """seed -> `key` of one variant's rows."""
    return {r["seed"]: r[key] for r in rows if r["variant"] == variant}


def variants(results: dict[str, Any]) -> list[str]:
    return list(dict.fromkeys(r["variant"] for r in results["rows"]))


def fixed_rate(results: dict[str, Any]) -> list[str]:
    """The FR-EASGD variants, by gap."""
    found = [v for v in variants(results) if v.startswith("FR-EASGD-")]
    return sorted(found, key=lambda v: int(v.rsplit("-", 1)[1]))


def best_fixed(results: dict[str, Any]) -> str:
    """The FR-EASGD variant with the lowest mean eval logloss over the seeds."""
    rows = results["rows"]
    return min(fixed_rate(results), key=lambda v: mean(of(rows, v, "test_logloss").values()))


def verdicts(results: dict[str, Any]) -> dict[str, Verdict]:
    """The paper's readings of Table 2(b), each judged over the seeds (paired by seed):
    FR-EASGD-30 below FR-EASGD-5 (the best gap moved to 30); S-EASGD above the best FR
    (slightly worse); S-EASGD's and FR-EASGD-5's difference, FR-EASGD-100's and FR-EASGD-5's
    (the paper: comparable, so "within noise" is its reading); S-EASGD's gap below 5."""
    rows = results["rows"]
    evals = {v: of(rows, v, "test_logloss") for v in variants(results)}
    best = best_fixed(results)
    return {
        "thirty_below_five": judge(evals["FR-EASGD-30"], evals["FR-EASGD-5"], "lower"),
        "shadow_above_best": judge(evals[SHADOW], evals[best], "higher"),
        "shadow_vs_five": judge(evals[SHADOW], evals["FR-EASGD-5"], "lower"),
        "hundred_vs_five": judge(evals["FR-EASGD-100"], evals["FR-EASGD-5"], "lower"),
        "shadow_gap_below_five": judge(of(rows, SHADOW, "average_sync_gap"), 5.0, "lower"),
    }


def report(results: dict[str, Any]) -> str:
    rows: Rows = results["rows"]
    seeds = sorted({r["seed"] for r in rows})
    lines = [
        "# ShadowSync Table 2(b) in the simulator: quality against sync gap at 20 trainers",
        "",
        *_setting(results, seeds),
        "",
        "## Every variant tuned on one grid",
        "",
        *_tuning(results),
        "",
        f"## Table 2(b): {results['trainers']} trainers, {results['sync_servers']} sync servers",
        "",
        "Mean over seeds (min .. max), each variant at its own tuned rate. Sync gap: eq. 2, "
        "iterations of a trainer between two of its syncs; per thread: the same counted in "
        "one worker thread's iterations.",
        "",
        "| variant | dense lr | sync gap (eq. 2) | per thread | train loss, whole pass | "
        "train loss, last quarter | eval logloss | paper: gap, train, eval |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for v in variants(results):
        cell = {k: list(of(rows, v, k).values()) for k in _KEYS}
        gap, train, test = PAPER[v]
        lines.append(
            f"| {v} | {results['dense_lr'][v]:g} | {_gap(cell['average_sync_gap'])} | "
            f"{_gap(cell['average_sync_gap_per_thread'])} | {_spread(cell['train_loss'])} | "
            f"{_spread(cell['train_loss_last'])} | {_spread(cell['test_logloss'])} | "
            f"{gap:g}, {train:.5f}, {test:.5f} |"
        )
    text = "\n".join([*lines, "", *findings(results)])
    extra = [f"These results have {len(seeds)} seeds."]
    return reviewer.appended(text, "shadowsync-table2b", extra)


def _gap(values: Sequence[float | None]) -> str:
    """The mean gap over seeds; "-" where a run never synced (too few iterations a thread
    for its period, as in the tests' tiny setting)."""
    known = [v for v in values if v is not None]
    return f"{mean(known):.2f}" if len(known) == len(values) and known else "-"


_KEYS = (
    "average_sync_gap",
    "average_sync_gap_per_thread",
    "train_loss",
    "train_loss_last",
    "test_logloss",
)


def _setting(results: dict[str, Any], seeds: list[int]) -> list[str]:
    threads = results["workers_per_trainer"]
    return [
        "| | ours | the paper |",
        "| --- | --- | --- |",
        f"| trainers, embedding servers, sync servers | {results['trainers']}, "
        f"{results['embedding_servers']}, {results['sync_servers']} | 20, 29, 6 |",
        f"| worker threads per trainer | {threads} | 24 |",
        f"| examples, one pass | {results['examples']:,} "
        f"({results['iterations_per_thread']:.0f} iterations a worker thread, batch 256) | "
        "48,727,971,625 (Dataset-1), batch 200 |",
        "| model, loss | default DLRM on the default synthetic task (26 tables of 100 rows), "
        "logloss | Model-A, an internal loss like normalized entropy |",
        f"| hyper-parameters | recsync's defaults but the dense Adagrad rate, tuned for each "
        f"variant on the same grid (seed {results['tune_seed']}) | the production setting's, "
        "the same for every variant |",
        f"| seeds | {', '.join(map(str, seeds))} (initial weights and data order; the tuning "
        "seed left out) | one run a cell |",
        "| readers | recsync's (one per 64 worker threads), not a bottleneck | "
        "under-provisioned: reading paced training (hence S-EASGD's gap 1.008) |",
        "| S-EASGD | the shadow thread syncs without waiting | the same |",
        "",
        "Scale, plainly: a run this short ends while the model still improves, so what "
        "compares with the paper is the order of the variants, not the size of the losses. "
        f"S-EASGD's gap here is what {results['sync_servers']} sync servers' simulated NICs "
        f"give {results['trainers']} trainers' shadow threads under the stated cost model (a "
        "1.9 MB dense part against a 5.8 ms step), not the paper's reading bottleneck.",
    ]


def _tuning(results: dict[str, Any]) -> list[str]:
    grid = results["lr_grid"]
    tuning = results["lr_tuning"]
    lines = [
        f"Eval logloss of seed {results['tune_seed']} at each dense learning rate; each "
        "variant runs at its lowest (the criterion, fixed before the runs).",
        "",
        "| variant | " + " | ".join(f"lr {lr:g}" for lr in grid) + " | chosen |",
        "| --- | " + " | ".join("---" for _ in grid) + " | --- |",
    ]
    for v in variants(results):
        at = {r["dense_lr"]: r["test_logloss"] for r in tuning if r["variant"] == v}
        chosen = results["dense_lr"][v]
        lines.append(
            f"| {v} | "
            + " | ".join(f"{at[lr]:.5f}" for lr in grid)
            + f" | {chosen:g} ({_where(grid, chosen)}) |"
        )
    best_at = []
    for lr in grid:
        at = {r["variant"]: r["test_logloss"] for r in tuning if r["dense_lr"] == lr}
        best_at.append(f"{lr:g}: {min(fixed_rate(results), key=lambda v: at[v])}")
    lines += [
        "",
        f"At one shared rate, as the paper ran (seed {results['tune_seed']} alone, so no "
        "verdict), the best FR-EASGD gap at each rate: " + ", ".join(best_at) + ".",
    ]
    return lines


def _where(grid: list[float], chosen: float) -> str:
    if min(grid) < chosen < max(grid):
        return "inside the grid"
    return f"at the grid's {'top' if chosen == max(grid) else 'bottom'}: the best may lie beyond"


def findings(results: dict[str, Any]) -> list[str]:
    """The paper's readings of the table, each with its verdict."""
    rows = results["rows"]
    judged = verdicts(results)
    fixed = fixed_rate(results)
    best = best_fixed(results)
    evals = {v: mean(of(rows, v, "test_logloss").values()) for v in variants(results)}
    gap = mean(of(rows, SHADOW, "average_sync_gap").values())
    return [
        "Findings (every verdict paired by seed; an effect counts only beyond twice the seed "
        "spread, otherwise it is within noise):",
        "",
        f"- The best FR-EASGD gap: mean eval logloss over gaps "
        f"{', '.join(v.rsplit('-', 1)[1] for v in fixed)}: "
        f"{', '.join(f'{evals[v]:.5f}' for v in fixed)}; the best is {best} (the paper: "
        "FR-EASGD-30, where at 11 trainers it was FR-EASGD-5). FR-EASGD-30 below FR-EASGD-5: "
        f"{judged['thirty_below_five'].describe(5)}.",
        f"- S-EASGD {evals[SHADOW]:.5f} against the best FR ({best}, {evals[best]:.5f}) (the "
        f"paper: slightly worse, 0.78565 against 0.78491): S-EASGD above it: "
        f"{judged['shadow_above_best'].describe(5)}.",
        f"- S-EASGD against FR-EASGD-5 (the paper: the same, 0.78565), S-EASGD below: "
        f"{judged['shadow_vs_five'].describe(5)}; FR-EASGD-100 against FR-EASGD-5 (the paper: "
        f"comparable, 0.78557 and 0.78565), FR-EASGD-100 below: "
        f"{judged['hundred_vs_five'].describe(5)}. Within noise is the paper's 'comparable'.",
        f"- S-EASGD's average sync gap (eq. 2): {gap:.2f} (the paper: 1.008), below "
        f"FR-EASGD-5's 5: {judged['shadow_gap_below_five'].describe(2)}. Ours follows from "
        "the cost model's sync servers against the trainers' compute; the paper's from a slow "
        "reader.",
    ]
