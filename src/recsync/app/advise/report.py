"""An advice shown: the ranked table (rich), the winner's config (a TOML file and the
`--set` lines that turn the user's job into it), the rows as JSON, and a figure."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from matplotlib.ticker import FuncFormatter
from rich.table import Table

from recsync.app.advise.advice import Advice
from recsync.app.advise.candidates import Candidate, JobSource, Refusal
from recsync.app.advise.cluster import CLEAN
from recsync.app.advise.measure import FLAT_MIN_DELTA, FLAT_PATIENCE
from recsync.app.advise.rank import TIER_NAMES, Ranked
from recsync.app.runs.plots import new_figure, save_figure
from recsync.app.runs.run_dir import json_ready, toml_text


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 120:
        return f"{seconds:.1f} s"
    return f"{seconds / 60:.1f} min" if seconds < 7200 else f"{seconds / 3600:.1f} h"


def _spread(value: tuple[float, float] | None, seeds: int, inherited: bool) -> str:
    if value is None:
        return "-"
    text = f"{value[0]:.4f}" if seeds < 2 else f"{value[0]:.4f}±{value[1]:.4f}"
    return text + ("*" if inherited else "")


SHORT_ROLES = {
    "trainers": "trainer",
    "embedding_servers": "embedding",
    "sync_servers": "sync",
    "dense_servers": "dense",
    "group_servers": "group",
    "reader": "reader",
}
SHORT_STALENESS = {"staleness": "stale", "sync gap": "gap"}


def _eps(point: dict[str, Any] | None) -> float | None:
    return None if point is None else float(point["eps_steady"])


def row_of(r: Ranked, conditions: list[str]) -> dict[str, Any]:
    """A ranked candidate as a flat JSON-ready row."""
    c, clean = r.candidate, r.measured.speed.get(CLEAN)
    return json_ready(
        {
            "rank": r.rank,
            "group": TIER_NAMES[r.tier],
            "strategy": c.strategy,
            "candidate": c.label,
            "trainers": c.trainers,
            "workers_per_trainer": c.workers_per_trainer,
            "embedding_servers": c.embedding_servers,
            "dense_servers": c.dense_servers,
            "readers": c.readers,
            "cores": c.cores,
            "eps": r.eps,
            "time_per_pass_s": r.time_per_pass_s,
            "eps_by_condition": {
                name: _eps(r.measured.speed[name])
                for name in conditions
                if name in r.measured.speed
            },
            "staleness_kind": None if clean is None else clean["staleness_kind"],
            "staleness": None if clean is None else clean["staleness"],
            "bottleneck": None if clean is None else clean["bottleneck"],
            "bottleneck_load": None if clean is None else clean["bottleneck_load"],
            "bytes_sent": None if clean is None else clean["bytes_sent"],
            "test_auc": r.auc,
            "test_ne": r.ne,
            "seeds": len(r.measured.quality),
            "quality_examples": [p["examples"] for p in r.measured.quality],
            "flattened": [p.get("flattened") for p in r.measured.quality],
            "quality_from": r.measured.quality_from,
            "changes": c.changes,
            "strategy_table": c.strategy_table,
        }
    )


def advice_rows(advice: Advice) -> list[dict[str, Any]]:
    return [row_of(r, advice.conditions) for r in advice.ranked]


def advice_table(advice: Advice, limit: int | None = None) -> Table:
    """The ranked candidates (the first `limit`), fastest within noise of the best first:
    time to train the data once, steady EPS clean and under each condition, staleness
    (mean dense staleness, "stale") or sync gap ("gap"), test AUC and NE (mean±spread over
    seeds), and the busiest role with its load (CPU or NIC, of what one node has)."""
    table = Table(title="recsync advise (predicted in the simulator)")
    columns = ["#", "candidate", "one pass", "EPS"]
    columns += [f"EPS {name}" for name in advice.conditions[1:]]
    columns += ["staleness", "test AUC", "test NE", "busiest"]
    labels = [len(r.candidate.label) for r in advice.ranked[:limit]]
    widths = {"#": 3, "candidate": max(labels, default=9), "one pass": 8, "EPS": 7}
    widths |= {"staleness": 10, "test AUC": 6, "test NE": 6, "busiest": 13}
    for column in columns:
        left = column in ("candidate", "busiest")
        table.add_column(
            column,
            justify="left" if left else "right",
            min_width=widths.get(column, 7),
            no_wrap=column in widths and column not in ("test AUC", "test NE"),
        )
    for r in advice.ranked[:limit]:
        clean = r.measured.speed.get(CLEAN)
        cells = [str(r.rank), r.candidate.label, duration(r.time_per_pass_s)]
        cells.append("not measured" if r.eps is None else f"{r.eps:,.0f}")
        for name in advice.conditions[1:]:
            point = r.measured.speed.get(name)
            cells.append("-" if point is None else f"{point['eps_steady']:,.0f}")
        if clean is None or clean["staleness"] is None:
            cells.append("-")
        else:
            kind = SHORT_STALENESS.get(clean["staleness_kind"], clean["staleness_kind"])
            cells.append(f"{clean['staleness']:.2f} {kind}")
        seeds, inherited = len(r.measured.quality), r.measured.quality_from is not None
        cells += [_spread(r.auc, seeds, inherited), _spread(r.ne, seeds, inherited)]
        if clean is None:
            cells.append("-")
        else:
            role = SHORT_ROLES.get(clean["bottleneck"], clean["bottleneck"])
            cells.append(f"{role} {clean['bottleneck_load']:.0%}")
        table.add_row(*cells)
    return table


def set_lines(candidate: Candidate, job: JobSource) -> list[str]:
    """The `--set` arguments that turn the user's job into the candidate's."""
    values = {k: v for k, v in job.overrides.items() if not k.startswith("strategy.")}
    values |= candidate.changes
    for key, value in candidate.strategy_table.items():
        if isinstance(value, dict):
            values |= {f"strategy.{key}.{sub}": v for sub, v in value.items()}
        else:
            values[f"strategy.{key}"] = value
    return [
        f"--set {key}={json.dumps(value, separators=(',', ':'))}"
        for key, value in values.items()
        if value is not None
    ]


def refusal_lines(refused: Sequence[Refusal], rows: Path) -> list[str]:
    """The candidates that do not apply, one line per reason with how many and which
    strategies (each candidate is in `rows`, the advice file)."""
    if not refused:
        return []
    by_reason: dict[str, list[Refusal]] = {}
    for refusal in refused:
        by_reason.setdefault(refusal.reason, []).append(refusal)
    lines = [
        f"not applicable: {len(refused)} candidate(s), for {len(by_reason)} reason(s) "
        f"(each in {rows}, not_applicable):"
    ]
    for reason, same in sorted(by_reason.items(), key=lambda item: -len(item[1])):
        names = list(dict.fromkeys(r.strategy for r in same))
        shown = ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")
        lines.append(f"  {len(same)} x {reason} ({shown})")
    return lines


def flat_lines(advice: Advice) -> list[str]:
    """How long the quality points trained, and those whose held-out loss had not yet
    flattened when their sample ran out (their quality is still rising)."""
    own = [r for r in advice.ranked if r.measured.quality and r.measured.quality_from is None]
    points = [p for r in own for p in r.measured.quality]
    if not points:
        return []
    examples = sorted(int(p["examples"]) for p in points)
    lines = [
        f"quality: trained until the held-out loss flattened ({FLAT_PATIENCE} evaluations "
        f"in a row better by < {FLAT_MIN_DELTA} logloss): {examples[0]:,} to "
        f"{examples[-1]:,} examples a point"
    ]
    rising = [
        r.candidate.label for r in own if not all(p.get("flattened") for p in r.measured.quality)
    ]
    if rising:
        lines.append(f"not flattened within the sample (raise --sample): {', '.join(rising)}")
    return lines


def write_outputs(advice: Advice, job: JobSource, folder: Path) -> dict[str, Path]:
    """advice.json (the rows, the refusals, what was not measured), winner.toml (the
    winner's whole job config) and advice.png, in `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    written = {"rows": folder / "advice.json"}
    record = {
        "examples_per_pass": advice.examples_per_pass,
        "conditions": advice.conditions,
        "rows": advice_rows(advice),
        "not_applicable": [vars(r) for r in advice.refused],
        "not_measured": advice.not_measured,
    }
    written["rows"].write_text(json.dumps(json_ready(record), indent=1) + "\n", encoding="utf-8")
    winner = advice.winner
    if winner is not None:
        tree = winner.candidate.config(job).dump()
        tree["run"].pop("name", None)
        written["winner"] = folder / "winner.toml"
        written["winner"].write_text(toml_text(tree), encoding="utf-8")
    written["figure"] = plot_advice(advice, folder / "advice.png")
    return written


def plot_advice(advice: Advice, out: Path) -> Path:
    """Time to train the data once for each strategy's best-ranked candidate, by condition
    (bars; every candidate is in advice.json), and test AUC against EPS where the quality
    was measured."""
    ranked: list[Ranked] = []
    for r in advice.ranked:
        if r.eps is not None and all(s.candidate.strategy != r.candidate.strategy for s in ranked):
            ranked.append(r)
    figure, (speed_axes, quality_axes) = new_figure(12, max(3.0, 0.3 * len(ranked) + 1.5), 2)
    labels = [r.candidate.label for r in ranked]
    height = 0.8 / len(advice.conditions)
    for k, name in enumerate(advice.conditions):
        times = []
        for r in ranked:
            point = r.measured.speed.get(name)
            eps = None if point is None else point["eps_steady"]
            times.append(advice.examples_per_pass / eps if eps else 0.0)
        positions = [i + k * height for i in range(len(ranked))]
        speed_axes.barh(positions, times, height=height, label=name)
    speed_axes.set_yticks([i + 0.4 - height / 2 for i in range(len(ranked))], labels)
    speed_axes.invert_yaxis()
    title = "speed: each strategy's best-ranked candidate"
    speed_axes.set(xlabel="seconds to train the data once (predicted)", title=title)
    speed_axes.legend(fontsize="small")
    for r in ranked:  # where the quality was measured (not a strategy's other candidates)
        if r.auc is not None and r.eps is not None and r.measured.quality_from is None:
            quality_axes.errorbar(r.eps, r.auc[0], yerr=r.auc[1], fmt="o", capsize=3)
            quality_axes.annotate(r.candidate.label, (r.eps, r.auc[0]), fontsize="small")
    quality_axes.set(xlabel="examples/s (clean)", ylabel="test AUC (sample)", title="quality")
    quality_axes.xaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:,.0f}"))
    quality_axes.tick_params(axis="x", labelrotation=30)
    return save_figure(figure, out)
