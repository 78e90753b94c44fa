"""Fig. 7 of the hierarchical-training reproduction, read off its loss runs: every topology
over `LOSS_SEEDS` beside EASGD 40t with the same seed, at equal examples in total (the
paper's comparison) and, as a control, at equal examples per dense replica; each variant's
tuning, its held-out loss curves and whether they flattened; the claims judged by
`verdict.judge` over the seeds, each said to settle with or against the paper."""

from __future__ import annotations

import math
import statistics
from pathlib import Path
from typing import Any

from experiments.repro import hierarchical_settings as ht
from experiments.repro.settle import Curves
from experiments.repro.settled_words import settled
from experiments.repro.verdict import HOLDS, Verdict, judge

Rows = list[dict[str, Any]]


def _by_seed(rows: Rows, label: str, key: str, control: bool) -> dict[int, float]:
    return {
        int(r["seed"]): float(r[key])
        for r in rows
        if r["label"] == label and bool(r.get("control")) == control
    }


def relative(rows: Rows, setting: ht.Setting, key: str, control: bool = False) -> dict[int, float]:
    """`setting`'s `key` over EASGD 40t's (full run, same seed), in percent, by seed."""
    base = _by_seed(rows, ht.EASGD.label, key, False)
    ours = _by_seed(rows, setting.label, key, control)
    return {s: 100 * (v / base[s] - 1) for s, v in sorted(ours.items()) if s in base}


def _mean_sd(values: dict[int, float], unit: str = "%") -> str:
    sd = statistics.stdev(values.values()) if len(values) > 1 else 0.0
    mean = round(statistics.fmean(values.values()), 2) + 0.0  # no "-0.00"
    return f"{mean:+.2f}{unit} ± {sd:.2f}"


def _verdict(ours: dict[int, float], reference: float, direction: Any) -> Verdict:
    return judge(ours, reference, direction)


def fig7_means(rows: Rows, control: bool = False) -> list[tuple[float, float]]:
    """(mean, sd) of the train loss over EASGD 40t's per topology of Fig. 7 (the
    baseline's own is 0)."""
    out = []
    for s in ht.FIG7:
        values = relative(rows, s, "train_loss", control and s != ht.EASGD)
        sd = statistics.stdev(values.values()) if len(values) > 1 else 0.0
        out.append((statistics.fmean(values.values()), sd))
    return out


