"""The hierarchical-training reproduction's report: results.json, the figures, report.md with
each of the paper's claims beside ours."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from experiments.repro import hierarchical_settings as ht
from experiments.repro import reviewer
from experiments.repro.verdict import Direction, judge
from recsync.app.runs.plots import new_figure, save_figure
from recsync.model.dlrm import build_dense


def write_report(out_dir: Path, results: dict[str, Any]) -> None:
    (out_dir / "results.json").write_text(json.dumps(results, indent=1))
    _plot_fig7_8(results, out_dir / "fig7_8_loss_and_eps.png")
    _plot_fig10(results["throughput"], out_dir / "fig10_scaling.png")
    _plot_fig11(results["throughput"], out_dir / "fig11_ablation.png")
    (out_dir / "report.md").write_text(_report(results))


def _ratios(speed: dict[str, Any], settings: tuple[ht.Setting, ...]) -> list[float]:
    base = speed[settings[0].label]["eps"]
    return [speed[s.label]["eps"] / base for s in settings]


def _relative_loss(loss: dict[str, Any], key: str) -> list[float]:
    base = loss[ht.EASGD.label][key]
    return [100 * (loss[s.label][key] / base - 1) for s in ht.FIG7]


def _bars(ax: Any, labels: list[str], values: list[float], fmt: str) -> None:
    bars = ax.bar(labels, values)
    for bar, value in zip(bars, values, strict=True):
        ax.annotate(
            fmt.format(value),
            (bar.get_x() + bar.get_width() / 2, bar.get_height()),
            ha="center",
            va="bottom" if value >= 0 else "top",
        )
    ax.tick_params(axis="x", labelsize=8, rotation=15)
    ax.grid(alpha=0.3, axis="y")
    ax.margins(y=0.12)


def _plot_fig7_8(results: dict[str, Any], path: Path) -> None:
    fig, (loss_ax, eps_ax) = new_figure(12, 4, columns=2)
    labels = [s.label for s in ht.FIG8]
    _bars(loss_ax, labels, _relative_loss(results["quality"], "train_loss"), "{:+.2f}%")
    loss_ax.set_ylabel("train loss vs EASGD 40t (%)")
    loss_ax.set_title("Fig. 7: relative loss (lower is better; default DLRM)")
    _bars(eps_ax, labels, _ratios(results["throughput"], ht.FIG8), "{:.2f}x")
    eps_ax.set_ylabel("EPS / EASGD 40t's")
    eps_ax.set_title("Fig. 8: EPS (compute-bound model, virtual time)")
    save_figure(fig, path)


def _plot_fig10(speed: dict[str, Any], path: Path) -> None:
    fig, (groups_ax, nodes_ax) = new_figure(11, 4, columns=2)
    groups = [s.groups for s in ht.FIG10A]
    groups_ax.plot(groups, _ratios(speed, ht.FIG10A), marker="o", label="HT")
    groups_ax.plot(groups, [g / groups[0] for g in groups], "--", label="linear")
    groups_ax.set_xlabel("groups of (6 trainers + 6 group PSs)")
    groups_ax.set_ylabel(f"EPS / EPS at {groups[0]} groups")
    groups_ax.set_title("Fig. 10a: inter-group scaling")
    nodes = [s.trainers for s in ht.FIG10B]
    nodes_ax.plot(nodes, _ratios(speed, ht.FIG10B), marker="o", label="HT")
    nodes_ax.plot(nodes, [n / nodes[0] for n in nodes], "--", label="linear")
    nodes_ax.set_xlabel(f"trainers = group PSs per group ({ht.FIG10B_GROUPS} groups)")
    nodes_ax.set_ylabel(f"EPS / EPS at ({nodes[0]}, {nodes[0]})")
    nodes_ax.set_title("Fig. 10b: nodes per group")
    for ax in (groups_ax, nodes_ax):
        ax.grid(alpha=0.3)
        ax.legend()
    save_figure(fig, path)


def _plot_fig11(speed: dict[str, Any], path: Path) -> None:
    fig, ax = new_figure(9, 4)
    labels = [s.label.replace("HT 5g, ", "") for s in ht.FIG11]
    _bars(ax, ["all on", *labels[1:]], _ratios(speed, ht.FIG11), "{:.2f}x")
    ax.set_ylabel("EPS / HT 5g's with everything on")
    ax.set_title("Fig. 11: ablation at 5 groups (compute-bound model)")
    save_figure(fig, path)


def _tuning(rows: list[dict[str, Any]]) -> str:
    best = min(rows, key=lambda r: float(r["test_logloss"]))
    tried = ", ".join(f"x{r['lr_factor']:g} test logloss {r['test_logloss']:.4f}" for r in rows)
    return f"{tried}; x{best['lr_factor']:g} kept"


def _holds(ours: float, reference: float, direction: Direction) -> str:
    """The verdict rule on one run's number against the paper's reference (one seed a run
    here: too few seeds, with the margin shown)."""
    return judge([ours], reference, direction).describe(2)


def _report(results: dict[str, Any]) -> str:
    speed, loss, engine = results["throughput"], results["quality"], results["engine"]
    fig8 = _ratios(speed, ht.FIG8)
    rel_train = _relative_loss(loss, "train_loss")
    rel_test = _relative_loss(loss, "test_logloss")
    fig10a, fig10b, fig11 = (_ratios(speed, f) for f in (ht.FIG10A, ht.FIG10B, ht.FIG11))
    model = ht.LARGE_MODEL
    params = sum(p.numel() for p in build_dense(model, 0).parameters())
    lines = [
        "# Hierarchical training (Huang et al., KDD 2021) in the simulator",
        "",
        "`recsync reproduce hierarchical`. The paper's setting: internal models with hundreds "
        "of sparse features and a dense part of several hundred MB, 100 to 200 nodes, EASGD "
        "with 40 trainers as the baseline, HT with g groups of 6 trainers + 6 group PSs, "
        "every system optimisation on (tagging, refinement, FC split, compression).",
        "",
        "Ours, throughput (Fig. 8, 10, 11): a DLRM with the default 26 tables and top MLP "
        f"{model.top_input}-{'-'.join(map(str, model.top_mlp))}-1, a dense part of "
        f"{params / 1e6:.1f}M parameters ({4 * params / 1e6:.1f} MB, "
        f"{8 * params / 1e6:.1f} MB with Adagrad's state), "
        f"{model.dense_flops_per_example() / 1e6:.0f} MFLOP per example: compute-bound "
        "(a batch's dense FLOPs take far longer than its messages), but smaller than the "
        "paper's (several hundred MB), because the simulator holds every EASGD replica of "
        f"the {ht.EASGD_TRAINERS}-trainer baseline, with its optimizer state and its sync "
        "messages, in one process on a 24 GiB machine (about 13 GB at this size). Every "
        "machine has "
        f"{ht.CORES} cores ({ht.CORES} worker threads per trainer, {ht.CORES} CPU slots per "
        f"group PS); batch {ht.BATCH}; {ht.ITERATIONS_PER_THREAD} batches per worker thread "
        "per run; EPS = examples / virtual seconds of the whole run; "
        f"{ht.EMBEDDING_SERVERS} embedding servers, {ht.GROUP_SERVERS} global dense (sync) "
        "servers for both strategies; HT compresses activations to int8 and gradients to "
        f"bf16 (the paper's choice). Cost model: `{ht.COST}`.",
        "",
        "Ours, loss (Fig. 7): the default DLRM (dense part 1.9 MB) on "
        f"{ht.QUALITY_EXAMPLES:,} examples of the embedded synthetic task, the same "
        "topologies; the learning rates (dense and sparse, the defaults times a factor) "
        f"tuned once on EASGD 40t, then frozen: {_tuning(results['tuning'])}. One seed "
        "a run (seed 0), the baseline also with seed 1.",
        "",
        "![Fig. 7 and 8](fig7_8_loss_and_eps.png)",
        "",
        "| run | dense replicas | EPS | vs EASGD 40t | train loss vs EASGD | test logloss "
        "vs EASGD | test AUC |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for s, ratio, train, test in zip(ht.FIG8, fig8, rel_train, rel_test, strict=True):
        q = loss[s.label]
        lines.append(
            f"| {s.label} | {q['dense_replicas']} | {speed[s.label]['eps']:,.0f} | "
            f"{ratio:.2f}x | {train:+.2f}% | {test:+.2f}% | {q['test_auc']:.4f} |"
        )
    lines += ["", *_fig7_8_claims(results, fig8[-1], rel_train)]
    lines += [
        "![Fig. 10](fig10_scaling.png)",
        "",
        "| run | trainers | group PSs | EPS | speedup | busiest group PS's CPU | "
        "trainer -> group PS bytes per example |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for figure, ratios in ((ht.FIG10A, fig10a), (ht.FIG10B, fig10b)):
        for s, ratio in zip(figure, ratios, strict=True):
            r = speed[s.label]
            lines.append(
                f"| {s.label} | {r['trainers']} | {r['group_servers']} | {r['eps']:,.0f} | "
                f"{ratio:.2f}x | {r['group_ps_cpu']:.0%} | "
                f"{r['traffic_bytes'] / r['examples']:,.0f} |"
            )
    groups = [s.groups for s in ht.FIG10A]
    linear_a = groups[-1] / groups[0]
    lines += [
        "",
        f"- Fig. 10a, paper: linear from 2 to 10 groups. Ours: {fig10a[-1]:.2f}x at "
        f"{groups[-1]} groups over {groups[0]} (linear {linear_a:.1f}x); the shape "
        f"(at least 0.85x linear: {_holds(fig10a[-1], 0.85 * linear_a, 'higher')}).",
        _fig10b_claim(speed, fig10b),
        "",
        "![Fig. 11](fig11_ablation.png)",
        "",
        f"Without tagging rules every FC sits on one group PS and the other "
        f"{ht.GROUP_SERVERS - ht.FIG11[2].servers} would idle; recsync refuses a group PS with "
        f"no part, so that run has {ht.FIG11[2].servers}. Unsplit, the placement fills "
        f"{ht.FIG11[3].servers} group PSs, so that run has {ht.FIG11[3].servers}. An idle "
        "group PS changes no timing.",
        "",
        "| run | EPS | vs all on | busiest group PS's CPU | trainer -> group PS bytes "
        "per example |",
        "| --- | --- | --- | --- | --- |",
    ]
    for s, ratio in zip(ht.FIG11, fig11, strict=True):
        r = speed[s.label]
        lines.append(
            f"| {s.label} | {r['eps']:,.0f} | {ratio:.2f}x | {r['group_ps_cpu']:.0%} | "
            f"{r['traffic_bytes'] / r['examples']:,.0f} |"
        )
    no_refinement, no_tagging, no_split, no_compression = fig11[1:]
    lines += [
        "",
        "- Fig. 11, paper: greedy refinement helps considerably where the rules' placement "
        "is not good enough (Model-A), little where it is (Model-B). Ours without it: "
        f"{no_refinement:.2f}x ("
        + (
            "refinement helps here, as for Model-A)."
            if no_refinement < 0.97
            else "within 3%: the rules' placement is already good here, as for Model-B)."
        ),
        f"- Fig. 11, paper: without tagging and refinement EPS drops by more than 40%. Ours: "
        f"{1 - no_tagging:.0%} lower; the shape (at most 0.6x: "
        f"{_holds(no_tagging, 0.6, 'lower')}).",
        f"- Paper: the model-architecture optimisations (FC split, co-partitioning) raise "
        f"EPS. Ours without them: {no_split:.2f}x; below 1x: "
        f"{_holds(no_split, 1.0, 'lower')}.",
        "- Paper: compression does not always help (its coding CPU outweighed the saving "
        f"for Model-A). Ours without it: {no_compression:.2f}x: " + _compression(no_compression),
        "",
        "## The real engine beside the simulator",
        "",
        f"{engine['label']}, 2 worker threads each, int8 activations and bf16 gradients, "
        f"{engine['examples']:,} synthetic examples, on real Ray actors (2 local CPUs) and "
        f"in the simulator: test AUC {engine['real_auc']:.4f} (Ray) vs "
        f"{engine['sim_auc']:.4f} (simulator); bytes per node kind and message kind "
        + (
            "identical (cross-group exchanges, whose number depends on timing, left out; "
            "row pushes compared as a sum)"
            if not engine["bytes_differences"]
            else "differ: " + "; ".join(engine["bytes_differences"])
        )
        + f"; cross-group syncs {engine['cross_group_syncs'][0]} (simulator) vs "
        f"{engine['cross_group_syncs'][1]} (Ray).",
    ]
    return reviewer.appended("\n".join(lines), "hierarchical")


def _fig7_8_claims(results: dict[str, Any], ht10: float, rel_train: list[float]) -> list[str]:
    """Fig. 8's EPS ratio and Fig. 7's loss claims, with the seed noise and the reason
    where our loss gaps differ from the paper's."""
    loss, reseeded = results["quality"], results["baseline_seed_1"]
    base = loss[ht.EASGD.label]
    seed_train = 100 * (reseeded["train_loss"] / base["train_loss"] - 1)
    seed_test = 100 * (reseeded["test_logloss"] / base["test_logloss"] - 1)
    ht5, ht10_loss = rel_train[1], rel_train[-1]
    by_groups = [s.groups for s in ht.FIG7[1:]]
    step = min(b - a for a, b in zip(rel_train[1:], rel_train[2:], strict=False))
    per_replica = ht.QUALITY_EXAMPLES // ht.EASGD_TRAINERS
    per_thread = per_replica // (ht.CORES * ht.BATCH)
    return [
        f"- Fig. 8, paper: HT 10g is 1.6x (Model-A) and 1.9x (Model-B) EASGD 40t's EPS. "
        f"Ours: {ht10:.2f}x; the shape (within 1.4-2.2x, i.e. at most 0.4 from 1.8x: "
        f"{_holds(abs(ht10 - 1.8), 0.4, 'lower')}).",
        f"- Fig. 7, paper: HT 5g's loss at least 0.2% better than EASGD 40t's. Ours: "
        f"{ht5:+.2f}% (train loss); at least 0.2% better: {_holds(ht5, -0.2, 'lower')}. "
        "The baseline "
        f"with another seed: {seed_train:+.2f}% train loss, {seed_test:+.2f}% test logloss: "
        "differences smaller than that are noise.",
        "- Fig. 7, paper: the gain grows as the groups (dense replicas) get fewer. Ours: "
        + ", ".join(f"{g}g {v:+.2f}%" for g, v in zip(by_groups, rel_train[1:], strict=True))
        + f"; 5 groups best: {_holds(rel_train[1], min(rel_train[2:]), 'lower')}; in the "
        "order of the groups throughout "
        f"(smallest step {step:+.2f}%: {_holds(step, 0.0, 'higher')}).",
        f"- Fig. 7, paper: HT 10g neutral (within 0.2%). Ours: {ht10_loss:+.2f}% (its size "
        f"at most 0.2%: {_holds(abs(ht10_loss), 0.2, 'lower')})"
        + (
            "."
            if abs(ht10_loss) < 0.2
            else "; HT is far better here. EASGD 40t spreads the "
            f"{ht.QUALITY_EXAMPLES:,} examples over 40 replicas (about {per_replica:,} each, "
            f"{per_thread} batches a worker thread), HT 10g over 10. The paper's runs (9 "
            "billion examples) let every replica converge, leaving the small effect of the "
            "replica count its Fig. 7 shows; a run this short is early training, where each "
            "replica's own progress decides the loss."
        ),
        "",
    ]


