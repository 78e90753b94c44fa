"""The staleness-normalization reproduction's figures and report (Liu & Zhao Fig. 5 and 6),
read off its results: the paper's setting and number beside ours, and whether the shape holds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from experiments.repro import reviewer
from experiments.repro.verdict import judge
from recsync.app.runs.plots import new_figure, save_figure

FIG5 = (
    "1K, no normalization",
    "3K, no normalization",
    "3K, 1/tau (Zhang et al. 2016)",
    "3K, rho on tau'",
)
NEAR = 0.005  # AUC: "almost achieves the same AUC as in 1K workers"
FIG6 = ("1K, rho", "1K, rho + data norm", "3K, rho on tau'", "3K, rho on tau' + data norm")


def by_label(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {run["label"]: run for run in result["runs"]}


def write_report(result: dict[str, Any], out_dir: Path) -> None:
    runs = by_label(result)
    for name, labels, title in (
        ("fig5_staleness_norm.png", FIG5, "Fig. 5: staleness normalization at 3K workers"),
        ("fig6_data_norm.png", FIG6, "Fig. 6: data normalization over rho"),
    ):
        fig, ax = new_figure(7, 4)
        for label in labels:
            curve = runs[label]["curve"]
            style = "k--" if label.startswith("1K, no") else "-"
            ax.plot(
                [p["examples"] for p in curve], [p["test_auc"] for p in curve], style, label=label
            )
        ax.set_xlabel("examples")
        ax.set_ylabel("test AUC")
        ax.set_title(f"{title} (simulated)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        save_figure(fig, out_dir / name)
    (out_dir / "report.md").write_text(report(result))


def report(result: dict[str, Any]) -> str:
    runs, paper, setting = by_label(result), result["paper"], result["setting"]
    small, large = runs["1K, no normalization"], runs["3K, no normalization"]
    lines = [
        "# Staleness and data normalization at 1K and 3K workers (Liu & Zhao Fig. 5, 6; simulator)",
        "",
        "Paper: an e-commerce Wide & Deep model (30 billion sparse parameters), asynchronous "
        f"SGD on 1K and 3K workers, about {paper['batch']} examples per iteration, 12 million "
        f"iterations at 3K workers (about {paper['steps_per_worker']:,} per worker), Adagrad.",
        "",
        f"Ours: async in the simulator with the real math, {setting['total_steps']:,} updates "
        f"of {setting['batch_size']} examples per run (every run the same examples: "
        f"{small['steps_per_worker']} steps per worker at 1K, {large['steps_per_worker']} at "
        f"3K), DLRM with {setting['tables']} (Zipf ids), MLPs 64-32, one dense and one "
        "embedding server, synthetic teacher data (teacher AUC "
        f"{small['teacher_auc']:.4f}). Cost model: `{setting['cost']}`.",
        "",
        "Scale difference, plainly: the paper's workers make about 4,000 steps each and its "
        f"staleness is 1/{paper['steps_per_worker'] * 3_000 // 2_090:,} of its run; ours make "
        f"{large['steps_per_worker']} at 3K (staleness 1/"
        f"{setting['total_steps'] // max(1, round(large['staleness']['mean'])):,} of the run). "
        "A run of thousands of steps per worker at 3K workers is 12M+ simulated updates, about "
        "5 hours of real math per run on this 2-core machine; one run here takes about 6 "
        "minutes.",
        "",
        "Learning rates: tuned once on the 1K un-normalized baseline over a quarter of the "
        "examples, factors of the default dense (0.01) and sparse (0.05) Adagrad rates: "
        + ", ".join(f"x{t['lr_factor']:g} AUC {t['final_auc']:.4f}" for t in result["tuning"])
        + f"; x{result['lr_factor']:g} is frozen for every run below. One seed (0).",
        "",
        *_staleness_table(runs, paper),
        "",
        "![Fig. 5](fig5_staleness_norm.png) ![Fig. 6](fig6_data_norm.png)",
        "",
        "| run | rule | final test AUC | logloss |",
        "| --- | --- | --- | --- |",
    ]
    for run in result["runs"]:
        lines.append(
            f"| {run['label']} | `{run['norm']}` | {run['final_auc']:.4f} | "
            f"{run['final_logloss']:.4f} |"
        )
    return reviewer.appended("\n".join([*lines, "", *findings(result)]), "staleness-norm")


def _staleness_table(runs: dict[str, dict[str, Any]], paper: dict[str, Any]) -> list[str]:
    lines = [
        "Staleness of the dense gradients once every worker has pushed (each worker's first "
        "push left out), un-normalized runs, beside the paper's Fig. 3:",
        "",
        "| workers | ours: mean | variance | sd / mean | paper: mean | variance | sd / mean |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for label, workers in (("1K, no normalization", "1000"), ("3K, no normalization", "3000")):
        s = runs[label]["staleness"]
        mean, variance = paper["staleness"][workers]
        lines.append(
            f"| {int(workers):,} | {s['mean']:,.0f} | {s['variance']:,.0f} | "
            f"{s['std'] / s['mean']:.1%} | {mean:,.0f} | {variance:,.0f} | "
            f"{variance**0.5 / mean:.1%} |"
        )
    return lines


def findings(result: dict[str, Any]) -> list[str]:
    """Each claim: the paper's, ours, and whether the shape holds."""
    runs = by_label(result)
    auc = {label: run["final_auc"] for label, run in runs.items()}
    expected = auc["1K, no normalization"]
    large = {label: auc[label] for label in FIG5[1:]}
    worst = min(large, key=lambda label: large[label])
    rho_gap = expected - auc["3K, rho on tau'"]
    none_gap = expected - auc["3K, no normalization"]
    closed = 1.0 - rho_gap / none_gap if none_gap else 0.0
    # one seed a run: the verdict rule shows each margin, and says too few seeds
    near = judge([abs(rho_gap)], NEAR, "lower")  # rho at 3K within NEAR of 1K
    closer = judge([abs(rho_gap)], abs(none_gap), "lower")  # closer than no normalization
    verdict_rho = (
        f"rho within {NEAR} of 1K: {near.describe()}; closer to 1K than no normalization "
        f"(closes {closed:.0%} of the gap): {closer.describe()}."
    )
    linear = auc["3K, 1/tau (Zhang et al. 2016)"]
    runner_up = min(v for label, v in large.items() if label != "3K, 1/tau (Zhang et al. 2016)")
    worst_verdict = judge([linear], runner_up, "lower")
    gain_small = auc["1K, rho + data norm"] - auc["1K, rho"]
    gain_large = auc["3K, rho on tau' + data norm"] - auc["3K, rho on tau'"]
    gains = judge([min(gain_small, gain_large)], 0.0, "higher")
    paper = result["paper"]["fig6_gain"]
    return [
        "Findings:",
        "",
        f"- Fig. 5, rho keeps 3K near 1K (paper: rho at 3K reaches about the 1K AUC, both "
        f"baselines fall short): 1K un-normalized {expected:.4f}; at 3K no normalization "
        f"{auc['3K, no normalization']:.4f} ({-none_gap:+.4f}), rho on tau' "
        f"{expected - rho_gap:.4f} ({-rho_gap:+.4f}). Shape " + verdict_rho,
        f"- Fig. 5, 1/tau worst (paper: linear normalization converges worst): 1/tau "
        f"{auc['3K, 1/tau (Zhang et al. 2016)']:.4f}, worst of the 3K runs: {worst}; 1/tau "
        f"below the other 3K runs' lowest: {worst_verdict.describe()}.",
        "- How the rules act on Adagrad: a factor common to every gradient cancels in "
        "Adagrad's g / sqrt(sum g^2). 1/tau still matters because the first ~n updates (each "
        "worker's first push, tau < n) enter the accumulator at full size and every later "
        "one at about 1/n of it: every later step is shrunk, a smaller learning rate in "
        "effect. rho on tau' leaves the fresher half of the gradients whole and all but "
        "drops the staler half (tau' > mu' gives rho = tau'^-2, about 1e-6).",
        f"- Fig. 6, data normalization over rho (paper: 1K {paper['1000']}, 3K "
        f"{paper['3000']}): ours 1K {gain_small:+.4f} AUC, 3K {gain_large:+.4f}; the smaller "
        f"gain above 0: {gains.describe()}.",
    ]
