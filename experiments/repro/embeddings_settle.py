"""How the hash-embedding reproduction settles its claims that ran against the papers
(`settle.py`): every variant of the quality and of the continual runs tuned on one grid of
a factor of both default Adagrad rates (on `Setting.tuning_seed`, scored on held-out
examples that are not the ones the claims read), the runs the claims read on every seed at
the chosen factor, and the held-out loss curves checked by `settle.Flattening`."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import Any

from experiments.repro import settle
from experiments.repro.common import run_in_processes
from experiments.repro.embeddings_setting import (
    CONTINUAL_VARIANTS,
    Setting,
    claims,
    quality_label,
    quality_variants,
)
from experiments.repro.registry import Progress
from experiments.repro.settle import Curves, Flattening, Grid, Tuned, tune
from experiments.repro.settled_words import settled

RULE = Flattening()
Run = Callable[[Any], dict[str, Any]]


def tuned_runs(
    setting: Setting,
    variants: dict[str, Callable[[int, float], Any]],
    run: Run,
    seeds: tuple[int, ...],
    progress: Progress | None,
) -> tuple[dict[str, Tuned], list[dict[str, Any]]]:
    """Every variant (its label: a function of (seed, factor) to its run's item) tuned on
    the setting's grid by the validation logloss of the tuning seed, then run on every seed
    at its chosen factor (the tuning seed's run reused): the tuning and the final runs."""
    done: dict[tuple[str, int, float], dict[str, Any]] = {}

    def scores(points: list[tuple[Hashable, float]]) -> list[float]:
        keys = [(str(label), setting.tuning_seed, factor) for label, factor in points]
        return [r["validation_logloss"] for r in _runs(keys, variants, run, done, progress)]

    tuned = {
        str(label): t
        for label, t in tune(list(variants), Grid(setting.grid), scores, False).items()
    }
    keys = [(label, seed, tuned[label].chosen) for seed in seeds for label in variants]
    return tuned, _runs(keys, variants, run, done, progress)


def _runs(
    keys: list[tuple[str, int, float]],
    variants: dict[str, Callable[[int, float], Any]],
    run: Run,
    done: dict[tuple[str, int, float], dict[str, Any]],
    progress: Progress | None,
) -> list[dict[str, Any]]:
    """The runs of (label, seed, factor) keys, those not in `done` computed (and kept)."""
    todo = [k for k in dict.fromkeys(keys) if k not in done]
    items = [variants[label](seed, factor) for label, seed, factor in todo]
    done.update(zip(todo, run_in_processes(run, items, progress), strict=True))
    return [done[k] for k in keys]


def quality_items(setting: Setting) -> dict[str, Callable[[int, float], Any]]:
    """Each quality variant's label and its run's item."""

    def item(variant: str, cap: int | None) -> Callable[[int, float], Any]:
        return lambda seed, factor: (setting, variant, seed, cap, factor)

    return {quality_label(v, cap): item(v, cap) for v, cap in quality_variants(setting)}


def continual_items(setting: Setting) -> dict[str, Callable[[int, float], Any]]:
    """Each continual variant and its run's item."""

    def item(variant: str) -> Callable[[int, float], Any]:
        return lambda seed, factor: (setting, variant, seed, factor)

    return {variant: item(variant) for variant in CONTINUAL_VARIANTS}


def continual_curve(run: dict[str, Any]) -> list[tuple[float, float]]:
    """A continual run's held-out loss over the days: the next-day normalized entropy after
    each day (position: days trained; the logloss over the entropy of the day's base rate,
    so that days whose examples differ in their click rate compare)."""
    return [(d["day"] + 1.0, d["next_day_ne"]) for d in run["days"]]


def mean_curves(
    runs: list[dict[str, Any]], curve: Callable[[dict[str, Any]], list[tuple[float, float]]]
) -> dict[str, list[tuple[float, float]]]:
    """Each variant's curve, the mean over its seeds at each position."""
    out: dict[str, list[tuple[float, float]]] = {}
    for label in dict.fromkeys(r["variant"] for r in runs):
        curves = [curve(r) for r in runs if r["variant"] == label]
        out[label] = [
            (float(points[0][0]), statistics.fmean(loss for _, loss in points))
            for points in zip(*curves, strict=True)
        ]
    return out


def quality_curve(run: dict[str, Any]) -> list[tuple[float, float]]:
    return [(float(p), float(loss)) for p, loss in run["held_out_curve"]]


def flattening(
    runs: list[dict[str, Any]], curve: Callable[[dict[str, Any]], list[tuple[float, float]]]
) -> dict[str, dict[str, Any]]:
    """Per variant: each seed's change over the criterion's window, and how many met it."""
    out: dict[str, dict[str, Any]] = {}
    for run in runs:
        if "held_out_curve" not in run and "days" not in run:
            continue
        entry = out.setdefault(run["variant"], {"changes": {}, "flat": 0})
        change = RULE.change(curve(run))
        entry["changes"][run.get("seed", 0)] = change
        entry["flat"] += RULE.flat(curve(run))
    return out


def plot_curves(results: dict[str, Any], out_dir: Path) -> None:
    """quality_held_out.png and continual_held_out.png, each variant's mean over seeds."""
    quality = [r for r in results["quality"] if "held_out_curve" in r]
    if quality:
        Curves(mean_curves(quality, quality_curve)).plot(
            out_dir / "quality_held_out.png",
            "Quality runs: held-out loss (test split, mean over seeds)",
            "examples trained",
            RULE,
        )
    continual = [r for r in results["continual"] if "next_day_logloss" in r["days"][0]]
    if continual:
        Curves(mean_curves(continual, continual_curve)).plot(
            out_dir / "continual_held_out.png",
            "Continual runs: next-day held-out NE, logloss / base-rate entropy (mean over seeds)",
            "days trained",
            RULE,
        )


def tuning_lines(results: dict[str, Any]) -> list[str]:
    """The tuning tables and the flattening check, for the report."""
    tuning = results.get("tuning")
    if not tuning:
        return []
    s = results["setting"]
    lines = [
        "## Tuning and run length",
        "",
        "Every variant of parts 1 and 2 tuned on one grid: a factor of both default Adagrad "
        f"rates (dense 0.01, rows 0.05), {', '.join(f'{v:g}' for v in s['grid'])}, grown by "
        "x2 past an edge where the best sits there (`settle.tune`); on training seed "
        f"{s['tuning_seed']}, lower validation logloss better. Part 1 scores on "
        f"{s['validation_examples']:,} held-out examples of the last day that are not the "
        "test split the claims read; part 2 on the task's test split of the day after the "
        "last trained (a stream of its own; the claims read the next-day examples).",
        "",
        "| part | variant | factors tried: validation logloss | chosen | at an edge? |",
        "| --- | --- | --- | --- | --- |",
    ]
    for part, tuned in tuning.items():
        for label, t in tuned.items():
            tried, edge = settle.tried_text(t), settle.edge_text(t)
            lines.append(f"| {part} | {label} | {tried} | {t['chosen']:g} | {edge} |")
    lines += [
        "",
        f"Run length, criterion (`settle.Flattening`): {RULE.describe()}. Part 1: the "
        f"held-out loss on the test split at {s['eval_marks']} marks over each run; part 2: "
        "the next-day held-out loss over the days, as NE (the logloss over the entropy of the "
        "day's click rate, so days compare; its last 25%: the last days).",
        "",
        "![quality held-out loss](quality_held_out.png) "
        "![continual held-out loss](continual_held_out.png)",
        "",
        "| part | variant | change over the window, each seed | seeds flat |",
        "| --- | --- | --- | --- |",
    ]
    for part, runs, curve in (
        ("quality", results["quality"], quality_curve),
        ("continual", results["continual"], continual_curve),
    ):
        for label, f in flattening(runs, curve).items():
            changes = ", ".join(f"{c:+.2%}" for c in f["changes"].values())
            lines.append(f"| {part} | {label} | {changes} | {f['flat']} of {len(f['changes'])} |")
    short = [
        label
        for runs, curve in (
            (results["quality"], quality_curve),
            (results["continual"], continual_curve),
        )
        for label, f in flattening(runs, curve).items()
        if f["flat"] < len(f["changes"])
    ]
    lines += [
        "",
        *settled_lines(results),
        "- Every run met the criterion."
        if not short
        else f"- Not flat by the criterion on every seed: {'; '.join(short)} (the changes "
        "above: how much the held-out loss still fell over the window; longer runs were not "
        "run).",
    ]
    return lines


def settled_lines(results: dict[str, Any]) -> list[str]:
    """Which way each headline claim settled: its number, spread over seeds and verdict."""
    lines = []
    for claim in claims(results):
        effect = claim.effect
        lines.append(
            f"- {claim.claim} ({claim.ours}): {settled(claim.verdict)}; "
            f"{effect.describe_size()} ({effect.describe_spread()}), **{claim.label()}**."
        )
    return lines