def table(rows: Rows) -> list[str]:
    """Fig. 7's table: every topology, then the controls, means ± sd over the seeds."""
    lines = [
        "| run | dense replicas | examples | per dense replica | lr factor | seeds | train loss "
        "vs EASGD 40t | test logloss vs EASGD 40t | test AUC |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    runs = [(s, False) for s in ht.FIG7] + [(s, True) for s in ht.FIG7[1:]]
    for s, control in runs:
        mine = [r for r in rows if r["label"] == s.label and bool(r.get("control")) == control]
        if not mine:
            continue
        replicas, examples = int(mine[0]["dense_replicas"]), int(mine[0]["examples"])
        auc = statistics.fmean(float(r["test_auc"]) for r in mine)
        name = f"{s.label}, control" if control else s.label
        lines.append(
            f"| {name} | {replicas} | {examples:,} | {examples // replicas:,} | "
            f"x{float(mine[0]['lr_factor']):g} | {len(mine)} | "
            f"{_mean_sd(relative(rows, s, 'train_loss', control))} | "
            f"{_mean_sd(relative(rows, s, 'test_logloss', control))} | {auc:.4f} |"
        )
    return lines


def baseline_examples(rows: Rows) -> int:
    """The examples of EASGD 40t's runs (every main run's)."""
    return max(int(r["examples"]) for r in rows if r["label"] == ht.EASGD.label)


def claims(rows: Rows) -> list[str]:
    """Fig. 7's claims over the seeds: HT 5g >= 0.2% better, the order of the groups, HT
    10g neutral; each at equal examples in total, and what the control at equal examples
    per dense replica says of the cause; each said to settle with or against the paper."""
    main = {s.groups: relative(rows, s, "train_loss") for s in ht.FIG7[1:]}
    control = {s.groups: relative(rows, s, "train_loss", True) for s in ht.FIG7[1:]}
    five, eight, ten = (main[g] for g in (5, 8, 10))
    per_replica = baseline_examples(rows) // ht.EASGD_TRAINERS
    ht5_main = _verdict(five, -0.2, "lower")
    ht5_control = _verdict(control[5], 0.0, "lower")
    ht10 = _verdict({s: abs(v) for s, v in ten.items()}, 0.2, "lower")
    fewer = [
        f"{a}g better than {b}g: "
        + judge(
            {s: main[b][s] - v for s, v in main[a].items() if s in main[b]}, 0.0, "higher"
        ).describe(2)
        for a, b in ((5, 8), (8, 10))
    ]
    return [
        "- Fig. 7, paper (equal examples in total, 9 billion): HT 5g's loss at least 0.2% "
        f"better than EASGD 40t's. Ours (train loss, mean ± sd over seeds): "
        f"{_mean_sd(five)}; at least 0.2% better: {ht5_main.describe(2)}: "
        f"{settled(ht5_main)}.",
        "- Control at equal examples per dense replica (HT g on g/40 of the examples, so "
        f"each of its replicas sees the {per_replica:,} each of EASGD 40t's 40 sees): "
        + ", ".join(f"{g}g {_mean_sd(v)}" for g, v in control.items())
        + f"; HT 5g still better than EASGD 40t: {ht5_control.describe(2)}: "
        f"{settled(ht5_control)}. " + _cause(ht5_main, ht5_control),
        "- Fig. 7, paper: the gain grows as the groups (dense replicas) get fewer. Ours: "
        + ", ".join(f"{g}g {_mean_sd(v)}" for g, v in main.items())
        + "; "
        + "; ".join(fewer)
        + ".",
        f"- Fig. 7, paper: HT 10g neutral (within 0.2%). Ours: {_mean_sd(ten)} (its size at "
        f"most 0.2%: {ht10.describe(2)}): {settled(ht10)}; HT 8g {_mean_sd(eight)}.",
        "",
    ]


def _cause(main: Verdict, control: Verdict) -> str:
    """What the control says about the main run's gain: each replica's extra data, or the
    number of replicas the paper names."""
    if main.label != HOLDS:
        return (
            "The control brackets the paper's comparison from the other side: it gives HT "
            "fewer examples in all, which the paper's runs never do."
        )
    if control.label == HOLDS:
        return (
            "So the gain is not only each replica's extra data: with the same data per "
            "replica and 40/g fewer examples in all, fewer replicas still train better, as "
            "the paper says."
        )
    return (
        "So the main run's gain comes with each replica's extra data (at equal examples in "
        "total a replica of HT 5g sees 8x what one of EASGD 40t's sees), not shown to be the "
        "paper's effect of fewer replicas as such: at the same data per replica, 5 replicas "
        "do not train better than 40. The control gives HT 40/g fewer examples in all, "
        "which the paper's runs never do, so the paper's comparison lies between the two."
    )


def tuning_table(tunings: list[dict[str, Any]]) -> list[str]:
    """Each variant's tuning (`Tuned.as_dict`): the factors tried with their held-out
    logloss (the tuning seed's run, at its end), the chosen one, and whether it is still at
    an edge of what was tried."""
    lines = [
        "| variant | lr factors tried: held-out logloss (seed 0) | chosen | at an edge? |",
        "| --- | --- | --- | --- |",
    ]
    for t in tunings:
        tried = ", ".join(f"x{v}: {s:.4f}" for v, s in t["scores"].items())
        grown = f" ({t['extensions']} past the grid)" if t["extensions"] else ""
        edge = "yes" if t["at_edge"] else "no"
        lines.append(f"| {t['variant']} | {tried}{grown} | x{t['chosen']:g} | {edge} |")
    return lines


Curve = list[tuple[float, float]]


def curves_of(rows: Rows, label: str, control: bool) -> list[Curve]:
    """The held-out loss curves of one variant's runs, in seed order."""
    return [
        [(float(x), float(y)) for x, y in r["curve"]]
        for r in sorted(rows, key=lambda r: int(r["seed"]))
        if r["label"] == label and bool(r.get("control")) == control and r.get("curve")
    ]


def mean_curve(curves: list[Curve], scale: float = 1.0) -> Curve:
    """The seeds' curves averaged point by point (as far as the shortest goes), positions
    times `scale`."""
    n = min((len(c) for c in curves), default=0)
    return [
        (
            scale * statistics.fmean(c[i][0] for c in curves),
            statistics.fmean(c[i][1] for c in curves),
        )
        for i in range(n)
    ]


def flattening(rows: Rows) -> list[str]:
    """Whether each run's held-out loss flattened (`ht.FLATTENING`), by variant: how many
    seeds' runs did, and the improvement over the last part (mean and largest over seeds)."""
    rule = ht.FLATTENING
    lines = [
        f"| run | examples | seeds flat | held-out improvement over the last "
        f"{rule.last_fraction:.0%} (mean; largest) | final held-out logloss (mean) |",
        "| --- | --- | --- | --- | --- |",
    ]
    for v in ht.LOSS_VARIANTS:
        curves = curves_of(rows, v.setting.label, v.control)
        if not curves:
            continue
        changes = [c for c in map(rule.change, curves) if not math.isnan(c)]
        flat = sum(rule.flat(c) for c in curves)
        size = (
            f"{statistics.fmean(changes):.2%}; {max(changes):.2%}"
            if changes
            else "no evaluation early enough"
        )
        final = statistics.fmean(c[-1][1] for c in curves)
        examples = next(
            int(r["examples"])
            for r in rows
            if r["label"] == v.setting.label and bool(r.get("control")) == v.control
        )
        lines.append(
            f"| {v.label} | {examples:,} | {flat} of {len(curves)} | {size} | {final:.4f} |"
        )
    return lines


def plot_curves(rows: Rows, out_dir: Path) -> list[str]:
    """The seed-mean held-out loss curves: the main runs over the examples in total, and
    EASGD 40t with the controls over the examples per dense replica (where the controls
    match it); the names of the PNGs made."""
    easgd = ht.EASGD.label
    main = {s.label: mean_curve(curves_of(rows, s.label, False)) for s in ht.FIG7}
    per_replica = {
        easgd: mean_curve(curves_of(rows, easgd, False), 1 / ht.EASGD_TRAINERS),
        **{
            f"{s.label}, control": mean_curve(curves_of(rows, s.label, True), 1 / s.groups)
            for s in ht.FIG7[1:]
        },
    }
    made = []
    for name, curves, title, x in (
        ("fig7_curves.png", main, "Fig. 7's runs: held-out logloss, mean over seeds", "examples"),
        (
            "fig7_control_curves.png",
            per_replica,
            "Fig. 7's controls beside EASGD 40t: held-out logloss, mean over seeds",
            "examples per dense replica",
        ),
    ):
        kept = {label: c for label, c in curves.items() if c}
        if kept:
            Curves(kept).plot(out_dir / name, title, x, ht.FLATTENING)
            made.append(name)
    return made


def plot(ax: Any, rows: Rows) -> None:
    """Fig. 7's bars: mean relative train loss ± sd, equal examples in total and the
    controls at equal examples per dense replica."""
    labels = [s.label for s in ht.FIG7]
    main, control = fig7_means(rows), fig7_means(rows, control=True)
    positions = range(len(labels))
    width = 0.38
    for shift, means, name in ((-width / 2, main, "equal examples"), (width / 2, control, "")):
        ax.bar(
            [p + shift for p in positions],
            [m for m, _ in means],
            width,
            yerr=[sd for _, sd in means],
            label=name or "equal examples per dense replica (control)",
        )
    ax.set_xticks(list(positions), labels, fontsize=8, rotation=15)
    ax.axhline(-0.2, color="grey", linestyle=":", label="paper: HT 5g -0.2%")
    ax.grid(alpha=0.3, axis="y")
    ax.legend(fontsize=7)
