"""The gba-global-batch report (GBA Fig. 8, right; its runs are `gba_global_batch`): the
AUC after switching from sync to GBA against the global batch, at every factor of the
learning-rate grid, the paper's claim judged by `verdict.judge` at sync's rates (the
paper's untuned switch) and at each batch's factor tuned on the same grid (`settle.tune`, on
a seed no claim reads), with which way each settled (`settled_words`) and the last switched
day's held-out curve checked by `settle.Flattening`; computed from the results alone."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from experiments.repro import reviewer
from experiments.repro.settle import Curves, Flattening, edge_text
from experiments.repro.settled_words import settled
from experiments.repro.verdict import Verdict, judge
from recsync.app.runs.plots import new_figure, save_figure

PAPER = (
    "the Private task's YouTubeDNN on the paper's shared cluster, 400 workers, sync's job "
    "switched to GBA at local batches other than sync's (so another global batch), sync's "
    "hyper-parameters kept; a lower AUC after the switch than at sync's global batch (Fig. 8, "
    "right; no numbers in the text)"
)
UNTUNED = 1.0  # sync's rates: the paper's switch without tuning


def batches(result: dict[str, Any]) -> list[int]:
    return sorted({int(r["local_batch"]) for r in result["runs"]})


def factors(result: dict[str, Any]) -> list[float]:
    return sorted({float(r["lr_factor"]) for r in result["runs"]})


def auc(result: dict[str, Any], local: int, factor: float, key: str = "mean_auc") -> dict[int, Any]:
    """seed -> `key` of the run at `local` batch and learning-rate `factor`."""
    return {
        int(r["seed"]): r.get(key)
        for r in result["runs"]
        if r["local_batch"] == local and r["lr_factor"] == factor
    }


def best_factor(result: dict[str, Any], local: int) -> float:
    """`local`'s factor chosen by the tuning (`result["tuning"]`: on its own seed, by the
    held-out logloss); without a tuning, the factor of the highest mean AUC of the runs."""
    for t in result.get("tuning", []):
        if int(t["variant"]) == local:
            return float(t["chosen"])
    return max(factors(result), key=lambda f: statistics.fmean(auc(result, local, f).values()))


RULE = Flattening()


def flattening(result: dict[str, Any]) -> list[tuple[dict[str, Any], float | None]]:
    """Every run the claims read with its last switched day's change by RULE (None: no
    curve recorded; NaN: no evaluation at or before the window's start)."""
    out = []
    for r in result["runs"]:
        curve = r.get("last_day_curve") or []
        out.append((r, RULE.change([(p, loss) for p, loss in curve]) if curve else None))
    return out


def tuning_table(result: dict[str, Any]) -> list[str]:
    workers = int(result["settings"]["workers"])
    lines = [
        "| local batch (global) | factors tried: mean held-out logloss | chosen | at an edge? |",
        "| --- | --- | --- | --- |",
    ]
    for t in result.get("tuning", []):
        b = int(t["variant"])
        tried = ", ".join(f"x{v}: {score:.5f}" for v, score in t["scores"].items())
        lines.append(
            f"| {b} ({b * workers:,}) | {tried} | x{float(t['chosen']):g} | {edge_text(t)} |"
        )
    return lines


def matched(result: dict[str, Any]) -> int:
    return int(result["settings"]["sync_local_batch"])


def untuned(result: dict[str, Any], local: int) -> Verdict:
    """ "AUC at sync's global batch above the AUC at `local`'s", both at sync's rates."""
    m = matched(result)
    return judge(auc(result, m, UNTUNED), auc(result, local, UNTUNED), "higher")


def tuned(result: dict[str, Any], local: int) -> Verdict:
    """The same, each batch at its best factor of the grid."""
    m = matched(result)
    return judge(
        auc(result, m, best_factor(result, m)),
        auc(result, local, best_factor(result, local)),
        "higher",
    )


