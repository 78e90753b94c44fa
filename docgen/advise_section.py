"""The section "What `recsync advise` measures on the default job" (issue 53): rendered when
the site is built from what `python docgen/advise_runs.py` wrote under reports/advise/
(advice.json, stamp.json, advice.png of each cluster), so no number in it is typed by hand.
A page includes it where it holds MARKER (docs/choosing-a-strategy.md); the hook
(docgen/hooks.py) puts it there and adds the figures to the site."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from docgen.markdown import cell
from recsync.app.advise.report import duration

ROOT = Path(__file__).resolve().parents[1]
MARKER = "<!-- advise section (docgen/advise_section.py) -->"
FOLDER = "reports/advise"  # relative to the checkout; one folder a cluster preset
PRESETS = ("xeon-16core", "dev-2core")  # the folders shown, in order (docgen/advise_runs.py)
RESULTS, STAMP, FIGURE = "advice.json", "stamp.json", "advice.png"
SITE_FOLDER = "results/advise"  # where the figures sit on the site
GROUPS = {  # rank.TIER_NAMES, shortened for a table cell
    "quality within noise of the best": "within noise",
    "quality not measured": "not measured",
    "quality measurably worse than the best": "worse",
    "speed not measured": "speed not measured",
}
SHORT_ROLES = {
    "trainers": "trainer",
    "embedding_servers": "embedding server",
    "sync_servers": "sync server",
    "dense_servers": "dense server",
    "group_servers": "group server",
    "reader": "reader",
}
SLOW_SERVERS = {  # a slow_server condition's role (advise/cluster.py SlowServerCondition)
    "embedding": "embedding server 0",
    "dense": "the server holding the dense part",
}


def _eps(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def _auc(row: dict[str, Any]) -> str:
    """Mean test AUC ± its spread over the seeds; "-" where not measured; `*` where it was
    measured at the strategy's fastest candidate."""
    auc = row.get("test_auc")
    if auc is None:
        return "-"
    seeds = row.get("seeds", 0)
    text = f"{auc[0]:.4f}" if seeds < 2 else f"{auc[0]:.4f} ± {auc[1]:.4f}"
    return text + ("*" if row.get("quality_from") else "")


def _staleness(row: dict[str, Any]) -> str:
    if row.get("staleness") is None:
        return "-"
    return f"{row['staleness']:.2f} ({row['staleness_kind']})"


def _busiest(row: dict[str, Any]) -> str:
    if row.get("bottleneck") is None:
        return "-"
    role = SHORT_ROLES.get(row["bottleneck"], row["bottleneck"])
    return f"{role} {row['bottleneck_load']:.0%}"


def _counts(row: dict[str, Any]) -> list[str]:
    """Trainers x worker threads, embedding servers, dense (or sync) servers, readers (the
    job's own where the grid did not set them)."""
    dense = "-" if row.get("dense_servers") is None else str(row["dense_servers"])
    readers = "job's" if row.get("readers") is None else str(row["readers"])
    return [
        f"{row['trainers']} x {row['workers_per_trainer']}",
        str(row["embedding_servers"]),
        dense,
        readers,
    ]


