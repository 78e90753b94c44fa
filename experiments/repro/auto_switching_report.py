"""The auto-switching reproduction's figure and report (numbers from results.json)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

from experiments.repro import reviewer
from experiments.repro.verdict import Verdict, judge
from recsync.app.runs.continual_plot import label_strategies
from recsync.app.runs.plots import new_figure, save_figure

TIME_TARGET = 0.10  # the controller's total time within 10% of the fastest fixed strategy's
AUC_TARGET = 0.001  # its mean next-day AUC within 0.001 of the best fixed strategy's
FIXED_SUFFIX = " throughout"
SWITCH_PREFIX = "sync > "
NOTES = [
    "Reading it:",
    "",
    "- On this cost model GBA is faster than sync on a calm cluster too (it pushes and "
    "takes the next batch at once; sync waits at its barrier for the servers' apply, ~31% of "
    "worker time here), with the same next-day AUC: the best fixed strategy is GBA, not sync "
    "as the issue expected, and the controller, once its probe measured that, runs GBA. "
    "Without the probe it follows the paper's rule (sync calm, GBA with stragglers) and "
    "lands between sync and GBA in time.",
    "- The paper's Fig. 6 has async and Hop-BS dip when switched to and re-converge. Here "
    "(8 workers, staleness ~1 step) they do not dip while switched; they fall behind after "
    "the switch back to sync and stay behind. Why: each worker's gradient is an update of "
    "its own (8x as many, each of a batch 8x smaller, so noisier), and Adagrad's "
    "accumulators sum their squares: after the switched days they hold many times what "
    "sync's hold (the findings give the ratios), so every later sync step is that much "
    "smaller (Adagrad divides by the square root). The gba-switching reproduction (16 "
    "workers, 8x stragglers while switched) measures the dip on the first switched day.",
    "- Times are the simulator's virtual seconds; segments cost a little (each stretch is a "
    "job start and drain): the controller's 4 stretches a day against one.",
]


def plot(rows: list[dict[str, Any]], path: Any) -> None:
    fig, (quality, time) = new_figure(13, 4.5, columns=2)
    for row in rows:
        days = [d["day"] for d in row["days"]]
        style = "--" if row["variant"].startswith(SWITCH_PREFIX) else "-"
        width = 2.5 if row["variant"] == "controller" else 1.2
        quality.plot(
            days, [d["next_day_auc"] for d in row["days"]], style, lw=width, label=row["variant"]
        )
        seconds = list(itertools.accumulate(d["train_seconds"] for d in row["days"]))
        time.plot(days, seconds, style, lw=width, label=row["variant"])
    controller = next((r for r in rows if r["variant"] == "controller"), None)
    if controller:
        label_strategies(quality, controller["days"], below=16, fontsize=6)
    quality.set_xlabel("day trained (scored on the next day)")
    quality.set_ylabel("next-day AUC")
    quality.set_title("next-day AUC (controller: its strategies under each point)")
    time.set_xlabel("day trained")
    time.set_ylabel("training seconds so far (virtual)")
    time.set_title("total training time")
    for ax in (quality, time):
        ax.grid(alpha=0.3)
    time.legend(fontsize=7)
    save_figure(fig, path)


def report(results: dict[str, Any], scenario: str) -> str:
    rows = results["variants"]
    by = {r["variant"]: r for r in rows}
    fastest, best = fastest_and_best(rows)
    sync = by["sync" + FIXED_SUFFIX]
    lines = [
        "# Automatic strategy switching over a changing cluster (simulator)",
        "",
        "Paper (GBA, NeurIPS 2022, section 6 and Fig. 6): switching between synchronous "
        "training and GBA as the cluster's resources change keeps the model's quality with "
        "the same hyper-parameters, while async and Hop-BS dip after a switch and need time "
        "to re-converge; choosing the strategy automatically from the cluster's state is "
        "named as future work. No paper number exists for the controller; the issue's "
        f"targets: its total training time within {TIME_TARGET:.0%} of the fastest fixed "
        f"strategy's, its mean next-day AUC within {AUC_TARGET} of the best fixed one's.",
        "",
        f"Ours: `recsync continual` on the simulator, {len(sync['days'])} days trained (each "
        "scored on the next day's 20,000 held-out examples), synthetic teacher drifting 0.1 a "
        "day, 32,768 examples a day, 8 trainers x 1 worker, batch 64, 4 embedding and 2 dense "
        "servers, small DLRM (dim 8, MLPs 64-32), the reproductions' cluster cost model "
        "(25 Gbit/s, 5% speed and batch noise). Learning rate tuned once on sync over the "
        f"first 3 (calm) days, factors {[t['lr_factor'] for t in results['lr_tuning']]} "
        f"(mean next-day AUC {[round(t['mean_next_day_auc'], 4) for t in results['lr_tuning']]}"
        f"): x{results['lr_factor']:g} of recsync's default 0.01, frozen for every variant. "
        "The controller decides after every quarter of a day. One seed. The scenario:",
        "",
        "```toml",
        scenario.strip(),
        "```",
        "",
        "![next-day AUC and time](days.png)",
        "",
        "| variant | total train s | vs fastest fixed | mean next-day AUC | vs sync | strategies "
        "per day |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        strategies = ", ".join(d["strategy"] for d in r["days"])
        lines.append(
            f"| {r['variant']} | {r['total_seconds']:.2f} | "
            f"{r['total_seconds'] / fastest['total_seconds']:.3f}x | "
            f"{r['mean_next_day_auc']:.4f} | "
            f"{r['mean_next_day_auc'] - sync['mean_next_day_auc']:+.4f} | {strategies} |"
        )
    days = len(sync["days"])
    lines += ["", "Next-day AUC per day:", ""]
    lines.append("| variant | " + " | ".join(f"d{d}" for d in range(days)) + " |")
    lines.append("| --- | " + " | ".join("---" for _ in range(days)) + " |")
    for r in rows:
        aucs = " | ".join(f"{d['next_day_auc']:.4f}" for d in r["days"])
        lines.append(f"| {r['variant']} | {aucs} |")
    lines += ["", *findings(by, fastest, best), "", *NOTES, "", *decisions(by.get("controller"))]
    return reviewer.appended("\n".join(lines), "auto-switching")


def fastest_and_best(rows: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The fastest fixed strategy (least total time) and the best (highest mean AUC)."""
    fixed = [r for r in rows if r["variant"].endswith(FIXED_SUFFIX)]
    fastest = min(fixed, key=lambda r: r["total_seconds"])
    best = max(fixed, key=lambda r: r["mean_next_day_auc"])
    return fastest, best


