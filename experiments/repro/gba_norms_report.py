"""The GBA Fig. 4 reproduction's report and figure (numbers from its rows): the L2 norms of
the pushed and of the applied dense gradients, `sync` against BSP at several local batch
sizes, with the paper's observations judged by `verdict.judge`."""

from __future__ import annotations

import math
from pathlib import Path
from statistics import fmean
from typing import Any

from experiments.repro import reviewer
from experiments.repro.verdict import Verdict, judge
from recsync.app.runs.plots import new_figure, save_figure

Rows = list[dict[str, Any]]
PAPER = (
    "YouTubeDNN on the Private data: BSP on 100 workers aggregating M = 100, `sync` at "
    '"6.4K local batch size (64 workers)"; "the batch size determines the mean and '
    "variance of the distribution. The distribution of BSP resembles synchronous training "
    'when the aggregation size is similar (i.e., BSP-4K)" (Fig. 4, no numbers in the text)'
)
WHICH = {"pushed": "pushed by a worker", "applied": "applied (the mean of M pushes)"}


def variants(rows: Rows) -> list[tuple[str, int]]:
    """(strategy, local batch) of every variant: BSP by batch, then sync."""
    found = {(r["strategy"], r["local_batch"]) for r in rows}
    return sorted(found, key=lambda v: (v[0] == "sync", v[1]))


def by_seed(rows: Rows, name: str, batch: int, key: str) -> dict[int, float]:
    return {r["seed"]: r[key] for r in rows if r["strategy"] == name and r["local_batch"] == batch}


def distance(rows: Rows, batch: int, which: str, seed: int) -> float:
    """How far BSP at `batch` is from `sync` (seed `seed`): |log| of the ratio of the norms'
    means plus |log| of the ratio of their standard deviations (0: the same mean and sd)."""
    bsp = next(
        r
        for r in rows
        if r["strategy"] == "bsp" and r["local_batch"] == batch and r["seed"] == seed
    )
    sync = next(r for r in rows if r["strategy"] == "sync" and r["seed"] == seed)
    return abs(math.log(bsp[f"{which}_mean"] / sync[f"{which}_mean"])) + abs(
        math.log(bsp[f"{which}_sd"] / sync[f"{which}_sd"])
    )


def shrinks(rows: Rows, which: str, stat: str) -> Verdict:
    """BSP's norm `stat` ("mean" or "sd") lower at its largest local batch than at its
    smallest, paired by seed."""
    batches = [b for name, b in variants(rows) if name == "bsp"]
    key = f"{which}_{stat}"
    return judge(
        by_seed(rows, "bsp", batches[-1], key), by_seed(rows, "bsp", batches[0], key), "lower"
    )


def resembles(rows: Rows, which: str, sync_batch: int) -> Verdict:
    """BSP at sync's local batch nearer to `sync` than the nearest other BSP, by seed."""
    bsp = [b for name, b in variants(rows) if name == "bsp"]
    if sync_batch not in bsp:
        raise ValueError(f"no BSP run at sync's local batch {sync_batch} (BSP at {bsp})")
    others = [b for b in bsp if b != sync_batch]
    seeds = sorted(by_seed(rows, "sync", sync_batch, f"{which}_mean"))
    matched = {s: distance(rows, sync_batch, which, s) for s in seeds}
    nearest = {s: min(distance(rows, b, which, s) for b in others) for s in seeds}
    return judge(matched, nearest, "lower")


def _seeds(rows: Rows) -> str:
    n = len({r["seed"] for r in rows})
    return f"{n} seed{'s' if n != 1 else ''}"


def report(rows: Rows, s: dict[str, Any]) -> str:
    """The report's text; `s` states the setting (gba_norms.settings())."""
    lines = [
        "# GBA Fig. 4: L2 norms of the dense gradients, sync vs BSP (simulator)",
        "",
        f"Ours: {s['workers']} workers for every run, one dense server (a push is a "
        f"worker's whole dense gradient), stragglers `{s['stragglers']}`; `sync` at a local "
        f"batch of {s['sync_batch']}, BSP (M = {s['workers']}) at "
        f"{', '.join(map(str, s['bsp_batches']))}; {s['steps_per_worker']} steps per "
        f"worker a run from a checkpoint of {s['warm_steps']} `sync` steps per worker (at "
        f"sync's batch), the first {s['warmup']:.0%} of its pushes left out; "
        f"{_seeds(rows)}; the default DLRM, task and optimizers. "
        "Norms are seen at the dense server through the simulator's observer hook. "
        f"The paper: {PAPER}.",
        "",
        "![norm distributions](norms.png)",
        "",
        "| variant | examples a push | a update | pushed norm mean (sd) | applied norm "
        "mean (sd) | staleness (updates) | test AUC |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, batch in variants(rows):
        mine = [r for r in rows if r["strategy"] == name and r["local_batch"] == batch]
        avg = {
            k: fmean(r[k] for r in mine)
            for k in (
                "pushed_mean",
                "pushed_sd",
                "applied_mean",
                "applied_sd",
                "mean_staleness",
                "test_auc",
            )
        }
        lines.append(
            f"| {name}-{batch} | {batch} | {mine[0]['aggregate_examples']:,} | "
            f"{avg['pushed_mean']:.4f} ({avg['pushed_sd']:.4f}) | {avg['applied_mean']:.4f} "
            f"({avg['applied_sd']:.4f}) | {avg['mean_staleness']:.2f} | "
            f"{avg['test_auc']:.4f} |"
        )
    lines += ["", "Means over seeds (each seed's mean and sd over its pushes).", ""]
    lines += _findings(rows, s["sync_batch"])
    return reviewer.appended("\n".join(lines) + "\n", "gba-norms")


def _findings(rows: Rows, sync_batch: int) -> list[str]:
    batches = [b for name, b in variants(rows) if name == "bsp"]
    lo, hi = batches[0], batches[-1]
    lines = ["Findings (the paper's observations, judged on ours):", ""]
    for which in ("pushed", "applied"):
        lines += [
            f"- The norm of the gradient {WHICH[which]}: its mean is lower at BSP-{hi} than "
            f"at BSP-{lo}, {shrinks(rows, which, 'mean').describe()}; its sd is lower, "
            f"{shrinks(rows, which, 'sd').describe()}.",
            f"- BSP-{sync_batch} (sync's local batch and aggregation size) is nearer to "
            f"sync-{sync_batch} than any other BSP, in the {which} norms' distribution "
            "(distance: |log| of the ratio of means + |log| of the ratio of sds), "
            f"{resembles(rows, which, sync_batch).describe()}.",
        ]
    return lines


def plot(rows: Rows, path: Path) -> None:
    """The norms' empirical CDFs, pushed (left) and applied (right), all seeds pooled."""
    fig, axes = new_figure(11, 4, columns=2)
    for ax, which in zip(axes, ("pushed", "applied"), strict=True):
        for name, batch in variants(rows):
            values = sorted(
                v
                for r in rows
                if r["strategy"] == name and r["local_batch"] == batch
                for v in r[which]
            )
            ranks = [(i + 1) / len(values) for i in range(len(values))]
            style = "--" if name == "sync" else "-"
            ax.plot(values, ranks, style, label=f"{name}-{batch}")
        ax.set_xscale("log")
        ax.set_xlabel(f"L2 norm of the dense gradient {WHICH[which]}")
        ax.set_ylabel("fraction of gradients")
        ax.grid(alpha=0.3)
        ax.legend()
    save_figure(fig, path)
