"""How the staleness-normalization reproduction settles its claims: each variant's tuning on
the one grid, the held-out loss curves and the flattening rule, and which way each claim
went (with the paper, against it, or not settled), for its report."""

from __future__ import annotations

import statistics
from typing import Any

from experiments.repro import settle, settled_words
from experiments.repro.staleness_norm_shape import (
    NEAR,
    DataNorm,
    Labels,
    by_label,
    data_norm,
    labels_of,
    per_seed,
    shape,
    size_name,
)

LOSS_PLOT = "heldout_loss.png"
VALID_NOTE = (
    "the AUC on a validation split of {:,} examples drawn from the same teacher apart from "
    "the test split (a stream of its own), so the test numbers the claims read are not the ones "
    "tuned on"
)


def loss_curve(run: dict[str, Any]) -> list[tuple[float, float]]:
    """A run's held-out logloss by examples trained."""
    return [(float(c["examples"]), float(c["test_logloss"])) for c in run["curve"]]


def mean_loss_curve(runs: list[dict[str, Any]]) -> list[tuple[float, float]]:
    """The held-out logloss at each evaluation point, averaged over the seeds' runs."""
    length = min(len(run["curve"]) for run in runs)
    return [
        (
            statistics.fmean(run["curve"][i]["examples"] for run in runs),
            statistics.fmean(run["curve"][i]["test_logloss"] for run in runs),
        )
        for i in range(length)
    ]


def rule_of(result: dict[str, Any]) -> settle.Flattening:
    rule = result["flattening"]
    return settle.Flattening(rule["last_fraction"], rule["tolerance"])


def flattening_section(result: dict[str, Any]) -> list[str]:
    """Whether each run's held-out loss had flattened by its end (`settle.Flattening`),
    with each seed's improvement over the rule's window; nothing for results without it."""
    if "flattening" not in result:
        return []
    rule, runs = rule_of(result), by_label(result)
    lines = [
        f"Run length: every run trains {result['setting']['total_steps']:,} updates; a run "
        f"has flattened when {rule.describe()} (the test split's logloss, evaluated "
        f"{len(result['runs'][0]['curve'])} times a run).",
        "",
        f"![held-out loss]({LOSS_PLOT})",
        "",
        f"| run | seeds flat | improvement over the last {rule.last_fraction:.0%}, by seed |",
        "| --- | --- | --- |",
    ]
    short: list[tuple[str, float]] = []
    for label, label_runs in runs.items():
        changes = {run.get("seed", 0): rule.change(loss_curve(run)) for run in label_runs}
        flat = [seed for seed, change in changes.items() if change < rule.tolerance]
        cells = ", ".join(f"{changes[seed]:.2%}" for seed in sorted(changes))
        lines.append(f"| {label} | {len(flat)} of {len(changes)} | {cells} |")
        if len(flat) < len(changes):
            short.append((label, max(changes.values())))
    total = len(result["runs"])
    if not short:
        lines += ["", f"Every one of the {total} runs met the criterion."]
    else:
        worst = ", ".join(f"{label} (up to {change:.2%})" for label, change in short)
        lines += [
            "",
            f"Not every run met the criterion: runs of {worst} still fell by more than "
            f"{rule.tolerance:.1%} over the last {rule.last_fraction:.0%}, so their final "
            "numbers are not yet their converged ones.",
        ]
    return lines


def _grid(tuning: list[dict[str, Any]], workers: int) -> str:
    rows = [t for t in tuning if t.get("workers", workers) == workers]
    return ", ".join(f"x{t['lr_factor']:g} AUC {t['final_auc']:.4f}" for t in rows)


def _edge(factor: float, tuning: list[dict[str, Any]]) -> str:
    grid = [t["lr_factor"] for t in tuning]
    return " (at the grid's edge)" if factor in (min(grid), max(grid)) else ""


def tuned_table(result: dict[str, Any]) -> list[str]:
    """How every variant's learning rate was set (`settle.tune` on one grid): the factors
    tried with their validation AUC, the chosen one, and whether it is at an edge."""
    grid = result["grid"]
    lines = [
        "Learning rates: every compared variant tuned on the same grid of factors of the "
        "default dense (0.01) and sparse (0.05) Adagrad rates ("
        + ", ".join(f"x{v:g}" for v in grid["values"])
        + f"; a best at an edge gets the next factor past it, x{grid['step']:g} further, up "
        f"to {settle.MAX_EXTENSIONS} times), each point a full-length run of seed "
        f"{result['tuning_seed']} (the chosen one is that seed's run below), scored on the "
        f"{result['tuning_score']}: {VALID_NOTE.format(result['valid_examples'])}.",
        "",
        "| variant | factors tried (validation AUC) | chosen | at an edge? |",
        "| --- | --- | --- | --- |",
    ]
    for t in result["tuned"]:
        tried = ", ".join(f"x{v} {score:.4f}" for v, score in t["scores"].items())
        edge = settle.edge_text(t)
        lines.append(f"| {t['variant']} | {tried} | x{t['chosen']:g} | {edge} |")
    return lines


def tuning_text(result: dict[str, Any], names: Labels) -> str:
    """How the learning rates were set: the grid at each size and what was frozen."""
    tuning, lr = result["tuning"], result["lr_factor"]
    small, large = size_name(names.small), size_name(names.large)
    text = (
        "Learning rates: tuned once on each un-normalized baseline over a quarter of the "
        "examples (seed 0), factors of the default dense (0.01) and sparse (0.05) Adagrad "
        f"rates; {small}: {_grid(tuning, names.small)}; x{lr:g}{_edge(lr, tuning)} is frozen "
        f"for every run below but the {large} un-normalized baseline"
    )
    if "lr_factor_large" not in result:
        return (
            text + ", which ran at it too: these results predate its own tuning (`recsync "
            "reproduce staleness-norm` tunes it on the same grid)."
        )
    lr_large = result["lr_factor_large"]
    return (
        f"{text}. {large}, on the same grid: {_grid(tuning, names.large)}; the {large} "
        f"un-normalized baseline runs at its best, x{lr_large:g}{_edge(lr_large, tuning)}."
    )


def settled(result: dict[str, Any]) -> list[str]:
    """Each claim, which way it settled, with its effect, spread and verdict; nothing for
    results from before every variant's tuning."""
    if "tuned" not in result:
        return []
    names, sh = labels_of(result), shape(result)
    s_name, l_name = size_name(names.small), size_name(names.large)
    claims = [
        (f"rho's gap to {s_name} below no normalization's at {l_name} (Fig. 5)", sh.closer),
        (f"rho keeps {l_name} within {NEAR} AUC of {s_name} (Fig. 5)", sh.near),
        (f"1/tau the worst {l_name} run, below {sh.runner_up} (Fig. 5)", sh.worst_verdict),
        *(
            (f"data normalization over rho at {d.size} (Fig. 6)", d.verdict)
            for d in data_norm(result)
            if isinstance(d, DataNorm)
        ),
    ]
    seeds = len(per_seed(by_label(result), names.base_small))
    lines = [
        f"## How each claim settled ({seeds} seeds, every variant at its own tuned rate)",
        "",
    ]
    for claim, verdict in claims:
        lines.append(f"- {claim}: {settled_words.settled(verdict)}; {verdict.describe()}.")
    return lines
