"""The gba-switching report (its runs are `gba_switching`): AUC per day of every branch over
seeds, the paper's switching claims judged by `verdict.judge`, and the figure; computed from
the results alone (docgen re-renders it from results.json)."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from experiments.repro import reviewer
from experiments.repro.steady import steady_each
from experiments.repro.verdict import Verdict, judge
from recsync.app.runs.plots import new_figure, save_figure

BASELINE = "allreduce"
WITHIN = 0.002  # the paper's claim: GBA keeps sync's AUC after switching
PAPER_EPS_RATIO = "2.0-2.3x"  # GBA / sync global QPS, the paper's Tab. 5.2


# GBA's Fig. 2, which has no reproduction of its own: where this report covers it, and why
# the rest is not run
FIG2 = [
    "## The paper's Fig. 2",
    "",
    "GBA's Fig. 2 has two parts. (1) The average CPU utilization of a real shared "
    "production cluster over time, beside the normalized QPS of a YouTubeDNN model trained "
    "in the synchronous, asynchronous and two local all-reduce modes (SwarmAdam, Prague): "
    "sync fastest when the cluster is vacant, async when it is busy. This is not reproduced "
    "and cannot be here: it is a measurement of the paper's cluster (its utilization trace "
    "and its jobs' QPS), recsync does not model cluster load (its stragglers are injected "
    "slowdowns of chosen workers, `gba-stragglers` and this report, not the result of "
    "other jobs' CPU use), and recsync implements neither SwarmAdam nor Prague. What the "
    "simulator can say about the same question, sync's QPS against async's and GBA's as "
    "the stragglers grow, is `gba-stragglers`' severity sweep. (2) The training AUC after "
    "switching directly between the modes (DeepFM on Criteo-4GB and YouTubeDNN on the "
    "Private data), with sync's tuned hyper-parameters and with async's: a sudden drop, "
    "to 0.5 in the worst case, in either direction. This report's `async` branch is the "
    "sync -> async switch with sync's hyper-parameters (its first-day drop is in the "
    "findings above), on the synthetic task, not Criteo or the Private data. The other "
    "switches of the figure (async -> sync, and either with async's own tuned rates) "
    "would run in the simulator (both strategies switch through checkpoints) but are not "
    "reproduced yet.",
]


def write(result: dict[str, Any], out_dir: Path) -> None:
    _plot(result, out_dir / "auc_per_day.png")
    (out_dir / "report.md").write_text(render(result))


def branches(result: dict[str, Any]) -> dict[str, dict[int, dict[str, Any]]]:
    """The runs by branch (in the runs' order), then by seed."""
    out: dict[str, dict[int, dict[str, Any]]] = {}
    for run in result["runs"]:
        out.setdefault(run["branch"], {})[run["seed"]] = run
    return out


def _mean(values: Any) -> float:
    return statistics.fmean(values)


def _day_means(runs: dict[int, dict[str, Any]], days: int) -> list[float]:
    return [_mean(r["auc"][d] for r in runs.values()) for d in range(days)]


def render(result: dict[str, Any]) -> str:
    if "segment" in result:  # one seed, all-reduce on a segment only: before issue 55's setting
        return _legacy(result)
    days, first = result["days"], result["sync_days"]
    by = branches(result)
    lines = [
        "# Switching strategies through checkpoints (simulator)",
        "",
        f"{days} days of {result['per_day']:,} examples (teacher drift {result['drift']} per "
        f"day), {result['workers']} workers, local batch {result['local_batch']}; days "
        f"0-{first - 1} with `allreduce` (one rank a worker, the paper's synchronous "
        f"baseline), then each strategy from the same checkpoint for days {first}-{days - 2} "
        f"with stragglers `{result['stragglers']}`, then day {days - 1} back to `allreduce` "
        "without stragglers; the `allreduce` branch never leaves it. Hyper-parameters "
        f"unchanged throughout (recsync's defaults). AUC on {result['test_per_day']:,} "
        f"held-out examples of each day, after training it; means over seeds "
        f"{sorted(next(iter(by.values())))} (the paper: production days, one run).",
        "",
        "![AUC per day](auc_per_day.png)",
        "",
        "| strategy | " + " | ".join(f"day {d}" for d in range(days)) + " | mean diff to "
        f"all-reduce (days {first}-{days - 1}) | EPS while switched | excluded a run |",
        "| --- | " + " | ".join("---" for _ in range(days)) + " | --- | --- | --- |",
    ]
    base = _day_means(by[BASELINE], days)
    for name, runs in by.items():
        auc = _day_means(runs, days)
        diff = _mean(a - b for a, b in zip(auc[first:], base[first:], strict=True))
        eps = _mean(_eps(r) for r in runs.values())
        excluded = _mean(sum(r["dropped"]) for r in runs.values())
        lines.append(
            f"| {name} | " + " | ".join(f"{a:.4f}" for a in auc) + f" | {diff:+.4f} | "
            f"{eps:,.0f} | {excluded:,.1f} |"
        )
    text = "\n".join([*lines, "", *_findings(result), "", *FIG2])
    same = [
        seed
        for seed, run in by.get("bsp", {}).items()
        if "gba" in by and by["gba"][seed]["auc"] == run["auc"]
    ]
    extra = (
        [
            f"`bsp` gives the same AUC as `gba` on every day for seeds {same}: the decay never "
            "fired there, so the two applied the same updates."
        ]
        if same
        else []
    )
    return reviewer.appended(text, "gba-switching", extra)


def _eps(run: dict[str, Any]) -> float:
    """A branch's steady examples/s, the mean over its switched days."""
    name = f"{run['branch']}, seed {run['seed']}"
    return _mean(steady_each(run, "reports/gba_switching/results.json", name))


def _per_seed(result: dict[str, Any], name: str, of: Any) -> dict[int, float]:
    return {seed: float(of(run)) for seed, run in branches(result)[name].items()}


@dataclass(frozen=True)
class Switched:
    """The switch's claims judged over seeds: GBA's worst AUC gap to continuing all-reduce
    within WITHIN (`within`), GBA above BSP over the switched days (`over_bsp`), GBA faster
    than all-reduce under the stragglers (`faster`)."""

    gba_worst: dict[int, float]
    gba_auc: dict[int, float]
    bsp_auc: dict[int, float]
    speed: dict[int, float]
    within: Verdict
    over_bsp: Verdict
    faster: Verdict


def switched(result: dict[str, Any]) -> Switched:
    by = branches(result)
    days, base = range(result["sync_days"], result["days"] - 1), by[BASELINE]
    gba_worst = {
        seed: max(abs(run["auc"][d] - base[seed]["auc"][d]) for d in days)
        for seed, run in by["gba"].items()
    }
    gba, bsp = (
        _per_seed(result, n, lambda r: _mean(r["auc"][d] for d in days)) for n in ("gba", "bsp")
    )
    speed = {seed: _eps(run) / _eps(base[seed]) for seed, run in by["gba"].items()}
    return Switched(
        gba_worst,
        gba,
        bsp,
        speed,
        judge(gba_worst, WITHIN, "lower"),
        judge(gba, bsp, "higher"),
        judge(speed, 1.0, "higher"),
    )


def _findings(result: dict[str, Any]) -> list[str]:
    days, first = result["days"], result["sync_days"]
    by = branches(result)
    base = by[BASELINE]
    sw = switched(result)

    def worst(name: str, on: range | list[int]) -> dict[int, float]:
        return {
            seed: max(abs(run["auc"][d] - base[seed]["auc"][d]) for d in on)
            for seed, run in by[name].items()
        }

    gba_worst, speed = sw.gba_worst, sw.speed
    excluded = _per_seed(result, "gba", lambda r: sum(r["dropped"]))
    first_drop = sorted(
        (
            (_mean(base[s]["auc"][first] - r["auc"][first] for s, r in runs.items()), name)
            for name, runs in by.items()
            if name != BASELINE
        ),
        reverse=True,
    )
    last = days - 1
    back = {name: _mean(worst(name, [last]).values()) for name in by if name != BASELINE}
    lines = [
        "Findings:",
        "",
        f"- GBA continues all-reduce's checkpoint with the same hyper-parameters: its worst "
        f"gap to continuing all-reduce over the switched days is "
        f"{_mean(gba_worst.values()):.4f} (seeds "
        f"{', '.join(f'{v:.4f}' for v in gba_worst.values())}). Within {WITHIN}: "
        f"{sw.within.describe()}.",
        f"- GBA {'is not' if any(excluded.values()) else 'is'} BSP here: its token decay "
        f"excluded {_mean(excluded.values()):,.1f} "
        f"gradients a run over the switched days (seeds "
        f"{', '.join(f'{v:.0f}' for v in excluded.values())}); mean AUC of the switched days "
        f"GBA {_mean(sw.gba_auc.values()):.4f}, BSP "
        f"{_mean(sw.bsp_auc.values()):.4f}. GBA above BSP: {sw.over_bsp.describe()}.",
        f"- Throughput under the stragglers: GBA at {_mean(speed.values()):.2f}x all-reduce's "
        f"EPS (the paper: {PAPER_EPS_RATIO} on its shared cluster; here the ratio is what "
        "the injected stragglers take from all-reduce, see gba-stragglers' sweep). GBA "
        f"faster than all-reduce: {sw.faster.describe(2)}.",
        "- AUC lost against all-reduce on the first switched day: "
        + ", ".join(f"`{name}` {drop:.4f}" for drop, name in first_drop)
        + ". `async` and `bounded_staleness` apply every local gradient (of a 16x smaller "
        "batch than the global one) at the same learning rate, with staleness.",
        f"- Back to all-reduce on day {last}: the gap to the run that never left it is "
        + ", ".join(f"`{name}` {gap:.4f}" for name, gap in back.items())
        + f"; async behind all-reduce on day {last}: "
        + judge(
            _per_seed(result, BASELINE, lambda r: r["auc"][last]),
            _per_seed(result, "async", lambda r: r["auc"][last]),
            "higher",
        ).describe()
        + ".",
    ]
    return lines


def _plot(result: dict[str, Any], path: Path) -> None:
    days, first = result["days"], result["sync_days"]
    fig, ax = new_figure(7, 4)
    for name, runs in branches(result).items():
        ax.plot(range(days), _day_means(runs, days), marker="o", label=name)
    ax.axvspan(-0.3, first - 0.5, color="grey", alpha=0.1, label="all-reduce (shared)")
    ax.axvspan(days - 1.5, days - 0.7, color="green", alpha=0.08, label="back to all-reduce")
    ax.set_xlabel("day")
    ax.set_ylabel("test AUC (held-out of that day, mean over seeds)")
    ax.set_title("switching after 2 days of all-reduce (simulated, stragglers while switched)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    save_figure(fig, path)


def _legacy(result: dict[str, Any]) -> str:
    """A results.json of the one-seed setting (`sync` days, all-reduce on a segment)."""
    days = result["days"]
    lines = [
        "# Switching strategies through checkpoints (simulator)",
        "",
        "These results predate the current setting (one seed, `sync` as the baseline, "
        "stragglers too mild for GBA's decay to fire); `recsync reproduce gba-switching` "
        "replaces them.",
        "",
        "| strategy | " + " | ".join(f"day {d}" for d in range(days)) + " |",
        "| --- | " + " | ".join("---" for _ in range(days)) + " |",
    ]
    for name, branch in result["branches"].items():
        lines.append(f"| {name} | " + " | ".join(f"{a:.4f}" for a in branch["auc"]) + " |")
    return "\n".join(lines) + "\n"