def best_of_each_strategy(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each strategy's first row in the ranking, in rank order."""
    seen: set[str] = set()
    firsts = []
    for row in sorted(rows, key=lambda r: r["rank"]):
        if row["strategy"] not in seen:
            seen.add(row["strategy"])
            firsts.append(row)
    return firsts


def table(advice: dict[str, Any]) -> str:
    """The ranking, one row a strategy (its best-ranked candidate), in rank order."""
    conditions = advice["conditions"]
    header = ["rank", "strategy", "trainers x threads", "embedding servers", "dense servers"]
    header.append("readers")
    header += ["one pass", "examples/s"]
    header += [f"examples/s, {name}" for name in conditions[1:]]
    header += ["test AUC", "staleness or sync gap", "busiest (load)", "quality"]
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    for row in best_of_each_strategy(advice["rows"]):
        by_condition = row.get("eps_by_condition") or {}
        cells = [str(row["rank"]), f"`{row['strategy']}`", *_counts(row)]
        cells += [duration(row.get("time_per_pass_s")), _eps(row.get("eps"))]
        cells += [_eps(by_condition.get(name)) for name in conditions[1:]]
        cells += [_auc(row), _staleness(row), _busiest(row)]
        cells.append(GROUPS.get(row["group"], row["group"]))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _condition(condition: dict[str, Any]) -> str:
    if condition["kind"] == "stragglers":
        every = (
            f", drawn anew every {condition['period_s']:g} s" if condition.get("period_s") else ""
        )
        return (
            f"{condition['name']} ({condition['fraction']:.0%} of the worker threads "
            f"{condition['slowdown']:g}x slower{every})"
        )
    server = SLOW_SERVERS.get(condition["role"], f"the {condition['role']} server")
    return f"{condition['name']} ({server} {condition['slowdown']:g}x slower)"


def cluster_text(stamp: dict[str, Any] | None) -> list[str]:
    """The cluster, its grid and conditions, and what made the results, from stamp.json."""
    if stamp is None:
        return ["The cluster is not recorded (no `stamp.json` beside `advice.json`)."]
    cluster, m = stamp["cluster"], stamp["cluster"]["machines"]
    prices = f"preset `{m['preset']}`" if m.get("preset") else f"profile `{m['profile']}`"
    source = f": {stamp['preset_source']}" if stamp.get("preset_source") else ""
    grid = cluster.get("grid") or {}
    counts = ", ".join(
        f"{name.replace('_', ' ')} {values}" for name, values in grid.items() if values
    )
    conditions = "; ".join(_condition(c) for c in cluster.get("condition", [])) or "none"
    commit = (stamp.get("commit") or "unknown")[:12]
    state = " (with uncommitted changes)" if stamp.get("dirty") else ""
    options = stamp.get("options") or {}
    seeds = ", ".join(str(s) for s in options.get("seeds", []))
    machine = stamp.get("machine") or {}
    grid_text = counts or "the job's counts and twice them"
    return [
        f"- **Cluster** (`{stamp['cluster_file']}`): {m['count']} machines of {m['cores']} "
        f"cores, {m['nic_gbps']:g} Gb/s network cards, {m['latency_us']:g} us latency; CPU "
        f"prices of {prices}{source}.",
        f"- **Grid**: {grid_text}; **conditions**: {conditions}.",
        f"- **Measured**: each candidate on a slice of {options.get('slice_examples', 0):,} "
        "examples (at least "
        f"{options.get('batches_per_thread', 0)} batches a worker thread) in priced math; "
        f"quality on the first {options.get('quality_examples', 0):,} examples, "
        f"{options.get('quality_test_examples', 0):,} held out, seeds {seeds}.",
        f"- **Made by** `{stamp['command']}` (`{stamp['made_by']}`) at commit `{commit}`"
        f"{state}, code `{stamp.get('code')}`, started {stamp.get('started_utc')}: "
        f"{stamp.get('points_measured')} points measured, {stamp.get('points_cached')} read "
        f"back from `points.jsonl`, {duration(stamp.get('wall_s'))} wall on "
        f"{machine.get('cpus')} CPUs ({machine.get('cpu')}).",
    ]


def advice_text(advice: dict[str, Any], preset: str) -> list[str]:
    """The advice (the first row), what did not apply, what was not measured."""
    rows = sorted(advice["rows"], key=lambda r: r["rank"])
    first = rows[0] if rows and rows[0].get("eps") is not None else None
    lines = []
    if first is None:
        lines.append("**Advice**: none (no candidate's speed was measured).")
    else:
        lines.append(
            f"**Advice**: `{first['candidate']}` ({first['trainers']} trainers of "
            f"{first['workers_per_trainer']} worker threads), one pass over the data "
            f"({advice['examples_per_pass']:,} examples) in {duration(first['time_per_pass_s'])}"
            f" predicted; its whole job config is `{FOLDER}/{preset}/winner.toml`."
        )
    lines.append("")
    refused = advice.get("not_applicable") or []
    if refused:
        lines.append(f"**Not applicable** ({len(refused)}):")
        lines.append("")
        lines += [
            f"- `{cell(r['strategy'])}` {cell(r['point'])}: {cell(r['reason'])}" for r in refused
        ]
    else:
        lines.append("**Not applicable**: none; every candidate of the grid ran.")
    missing = advice.get("not_measured") or []
    lines.append("")
    lines.append(
        f"**Not measured** (budget spent): {', '.join(f'`{m}`' for m in missing)}."
        if missing
        else "**Not measured**: none."
    )
    return lines


def not_generated(preset: str) -> str:
    """What the section shows of a cluster whose results are not written yet."""
    return (
        f"Not generated yet: `{FOLDER}/{preset}/{RESULTS}` has not been written. "
        f"`make advise-docs` (or `python docgen/advise_runs.py {preset}`) writes it.\n"
    )


def _load(path: Path) -> dict[str, Any] | None:
    if not path.is_file():
        return None
    loaded = json.loads(path.read_text(encoding="utf-8"))
    return loaded if isinstance(loaded, dict) else None


def preset_section(preset: str, root: Path = ROOT, base: str = "") -> str:
    """One cluster's part: heading, cluster, advice, table, figure (`base`: the including
    page's way to the site's root)."""
    folder = root / FOLDER / preset
    lines = [f"### `{preset}`", ""]
    advice = _load(folder / RESULTS)
    if advice is None:
        return "\n".join(lines) + "\n" + not_generated(preset)
    rows = advice["rows"]
    strategies = len({r["strategy"] for r in rows})
    lines += cluster_text(_load(folder / STAMP)) + [""]
    lines += advice_text(advice, preset) + [""]
    lines += [
        f"Each strategy's best-ranked candidate ({strategies} strategies; {len(rows)} "
        f"candidates ranked in all, every one in `{FOLDER}/{preset}/{RESULTS}`). Rank is "
        "the candidate's place in the whole ranking; the examples/s under a condition were "
        "measured at each strategy's fastest candidate only.",
        "",
        table(advice),
        "",
    ]
    if any(r.get("quality_from") for r in best_of_each_strategy(rows)):
        lines += ["\\* quality measured at that strategy's fastest candidate.", ""]
    if (folder / FIGURE).is_file():
        uri = f"{base}{SITE_FOLDER}/{preset}/{FIGURE}"
        lines += [f"![advise on {preset}: speed by condition, AUC against speed]({uri})", ""]
    return "\n".join(lines)


def section(root: Path = ROOT, base: str = "") -> str:
    """The whole section: every preset's part."""
    return "\n".join(preset_section(preset, root, base) for preset in PRESETS)


def figures(root: Path = ROOT) -> list[tuple[str, Path]]:
    """The figures the section shows: (their path on the site, their file)."""
    found = []
    for preset in PRESETS:
        path = root / FOLDER / preset / FIGURE
        if path.is_file():
            found.append((f"{SITE_FOLDER}/{preset}/{FIGURE}", path))
    return found