@dataclass(frozen=True)
class ControllerCheck:
    """The controller against the issue's targets (one seed a run: the verdict rule reports
    the margins, and too few seeds)."""

    time_ratio: float  # its total time over the fastest fixed strategy's
    auc_gap: float  # the best fixed strategy's mean next-day AUC minus its own
    time_ok: Verdict
    auc_ok: Verdict


def controller_check(
    controller: dict[str, Any], fastest: dict[str, Any], best: dict[str, Any]
) -> ControllerCheck:
    time_ratio = controller["total_seconds"] / fastest["total_seconds"]
    auc_gap = best["mean_next_day_auc"] - controller["mean_next_day_auc"]
    time_ok = judge([time_ratio], 1 + TIME_TARGET, "lower")
    auc_ok = judge(
        [controller["mean_next_day_auc"]], best["mean_next_day_auc"] - AUC_TARGET, "higher"
    )
    return ControllerCheck(time_ratio, auc_gap, time_ok, auc_ok)


@dataclass(frozen=True)
class Switched:
    """A run switched away from sync and back: its next-day AUC minus sync's by day, and
    the first and last day it ran another strategy."""

    run: dict[str, Any]
    diffs: list[float]
    first: int
    last: int


def switched_runs(by: dict[str, dict[str, Any]]) -> list[Switched]:
    sync = by["sync" + FIXED_SUFFIX]
    out = []
    for name, r in by.items():
        if not name.startswith(SWITCH_PREFIX):
            continue
        diffs = [
            d["next_day_auc"] - s["next_day_auc"]
            for d, s in zip(r["days"], sync["days"], strict=True)
        ]
        changed = [i for i, d in enumerate(r["days"]) if d["strategy"] != "sync"]
        if changed:
            out.append(Switched(r, diffs, changed[0], changed[-1]))
    return out