def gaps(result: dict[str, Any], local: int, factor: float | None = UNTUNED) -> dict[int, float]:
    """Per seed: AUC at sync's global batch minus AUC at `local` (`factor` None: each at its
    best factor)."""
    m = matched(result)
    fm = best_factor(result, m) if factor is None else factor
    fl = best_factor(result, local) if factor is None else factor
    ours, other = auc(result, m, fm), auc(result, local, fl)
    return {s: ours[s] - other[s] for s in sorted(ours.keys() & other.keys())}


def _cell(values: dict[int, Any]) -> str:
    if not values:
        return "-"
    sd = statistics.stdev(values.values()) if len(values) > 1 else 0.0
    return f"{statistics.fmean(values.values()):.4f} ± {sd:.4f}"


def render(result: dict[str, Any]) -> str:
    s = result["settings"]
    m = matched(result)
    lines = [
        "# GBA Fig. 8 (right): the global batch after switching from sync (simulator)",
        "",
        f"Ours: days 0-{s['sync_days'] - 1} of a {s['drift']}-a-day drifting task "
        f"({s['per_day']:,} examples a day) with `allreduce` on {s['workers']} workers at a "
        f"local batch of {s['sync_local_batch']} (global {s['sync_global_batch']:,}; "
        "gba-switching's checkpoints), then days "
        f"{s['switched_days'][0]}-{s['switched_days'][-1]} with GBA (iota 4, M = "
        f"{s['workers']} workers) at local batches {s['local_batches']} under the stragglers "
        f"`{s['stragglers']}`. AUC: the mean over the switched days of the AUC on "
        f"{s['test_per_day']:,} held-out examples of each day, mean ± sd over seeds "
        f"{s['seeds']}. The paper's claim (switching without tuning) is judged at x1, sync's "
        'rates. For "each at its best factor", every local batch is tuned on the same '
        f"grid of learning-rate factors {s.get('lr_grid', factors(result))} (on both "
        "Adagrad rates; the grid "
        f"extended past an edge up to 3 times) on seed {s.get('tuning_seed', '-')}, which "
        "no claim reads, scored by the held-out logloss (mean over the switched days); the "
        f"chosen factor then runs on seeds {s['seeds']}. The paper: {PAPER}.",
        "",
        "![AUC after the switch against the global batch](global_batch.png)",
        "",
        "| local batch | global batch | AUC at x1 (sync's rates) | tuned factor | AUC at "
        "the tuned factor | gradients excluded a run (x1) | mean dense staleness (x1) | "
        "held-out logloss after each switched day (x1) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for b in batches(result):
        dropped = [sum(v) for v in auc(result, b, UNTUNED, "dropped").values()]
        stale = [statistics.fmean(v) for v in auc(result, b, UNTUNED, "mean_staleness").values()]
        losses = [v for v in auc(result, b, UNTUNED, "logloss").values() if v]
        per_day = (
            ", ".join(f"{statistics.fmean(d):.4f}" for d in zip(*losses, strict=True))
            if losses
            else "-"
        )
        switch = [v for v in auc(result, b, UNTUNED, "switch_logloss").values() if v]
        if switch and losses:
            per_day = f"{statistics.fmean(switch):.4f} at the switch; {per_day}"
        f = best_factor(result, b)
        lines.append(
            f"| {b}{' (sync)' if b == m else ''} | {b * s['workers']:,} | "
            f"{_cell(auc(result, b, UNTUNED))} | x{f:g} | {_cell(auc(result, b, f))} | "
            f"{statistics.fmean(dropped) if dropped else 0:,.1f} | "
            f"{statistics.fmean(stale) if stale else 0:.2f} | {per_day} |"
        )
    if result.get("tuning"):
        lines += ["", f"Tuning (seed {s.get('tuning_seed', '-')}):", "", *tuning_table(result)]
    lines += ["", "Findings:", ""]
    for b in batches(result):
        if b == m:
            continue
        untuned_gaps, tuned_gaps = gaps(result, b), gaps(result, b, None)
        at_x1, at_best = untuned(result, b), tuned(result, b)
        lines.append(
            f"- Global batch {b * s['workers']:,} against sync's {m * s['workers']:,}, at "
            f"sync's rates (the paper's claim: lower AUC): AUC(sync's) - AUC({b * s['workers']:,}) "
            f"per seed {', '.join(f'{g:+.4f}' for g in untuned_gaps.values())}, "
            f"{at_x1.describe()}; {settled(at_x1)}. Each at its tuned factor "
            f"(x{best_factor(result, m):g} and x{best_factor(result, b):g}): "
            f"{', '.join(f'{g:+.4f}' for g in tuned_gaps.values())}, "
            f"{at_best.describe()}; {settled(at_best)}."
        )
    lines.append(
        '- A verdict short of "holds" means the gap does not clear twice the seeds\' spread: '
        "within noise (or against the paper where marked)."
    )
    lines += ["", *length_lines(result)]
    return reviewer.appended("\n".join(lines) + "\n", "gba-global-batch")


def length_lines(result: dict[str, Any]) -> list[str]:
    """The run length's paragraph: the criterion and which runs met it, with the numbers."""
    rows = [(r, c) for r, c in flattening(result) if c is not None]
    if not rows:
        return ["Length: no held-out curve was recorded inside the runs."]
    flat = [(r, c) for r, c in rows if c == c and c < RULE.tolerance]
    worst = max((c for _, c in rows if c == c), default=float("nan"))
    still = [
        f"local batch {r['local_batch']} x{r['lr_factor']:g} seed {r['seed']} ({c:+.2%})"
        for r, c in rows
        if not (c == c and c < RULE.tolerance)
    ]
    evals = result["settings"].get("evals_last_day", "-")
    return [
        f"Length: the paper's setting, 3 switched days, not lengthened (a continual task: "
        "each day's data is trained once). Criterion (`settle.Flattening`): "
        f"{RULE.describe()}, applied to the last switched day, whose held-out logloss is "
        f"evaluated {evals} times in the day on the job's held-out split (the task's last "
        f"day, the day after the last switched day). {len(flat)} of the {len(rows)} runs the "
        f"claims read met it; the largest improvement over the window {worst:+.2%}."
        + (f" Still falling: {'; '.join(still)}." if still else ""),
        "",
        "![held-out logloss in the last switched day](last_day_curves.png)",
    ]


def _curves(result: dict[str, Any], path: Path) -> None:
    curves = Curves()
    for b in batches(result):
        for f in dict.fromkeys((UNTUNED, best_factor(result, b))):
            found = [c for c in auc(result, b, f, "last_day_curve").values() if c]
            if not found:
                continue
            n = min(len(c) for c in found)
            curves.curves[f"local batch {b}, lr x{f:g}"] = [
                (found[0][i][0], statistics.fmean(c[i][1] for c in found)) for i in range(n)
            ]
    if curves.curves:
        curves.plot(
            path,
            "GBA after sync: held-out logloss in the last switched day (mean over seeds)",
            "fraction of the last switched day trained",
            RULE,
        )


def write(result: dict[str, Any], out_dir: Path) -> None:
    _plot(result, out_dir / "global_batch.png")
    _curves(result, out_dir / "last_day_curves.png")
    (out_dir / "report.md").write_text(render(result))


def _plot(result: dict[str, Any], path: Path) -> None:
    fig, ax = new_figure(6, 4)
    workers = int(result["settings"]["workers"])
    xs = batches(result)
    lines = {"lr x1 (sync's rates)": {b: UNTUNED for b in xs}}
    if result.get("tuning"):
        lines["each at its tuned factor"] = {b: best_factor(result, b) for b in xs}
    for label, chosen in lines.items():
        values = [list(auc(result, b, chosen[b]).values()) for b in xs]
        means = [statistics.fmean(v) for v in values]
        low = [mu - min(v) for mu, v in zip(means, values, strict=True)]
        high = [max(v) - mu for mu, v in zip(means, values, strict=True)]
        ax.errorbar(
            [b * workers for b in xs],
            means,
            yerr=[low, high],
            marker="o",
            capsize=3,
            label=label,
        )
    ax.axvline(matched(result) * workers, color="grey", linestyle=":", label="sync's global batch")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("global batch after the switch")
    ax.set_ylabel("test AUC, mean over the switched days")
    ax.set_title("GBA after sync: the global batch (real math)")
    ax.legend()
    ax.grid(alpha=0.3)
    save_figure(fig, path)
