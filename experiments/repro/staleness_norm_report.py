"""The staleness-normalization reproduction's figures and report (Liu & Zhao Fig. 5 and 6),
read off its results: the paper's setting and number beside ours, and whether the shape
holds, each claim judged over seeds by `verdict.judge`. Results written before the seeds and
the large cluster's own tuning existed (one run a label, no seed) still render, and say so."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from experiments.repro import reviewer, settle
from experiments.repro.staleness_norm_settled import (
    LOSS_PLOT,
    flattening_section,
    mean_loss_curve,
    rule_of,
    settled,
    tuned_table,
    tuning_text,
)
from experiments.repro.staleness_norm_shape import (
    NEAR,
    DataNorm,
    Labels,
    Runs,
    by_label,
    cell,
    data_norm,
    labels_of,
    mean_of,
    per_seed,
    shape,
    size_name,
)
from recsync.app.runs.plots import new_figure, save_figure
from recsync.strategy.staleness_norm import StalenessNorm


def mean_curve(runs: list[dict[str, Any]]) -> tuple[list[int], list[float]]:
    """The test AUC at each evaluation point (the n-th of every seed's run), averaged over
    the seeds' runs."""
    length = min(len(run["curve"]) for run in runs)
    points = [
        round(statistics.fmean(run["curve"][i]["examples"] for run in runs)) for i in range(length)
    ]
    aucs = [statistics.fmean(run["curve"][i]["test_auc"] for run in runs) for i in range(length)]
    return points, aucs


def write_report(result: dict[str, Any], out_dir: Path) -> None:
    runs, names = by_label(result), labels_of(result)
    for name, labels, title in (
        (
            "fig5_staleness_norm.png",
            names.fig5,
            f"Fig. 5: staleness normalization at {size_name(names.large)} workers",
        ),
        ("fig6_data_norm.png", names.fig6, "Fig. 6: data normalization over rho"),
    ):
        fig, ax = new_figure(7, 4)
        for label in labels:
            if label not in runs:
                continue
            style = "k--" if label == names.base_small else "-"
            ax.plot(*mean_curve(runs[label]), style, label=label)
        ax.set_xlabel("examples")
        ax.set_ylabel(f"test AUC (mean over {len(runs[names.base_small])} seeds)")
        ax.set_title(f"{title} (simulated)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        save_figure(fig, out_dir / name)
    if "flattening" in result:
        curves = settle.Curves(
            {label: mean_loss_curve(label_runs) for label, label_runs in runs.items()}
        )
        curves.plot(
            out_dir / LOSS_PLOT,
            f"Held-out logloss, mean over {len(runs[names.base_small])} seeds (grey: the "
            "flattening window)",
            "examples",
            rule_of(result),
        )
    (out_dir / "report.md").write_text(report(result))


def report(result: dict[str, Any]) -> str:
    runs, paper, setting = by_label(result), result["paper"], result["setting"]
    names = labels_of(result)
    small, large = runs[names.base_small][0], runs[names.base_large][0]
    s_name, l_name = size_name(names.small), size_name(names.large)
    seeds = sorted(per_seed(runs, names.base_small))
    lines = [
        f"# Staleness and data normalization at {s_name} and {l_name} workers (Liu & Zhao "
        "Fig. 5, 6; simulator)",
        "",
        "Paper: an e-commerce Wide & Deep model (30 billion sparse parameters), asynchronous "
        f"SGD on 1K and 3K workers, about {paper['batch']} examples per iteration, 12 million "
        f"iterations at 3K workers (about {paper['steps_per_worker']:,} per worker), Adagrad.",
        "",
        f"Ours: async in the simulator with the real math on {names.small:,} and "
        f"{names.large:,} workers (the paper's 1K and 3K: the same ratio), "
        f"{setting['total_steps']:,} updates of {setting['batch_size']} examples per run "
        f"(every run the same examples: {small['steps_per_worker']} steps per worker at "
        f"{s_name}, {large['steps_per_worker']} at {l_name}), DLRM with {setting['tables']} "
        "(Zipf ids), MLPs 64-32, one dense and one embedding server, synthetic teacher data "
        f"(teacher AUC {small['teacher_auc']:.4f}). Cost model: `{setting['cost']}`. Seeds: "
        f"{', '.join(map(str, seeds))} (each seed varies the initial weights, the data order "
        "and the workers' speeds; rho's moments are read off the same seed's un-normalized "
        "runs).",
        "",
        "Scale difference, plainly: the paper's workers make about 4,000 steps each and its "
        f"staleness is 1/{paper['steps_per_worker'] * 3_000 // 2_090:,} of its run; ours make "
        f"{large['steps_per_worker']} at {l_name} (staleness 1/"
        f"{setting['total_steps'] // max(1, round(large['staleness']['mean'])):,} of the run). "
        "A run of thousands of steps per worker at 3K workers is 12M+ simulated updates, about "
        "5 hours of real math per run on this 2-core machine.",
        "",
        *(tuned_table(result) if "tuned" in result else [tuning_text(result, names)]),
        "",
        *_staleness_table(runs, paper, names),
        "",
        "![Fig. 5](fig5_staleness_norm.png) ![Fig. 6](fig6_data_norm.png)",
        "",
        *flattening_section(result),
        "| run | rule (seed 0) | lr factor | seeds | final test AUC (mean; min-max) | logloss |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for label, label_runs in runs.items():
        first = label_runs[0]
        lines.append(
            f"| {label} | `{first['norm']}` | x{first['lr_factor']:g} | {len(label_runs)} | "
            f"{cell(per_seed(runs, label))} | "
            f"{mean_of(per_seed(runs, label, 'final_logloss')):.4f} |"
        )
    settle_lines = [*settled(result), ""] if "tuned" in result else []
    text = "\n".join([*lines, "", *findings(result), "", *settle_lines, *fig2_section(runs, names)])
    if "tuned" not in result:
        return reviewer.appended(text, "staleness-norm")
    return text.rstrip("\n") + "\n\n" + "\n".join(questions(result)) + "\n"


def questions(result: dict[str, Any]) -> list[str]:
    """The "what a reviewer would still ask" section of a tuned result, read off its
    setting (the shared list in `reviewer` describes the results before the tuning)."""
    runs, names, setting = by_label(result), labels_of(result), result["setting"]
    large = runs[names.base_large][0]
    steps = large["steps_per_worker"]
    seeds = len(per_seed(runs, names.base_small))
    bullets = [
        f"{names.small:,} and {names.large:,} workers stand in for the paper's 1K and 3K (the "
        "same 3:1 ratio; cut to afford every seed and every variant's tuning, see "
        "experiments/repro/staleness_norm.py): the staleness compares as a fraction of the "
        "workers, not in absolute steps.",
        f"{steps} steps per worker on the large cluster (staleness 1/{steps} of a run) against "
        "the paper's about 4,000 (1/5,741): the normalizations act on a far staler run than "
        "the paper's.",
        f"{seeds} seeds a quality point; each variant's learning rate is the best on one seed "
        f"(seed {result['tuning_seed']}, on a validation split), at the grid's resolution "
        f"(factors x{result['grid']['step']:g} apart): the best for that seed, not for the "
        "mean over seeds.",
        f"A small DLRM ({setting['tables']}) on one dense and one embedding server, against a "
        "30-billion-parameter Wide & Deep model: no server contention here.",
        "The workers' 5% speed spread is chosen to match the paper's staleness spread, not "
        "measured.",
    ]
    return [reviewer.TITLE, "", *(f"- {b}" for b in [*bullets, reviewer.SEED_RULE])]


FIG2_MULTIPLES = (0.25, 0.5, 1.0, 1.5, 2.0, 4.0)  # tau over the large cluster's mean


def fig2_section(runs: Runs, names: Labels) -> list[str]:
    """Liu & Zhao's Fig. 2 (the normalized decay factor): why it is not a run, and recsync's
    factors at this result's staleness, computed by the rule's own code (seed 0's moments,
    as seed 0's normalized runs used them)."""
    small = runs[names.base_small][0]["staleness"]
    large = runs[names.base_large][0]["staleness"]
    inverse = StalenessNorm(rule="inverse")
    rho = StalenessNorm(mu_prime=small["mean"], kappa=2.0)
    rho_normalized = StalenessNorm(
        mu_prime=small["mean"],
        kappa=2.0,
        source_mean=large["mean"],
        source_std=large["std"],
        target_std=small["std"],
    )
    lines = [
        "## Fig. 2 (the normalized decay factor): a formula, not a run",
        "",
        "The paper's Fig. 2 draws the decay factor rho against the staleness for three "
        "settings: Linear (the learning rate divided by the cluster's own staleness, 1/tau), "
        "and Linear1K and Linear500 (the staleness 'approximately normalized' to a cluster of "
        "1K or 500 workers). It is not reproduced as a run because it measures nothing: each "
        "curve is a function of tau alone, the same on any cluster, so there is no training "
        "to simulate and no claim to judge. Nor can its curves be redrawn exactly: the "
        "figure did not survive the paper text's extraction, and the text does not define "
        "the normalization behind Linear1K and Linear500 beyond those words. What can be "
        "checked is the factor recsync applies, which the table gives from the rule's own "
        "code (`StalenessNorm.scale`, src/recsync/strategy/staleness_norm.py) at this result's "
        f"staleness (seed 0's un-normalized runs: mean {small['mean']:,.0f} and sd "
        f"{small['std']:,.0f} at {size_name(names.small)}, {large['mean']:,.0f} and "
        f"{large['std']:,.0f} at {size_name(names.large)}): 1/tau (Zhang et al., the "
        "paper's Linear), eq. 7 with kappa = 2 and mu' the small cluster's mean on tau as it "
        "is, and eq. 7 on the normalized tau' that Fig. 5's large-cluster runs use. 1/tau "
        "halves when tau doubles (the paper's 'the impact of 2 tau0 is 2 times less'). At "
        "stalenesses of hundreds eq. 7 is in effect a step: 1 up to mu', then 1/tau^2, "
        "below 1e-5, so a gradient past the threshold barely moves the model. On tau as it "
        "is that step drops most of the large cluster's gradients (its typical staleness is "
        "past the small cluster's mean); on tau' only the large cluster's own stale tail is "
        "past it, which is the point of normalizing.",
        "",
        f"| tau | tau / mean at {size_name(names.large)} | 1/tau (Linear) | "
        "rho, eq. 7 on tau | tau' | rho, eq. 7 on tau' |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for multiple in FIG2_MULTIPLES:
        tau = multiple * large["mean"]
        lines.append(
            f"| {tau:,.0f} | {multiple:g} | {inverse.scale(tau):.3g} | {rho.scale(tau):.3g} | "
            f"{rho_normalized.normalized(tau):,.0f} | {rho_normalized.scale(tau):.3g} |"
        )
    return lines


def _staleness_table(runs: Runs, paper: dict[str, Any], names: Labels) -> list[str]:
    lines = [
        "Staleness of the dense gradients once every worker has pushed (each worker's first "
        "push left out), un-normalized runs (mean over seeds), beside the paper's Fig. 3 "
        "(mean over workers: E[tau] ~ n, so the ratio compares across sizes):",
        "",
        "| workers | ours: mean | mean / workers | variance | sd / mean | paper: workers | "
        "mean | mean / workers | variance | sd / mean |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for label, workers, paper_workers in (
        (names.base_small, names.small, 1000),
        (names.base_large, names.large, 3000),
    ):
        moments = [run["staleness"] for run in runs[label]]
        mean = statistics.fmean(m["mean"] for m in moments)
        variance = statistics.fmean(m["variance"] for m in moments)
        spread = statistics.fmean(m["std"] / m["mean"] for m in moments)
        paper_mean, paper_variance = paper["staleness"][str(paper_workers)]
        lines.append(
            f"| {workers:,} | {mean:,.0f} | {mean / workers:.2f} | {variance:,.0f} | "
            f"{spread:.1%} | {paper_workers:,} | {paper_mean:,.0f} | "
            f"{paper_mean / paper_workers:.2f} | {paper_variance:,.0f} | "
            f"{paper_variance**0.5 / paper_mean:.1%} |"
        )
    return lines


def findings(result: dict[str, Any]) -> list[str]:
    """Each claim: the paper's, ours, and whether the shape holds (paired by seed)."""
    names = labels_of(result)
    s_name, l_name = size_name(names.small), size_name(names.large)
    sh = shape(result)
    auc, near, closer = sh.auc, sh.near, sh.closer
    worst, runner_up, worst_verdict = sh.worst, sh.runner_up, sh.worst_verdict
    expected, rho = auc[names.base_small], auc[names.rho_large]
    mean_rho_gap, mean_none_gap = sh.mean_rho_gap, sh.mean_none_gap
    closed = 1.0 - mean_rho_gap / mean_none_gap if mean_none_gap else 0.0
    paper = result["paper"]["fig6_gain"]
    gains = [
        f"{d.size} {d.gain:+.4f} AUC (paper, at {int(d.paper_workers) // 1000}K: "
        f"{paper[d.paper_workers]}), above rho alone: {d.verdict.describe()}"
        if isinstance(d, DataNorm)
        else f"{d} not run (see the module's docstring)"
        for d in data_norm(result)
    ]
    return [
        "Findings (means over seeds; verdicts paired by seed):",
        "",
        f"- Fig. 5, rho keeps {l_name} near {s_name} (paper: rho at 3K reaches about the 1K "
        f"AUC, both baselines fall short): {s_name} un-normalized {mean_of(expected):.4f}; at "
        f"{l_name} no normalization {mean_of(auc[names.base_large]):.4f} ({-mean_none_gap:+.4f}), "
        f"rho on tau' {mean_of(rho):.4f} ({-mean_rho_gap:+.4f}). Shape: rho's gap to {s_name} "
        f"below {NEAR}: {near.describe()}; rho's gap below no normalization's (closes "
        f"{closed:.0%} of the gap): {closer.describe()}.",
        f"- Fig. 5, 1/tau worst (paper: linear normalization converges worst): 1/tau "
        f"{mean_of(auc[names.inverse]):.4f}, worst of the {l_name} runs: {worst}; 1/tau below "
        f"the next lowest {l_name} run ({runner_up}): {worst_verdict.describe()}.",
        "- How the rules act on Adagrad: a factor common to every gradient cancels in "
        "Adagrad's g / sqrt(sum g^2). 1/tau still matters because the first ~n updates (each "
        "worker's first push, tau < n) enter the accumulator at full size and every later "
        "one at about 1/n of it: every later step is shrunk, a smaller learning rate in "
        "effect. rho on tau' leaves the fresher half of the gradients whole and all but "
        "drops the staler half (tau' > mu' gives rho = tau'^-2, about 1/mu'^2).",
        f"- Fig. 6, data normalization over rho: {'; '.join(gains)}.",
    ]