def _fig10b_claim(speed: dict[str, Any], fig10b: list[float]) -> str:
    """Fig. 10b's claim, with what the run that syncs 10x less often shows."""
    per_node = [r / s.trainers for s, r in zip(ht.FIG10B, fig10b, strict=True)]
    best = ht.FIG10B[max(range(len(per_node)), key=per_node.__getitem__)].trainers
    per_trainer = [speed[s.label]["eps"] / speed[s.label]["trainers"] for s in ht.FIG10B]
    rare = speed[ht.RARE_SYNC.label]
    rare_per_trainer = rare["eps"] / rare["trainers"]
    sent = [speed[s.label]["traffic_bytes"] / speed[s.label]["examples"] for s in ht.FIG10B]
    text = (
        f"- Fig. 10b, paper (8 groups): sublinear from (2, 2) to (10, 10), about (6, 6) best. "
        f"Ours ({ht.FIG10B_GROUPS} groups; the groups share only the embedding and sync "
        f"servers, neither busy here): {fig10b[-1]:.2f}x at (10, 10) (linear 5x); EPS per "
        f"node best at ({best}, {best}); sublinear (below 0.9x linear: "
        f"{_holds(fig10b[-1], 0.9 * 5, 'lower')}). EPS per "
        f"trainer from (2, 2) to (10, 10): {', '.join(f'{p:,.0f}' for p in per_trainer)}; "
        f"(2, 2) with cross-group syncs 10x rarer: {rare_per_trainer:,.0f}. Trainer -> group "
        f"PS bytes per example: {sent[0]:,.0f} -> {sent[-1]:,.0f}."
    )
    if rare_per_trainer > 1.05 * per_trainer[0]:
        text += (
            " The small groups are slow here because a group PS owns 1/p of the model and "
            "syncs it across groups in the background, which at p = 2 takes its NIC and CPU "
            "from the batches."
        )
    if fig10b[-1] >= 0.9 * 5:
        text += (
            " Larger groups do send more per example, as the paper says, but the simulated "
            "25 Gbit/s NICs carry it without slowing the group PSs, so EPS per node does "
            "not fall."
        )
    return text


def _compression(ratio: float) -> str:
    if ratio < 0.97:
        return "compression saves more than its coding costs here."
    if ratio > 1.03:
        return "compression costs more CPU than it saves here (as for Model-A)."
    return (
        "no difference (within 3%): the group PSs' CPU, not their NICs, is the bottleneck "
        "here, and coding costs little next to the FCs' math."
    )