def findings(
    by: dict[str, dict[str, Any]], fastest: dict[str, Any], best: dict[str, Any]
) -> list[str]:
    out = ["Findings:", ""]
    controller = by.get("controller")
    if controller:
        check = controller_check(controller, fastest, best)
        out.append(
            f"- Controller: total time {check.time_ratio:.3f}x the fastest fixed strategy's "
            f"({fastest['variant']}; target <= {1 + TIME_TARGET:.2f}x: "
            f"{check.time_ok.describe(3)}); mean next-day AUC "
            f"{controller['mean_next_day_auc']:.4f}, {check.auc_gap:+.4f} below the best fixed "
            f"strategy's ({best['variant']}, {best['mean_next_day_auc']:.4f}; target <= "
            f"{AUC_TARGET}: {check.auc_ok.describe()})."
        )
    hindsight = by.get("hindsight schedule")
    for name, r in by.items():
        if hindsight and name.startswith("controller"):
            out.append(
                f"- {name} against the hindsight schedule (sync calm, GBA with stragglers): "
                f"time {r['total_seconds'] / hindsight['total_seconds']:.3f}x, AUC "
                f"{r['mean_next_day_auc'] - hindsight['mean_next_day_auc']:+.4f}."
            )
    sync = by["sync" + FIXED_SUFFIX]
    for w in switched_runs(by):
        r, diffs, first, last = w.run, w.diffs, w.first, w.last
        after = diffs[last + 1 : last + 3]
        out.append(fig6_verdict(r["variant"], diffs, first, last))
        out.append(
            f"- Fig. 6, {r['variant']}: next-day AUC vs staying with sync on the switched days "
            f"{first}-{last}: "
            + ", ".join(f"{d:+.4f}" for d in diffs[first : last + 1])
            + "; the two days back on sync: "
            + ", ".join(f"{d:+.4f}" for d in after)
            + f"; time on the switched days "
            f"{sum(d['train_seconds'] for d in r['days'][first : last + 1]):.2f} s vs sync's "
            f"{sum(d['train_seconds'] for d in sync['days'][first : last + 1]):.2f} s; Adagrad "
            f"accumulators after them {accumulator_ratio(r, sync, last, 'dense'):.1f}x sync's "
            f"(dense), {accumulator_ratio(r, sync, last, 'rows'):.1f}x (rows)."
        )
    return out


def accumulator_ratio(run: dict[str, Any], sync: dict[str, Any], day: int, part: str) -> float:
    ours = run["days"][day]["adagrad_sums"][part]
    return float(ours / max(sync["days"][day]["adagrad_sums"][part], 1e-12))


@dataclass(frozen=True)
class Fig6Shape:
    """The paper's Fig. 6 shape for one switched run: for GBA, `holds` is "within 0.002 of
    sync on every day from the switch on"; for the others, `dips` "below sync by > 0.002
    while switched" and `holds` "back within 0.001 of sync by the last day"."""

    is_gba: bool
    switched: list[float]  # AUC minus sync's on the switched days
    later: list[float]  # on the days back on sync
    worst: float  # GBA: the largest gap from the switch on
    back: int | None  # the first day back within 0.001 of sync
    holds: Verdict
    dips: Verdict | None


def fig6_shape(variant: str, diffs: list[float], first: int, last: int) -> Fig6Shape:
    switched, later = diffs[first : last + 1], diffs[last + 1 :]
    worst = max(diffs[first:], key=abs)
    back = next((last + 1 + i for i, d in enumerate(later) if d > -0.001), None)
    if variant == SWITCH_PREFIX + "gba > sync":
        # the claim: no day from the switch on falls more than 0.002 below sync (one seed)
        within = judge([min(diffs[first:])], -0.002, "higher")
        return Fig6Shape(True, switched, later, worst, back, within, None)
    dips = judge([min(switched)], -0.002, "lower")
    recovers = judge([diffs[-1]], -0.001, "higher")
    return Fig6Shape(False, switched, later, worst, back, recovers, dips)


def fig6_verdict(variant: str, diffs: list[float], first: int, last: int) -> str:
    """The paper's Fig. 6 shape for one switched run, read off its next-day AUC gaps to
    sync (by day): GBA stays within 0.002 throughout; async and Hop-BS dip while switched
    and re-converge after the switch back."""
    shape = fig6_shape(variant, diffs, first, last)
    if shape.is_gba:
        return (
            f"- Fig. 6 shape for GBA: within 0.002 of sync on every day from the switch on "
            f"(largest gap {shape.worst:+.4f}): {shape.holds.describe()}."
        )
    assert shape.dips is not None
    back = shape.back
    return (
        f"- Fig. 6 shape for {variant}: dips while switched (below sync by > 0.002; lowest "
        f"{min(shape.switched):+.4f}): {shape.dips.describe()}; back within 0.001 of sync "
        f"after the switch back ({f'on day {back}' if back is not None else 'not by the last day'}"
        f"; lowest after {min(shape.later, default=0.0):+.4f}, last day {diffs[-1]:+.4f}): "
        f"{shape.holds.describe()}."
    )


def decisions(controller: dict[str, Any] | None) -> list[str]:
    if not controller:
        return []
    out = ["The controller's switches (after which stretch, from, to, why):", ""]
    for day in controller["days"]:
        for d in day["decisions"]:
            if d["to"] != d["from"]:
                out.append(f"- after {d['after']}: {d['from']} -> {d['to']} -- {d['reason']}")
    return out
