"""swap-days' report: next-day AUC over the days, the tuning, each day's flattening, and
Fig. 7's two claims judged on the per-seed values (`claims`, read by the docs' claims table)."""

from __future__ import annotations

import dataclasses
import math
import statistics
from pathlib import Path
from typing import Any

from experiments.repro import reviewer, settle
from experiments.repro.claims import MEASURED, Claim, Effect
from experiments.repro.settle import SEEDS, Curves
from experiments.repro.settled_words import settled
from experiments.repro.swap_days_setting import (
    BATCH_SIZE,
    DAYS,
    DRIFT,
    GRID,
    HELD_OUT,
    PER_DAY,
    RULE,
    SEGMENTS,
    STALL,
    TEST_PER_DAY,
    TUNING_SEED,
    UPDATES_PER_DAY,
    VALIDATION,
    WORKERS,
    by_seed,
    rows_of,
)
from experiments.repro.verdict import Verdict, judge, seed_sd
from recsync.app.runs.plots import new_figure, save_figure
from recsync.optim.dense import DenseOptimizerSpec
from recsync.optim.rowwise import RowOptimizerSpec


def write_figures(results: dict[str, Any] | list[dict[str, Any]], out_dir: Path) -> None:
    """next_day_auc.png; with curves, held_out_loss.png (every day) and
    held_out_last_day.png (the last day trained, the criterion's window marked)."""
    rows = rows_of(results)
    _plot(rows, out_dir / "next_day_auc.png")
    if not all("held_out_curve" in r for r in rows):
        return
    means = mean_curves(rows)
    fig, ax = new_figure(7, 4)
    for label, curve in means.items():
        ax.plot([p for p, _ in curve], [loss for _, loss in curve], label=label)
    ax.set_xlabel("days trained (each day: its start, then after each of its segments)")
    ax.set_ylabel("held-out logloss of the day being trained")
    ax.set_title(f"Held-out loss over the days (mean of {len(SEEDS)} seeds each)", fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    save_figure(fig, out_dir / "held_out_loss.png")
    last = DAYS - 2
    points = SEGMENTS + 1  # the last day's start and its segments' ends
    if isinstance(results, dict):
        points = results["setting"].get("segments", SEGMENTS) + 1
    Curves(
        {label: [(p - last, loss) for p, loss in curve[-points:]] for label, curve in means.items()}
    ).plot(
        out_dir / "held_out_last_day.png",
        f"Day {last}, the last trained (mean over seeds); shaded: the criterion's window",
        "share of the day trained",
        RULE,
    )


def mean_curves(rows: list[dict[str, Any]]) -> dict[str, list[tuple[float, float]]]:
    """Each variant's held-out curve, the mean over its seeds at each position."""
    out: dict[str, list[tuple[float, float]]] = {}
    for label in dict.fromkeys(r["variant"] for r in rows):
        curves = [r["held_out_curve"] for r in rows if r["variant"] == label]
        out[label] = [
            (float(points[0][0]), statistics.fmean(loss for _, loss in points))
            for points in zip(*curves, strict=True)
        ]
    return out


def _plot(rows: list[dict[str, Any]], path: Path) -> None:
    fig, ax = new_figure(7, 4)
    for variant, seeds in by_seed(rows).items():
        runs = list(seeds.values())
        days = range(1, len(runs[0]) + 1)
        mean = [statistics.fmean(day) for day in zip(*runs, strict=True)]
        line = ax.plot(days, mean, marker="o", label=f"{variant} (mean of {len(runs)})")[0]
        low = [min(day) for day in zip(*runs, strict=True)]
        high = [max(day) for day in zip(*runs, strict=True)]
        ax.fill_between(days, low, high, color=line.get_color(), alpha=0.15)
    ax.set_xticks(range(1, len(rows[0]["next_day_auc"]) + 1))
    ax.set_xlabel("day scored (trained through the day before)")
    ax.set_ylabel("next-day test AUC")
    ax.set_title("Fig. 7: Adagrad vs SWAP over days (simulated; band: seeds' range)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    save_figure(fig, path)


def _mean_sd(values: list[float]) -> str:
    return f"{statistics.fmean(values):.4f} ± {seed_sd(values):.4f}"


def report(results: dict[str, Any] | list[dict[str, Any]]) -> str:
    rows = rows_of(results)
    runs = by_seed(rows)
    seeds = sorted({seed for per_seed in runs.values() for seed in per_seed})
    scored = len(rows[0]["next_day_auc"])
    seed_list = f"training seed{'s' if len(seeds) != 1 else ''} {', '.join(map(str, seeds))}"
    tuned = isinstance(results, dict) and "tuning" in results
    rates = (
        "each variant's Adagrad rates tuned on one grid (below)"
        if tuned
        else "recsync's default Adagrad rates (not tuned for any variant)"
    )
    per_day = results["setting"]["per_day"] if isinstance(results, dict) else PER_DAY
    lines = [
        "# SWAP over days (Liu & Zhao Fig. 7, simulator)",
        "",
        "Paper: an e-commerce model trained incrementally for 10 days (7 billion examples a "
        "day), each day from yesterday's checkpoint and scored on the next day; Adagrad, "
        "Adagrad with a per-step decay (lambda 0.999999) and Adagrad-SWAP (lambda0 0.8, T = "
        "1.4e7 steps). Plain Adagrad meets a bottleneck after 3-4 days; SWAP keeps improving.",
        "",
        f"Ours: synthetic task of {DAYS} days of {per_day:,} examples, teacher drift {DRIFT} "
        f"a day; async, 1 trainer x {WORKERS} workers, batch {BATCH_SIZE} "
        f"({per_day // BATCH_SIZE:,} updates a day), DLRM with 26 tables of 100 rows (dim 8) "
        f"and MLPs 64-32, {rates}; the decays apply to the dense and the row Adagrad alike. "
        "Scaled equivalents: SWAP's period T = one day of updates (the paper's T is about one "
        "day of its iterations); the per-step decay keeps the paper's forgetting over a day. "
        f"{_seeds_text(len(seeds))} ({seed_list}: initial weights, data order, the workers' "
        f"speeds; one draw of the task). AUC on {TEST_PER_DAY:,} held-out examples of the "
        "next day.",
        "",
        "![next-day AUC](next_day_auc.png)",
        "",
        f"Next-day AUC, mean ± sd over {seed_list}:",
        "",
        "| variant | " + " | ".join(f"day {d}" for d in range(1, scored + 1)) + " |",
        "| --- | " + " | ".join("---" for _ in range(scored)) + " |",
    ]
    for variant, per_seed in runs.items():
        days = zip(*per_seed.values(), strict=True)
        lines.append(f"| {variant} | " + " | ".join(_mean_sd(list(d)) for d in days) + " |")
    if tuned:
        assert isinstance(results, dict)
        lines += ["", *tuning_lines(results["tuning"])]
    if all("day_change" in r for r in rows):
        lines += ["", *flattening_lines(rows)]
    text = "\n".join([*lines, "", *findings(results)])
    return text.rstrip("\n") + "\n\n" + "\n".join(reviewer_lines(rows, tuned)) + "\n"


def tuning_lines(tuning: dict[str, dict[str, Any]]) -> list[str]:
    """The tuning table: every value tried with its score, the chosen one, at an edge?"""
    lines = [
        "## Tuning",
        "",
        f"One grid for every variant: a factor of both default Adagrad rates (dense "
        f"{DenseOptimizerSpec().lr:g}, rows {RowOptimizerSpec().lr:g}), "
        f"{', '.join(f'{v:g}' for v in GRID.values)}, grown by x{GRID.step:g} past an edge "
        f"where the best sits there (`settle.tune`); scored on seed {TUNING_SEED} by the "
        f"held-out logloss after the last day trained, on {VALIDATION:,} examples of the "
        "last day's validation split (a stream of its own, not the examples the claims "
        "read); lower is better.",
        "",
        "| variant | factors tried: validation logloss | chosen | at an edge? |",
        "| --- | --- | --- | --- |",
    ]
    for label, t in tuning.items():
        tried, edge = settle.tried_text(t), settle.edge_text(t)
        lines.append(f"| {label} | {tried} | {t['chosen']:g} | {edge} |")
    return lines


def flattening(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per variant: each day's change by RULE (mean over seeds), the days met on every
    seed, and the last day's change on each seed."""
    out = {}
    for label in dict.fromkeys(r["variant"] for r in rows):
        mine = [r for r in rows if r["variant"] == label]
        per_day = list(zip(*(r["day_change"] for r in mine), strict=True))
        out[label] = {
            "mean_change": [statistics.fmean(d) for d in per_day],
            "days_flat": sum(all(c < RULE.tolerance for c in d) for d in per_day),
            "each": [list(d) for d in per_day],
            "days": len(per_day),
            "last_day": [r["day_change"][-1] for r in mine],
        }
    return out


def flattening_lines(rows: list[dict[str, Any]]) -> list[str]:
    flat = flattening(rows)
    days = next(iter(flat.values()))["days"]
    lines = [
        "## Run length: does each day's held-out loss flatten?",
        "",
        f"Each day is trained as {SEGMENTS} chained segments; after each (and at the day's "
        f"start) the model is scored on {HELD_OUT:,} held-out examples of the day being "
        f"trained. Criterion (`settle.Flattening`): {RULE.describe()}, here the last "
        f"{RULE.last_fraction:.0%} of each day. Change per day (mean over seeds; below "
        f"{RULE.tolerance:.1%}: flat):",
        "",
        "![held-out loss](held_out_loss.png) ![last day](held_out_last_day.png)",
        "",
        "| variant | " + " | ".join(f"day {d}" for d in range(days)) + " | days flat on every "
        "seed | last day, each seed |",
        "| --- | " + " | ".join("---" for _ in range(days)) + " | --- | --- |",
    ]
    for label, f in flat.items():
        lines.append(
            f"| {label} | "
            + " | ".join(f"{c:+.2%}" for c in f["mean_change"])
            + f" | {f['days_flat']} of {f['days']} | "
            + ", ".join(f"{c:+.2%}" for c in f["last_day"])
            + " |"
        )
    short = {
        label: [d for d, changes in enumerate(f["each"]) if max(changes) >= RULE.tolerance]
        for label, f in flat.items()
    }
    short = {label: days for label, days in short.items() if days}
    lines += [
        "",
        "- Every day of every variant met the criterion on every seed."
        if not short
        else "- Not flat on every seed (a longer day was not affordable here; the table gives "
        "how much the loss still fell): "
        + "; ".join(f"{label}: day {', '.join(map(str, days))}" for label, days in short.items())
        + ".",
    ]
    return lines


def _seeds_text(count: int) -> str:
    return "One seed" if count == 1 else f"{count} seeds"


@dataclasses.dataclass(frozen=True)
class Shape:
    """Fig. 7's shape read off the rows: gains from day `late` + 1 to the last day scored
    and the last day's AUCs (means over the seeds), and the two verdicts, each on the
    per-seed values paired by seed."""

    late: int
    seeds: int
    gain_plain: float
    gain_swap: float
    plain_last: float
    swap_last: float
    ahead: Verdict  # SWAP ends ahead of Adagrad
    stalls: Verdict  # Adagrad's late gain below STALL x SWAP's
    last_gap: dict[int, float]  # per seed: SWAP's last-day AUC minus Adagrad's
    stall_gap: dict[int, float]  # per seed: Adagrad's late gain minus STALL x SWAP's


def shape(results: dict[str, Any] | list[dict[str, Any]]) -> Shape:
    """Gains from day 4 on (the paper: Adagrad flat from day 3-4, SWAP still rising)."""
    runs = by_seed(rows_of(results))
    plain = runs["Adagrad"]
    swap = next(v for k, v in runs.items() if k.startswith("Adagrad-SWAP"))
    seeds = sorted(plain.keys() & swap.keys())
    late = min(3, len(next(iter(plain.values()))) - 1)  # index of day 4 scored
    gain_plain = {s: plain[s][-1] - plain[s][late] for s in seeds}
    gain_swap = {s: swap[s][-1] - swap[s][late] for s in seeds}
    bar = {s: STALL * max(gain_swap[s], 1e-9) for s in seeds}
    stalls = judge(gain_plain, bar, "lower")
    ahead = judge({s: swap[s][-1] for s in seeds}, {s: plain[s][-1] for s in seeds}, "higher")
    return Shape(
        late,
        len(seeds),
        statistics.fmean(gain_plain.values()),
        statistics.fmean(gain_swap.values()),
        statistics.fmean(plain[s][-1] for s in seeds),
        statistics.fmean(swap[s][-1] for s in seeds),
        ahead,
        stalls,
        {s: swap[s][-1] - plain[s][-1] for s in seeds},
        {s: gain_plain[s] - bar[s] for s in seeds},
    )


def claims(results: dict[str, Any] | list[dict[str, Any]]) -> list[Claim]:
    """The report's two headline claims (Fig. 7), from its results file."""
    s = shape(results)
    scored = len(rows_of(results)[0]["next_day_auc"])
    days = f"day {s.late + 1} to day {scored}"
    seeds = _seeds_text(s.seeds).lower()
    return [
        Claim(
            "Adagrad-SWAP keeps improving and ends ahead of plain Adagrad",
            "Fig. 7: 10 days of 7e9 examples, SWAP (0.8, T = 1.4e7 steps) above Adagrad",
            f"{scored} scored days of {PER_DAY:,} examples, async; last day SWAP "
            f"{s.swap_last:.4f} vs Adagrad {s.plain_last:.4f} (means, {seeds})",
            s.ahead,
            "swap",
            effect=Effect.of(s.last_gap, "AUC, SWAP minus Adagrad on the last day", "higher"),
            evidence=MEASURED,
        ),
        Claim(
            "plain Adagrad's AUC stalls after 3-4 days",
            "Fig. 7: Adagrad flat from day 3-4",
            f"{days}: Adagrad {s.gain_plain:+.4f} AUC, SWAP {s.gain_swap:+.4f} "
            f"(stalls: under {STALL:g}x SWAP's gain; means, {seeds})",
            s.stalls,
            "swap",
            effect=Effect.of(
                s.stall_gap, f"AUC, Adagrad's late gain minus {STALL:g}x SWAP's", "lower"
            ),
            evidence=MEASURED,
        ),
    ]


def findings(results: dict[str, Any] | list[dict[str, Any]]) -> list[str]:
    """Gains from day 4 on (the paper: Adagrad flat from day 3-4, SWAP still rising), and
    which way each claim settled."""
    s = shape(results)
    late, gain_plain, gain_swap = s.late, s.gain_plain, s.gain_swap
    rows = rows_of(results)
    scored = len(rows[0]["next_day_auc"])
    verdict = (
        f"SWAP ends ahead of Adagrad: {s.ahead.describe()}; Adagrad's late gain below "
        f"{STALL:g}x SWAP's (stalls): {s.stalls.describe()}."
    )
    lines = [
        "Findings:",
        "",
        f"- From day {late + 1} to day {scored}, means over {_seeds_text(s.seeds).lower()}: "
        f"Adagrad {gain_plain:+.4f} AUC, SWAP {gain_swap:+.4f}; last day Adagrad "
        f"{s.plain_last:.4f}, SWAP {s.swap_last:.4f}. Shape (each seed's values, paired by "
        "seed) " + verdict,
    ]
    for name, v, effect in (
        ("SWAP ends ahead of Adagrad", s.ahead, s.last_gap),
        ("plain Adagrad stalls", s.stalls, s.stall_gap),
    ):
        values = list(effect.values())
        lines.append(
            f"- {name}: {settled(v)}; {v.effect:+.4f} AUC in the paper's direction (sd "
            f"over seeds {seed_sd(values):.4f}, {min(values):+.4f} to {max(values):+.4f}), "
            f"**{v.label}**."
        )
    per_day = PER_DAY if not isinstance(results, dict) else results["setting"]["per_day"]
    lines.append(
        f"- Why Adagrad may not stall here: its steps shrink as 1 / sqrt(updates), from day "
        f"{late + 1} to day {scored} by sqrt({scored}/{late + 1}) = "
        f"{math.sqrt(scored / (late + 1)):.2f}x; the paper's days hold 7e9 examples each "
        f"(its accumulators had summed ~3e7 updates by day 3), ours {per_day:,}. "
        + (
            f"At this size Adagrad does not stall: its late gain is {gain_plain:+.4f} AUC, "
            f"{gain_plain / gain_swap:.2f}x SWAP's, against the paper's claim."
            if gain_swap > 0 and gain_plain >= STALL * gain_swap
            else "At this size Adagrad's late gain is below the stall bar."
        )
    )
    return lines


def reviewer_lines(rows: list[dict[str, Any]], tuned: bool) -> list[str]:
    """The report's "What a reviewer would still ask" section (its own: it reads the
    setting)."""
    seeds = len({r.get("seed", 0) for r in rows})
    per_day = len(rows[0]["next_day_auc"])
    bullets = [
        f"{per_day} scored days of {PER_DAY:,} examples ({UPDATES_PER_DAY:,} updates a day) "
        "against 7 billion examples a day: the paper's bottleneck may need far more updates "
        "than a run here can make.",
        f"{seeds} training seeds on one draw of the task; "
        + (
            f"each variant's rate tuned on seed {TUNING_SEED} alone, one factor for the dense "
            "and the row rates together"
            if tuned
            else "recsync's default Adagrad rates untuned for every variant"
        )
        + "; SWAP's period is scaled to one day of updates.",
        f"A synthetic teacher drifting {DRIFT} a day stands in for the paper's e-commerce data.",
        reviewer.SEED_RULE,
    ]
    return [reviewer.TITLE, "", *(f"- {b}" for b in bullets)]
