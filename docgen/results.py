"""The results pages, generated from what the reproductions wrote under reports/: each
page is the reproduction's own report, rendered again by its code from its results file
(results.json, or points.json), so no figure on the site is typed by hand."""

from __future__ import annotations

import functools
import importlib.util
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from experiments.repro import (
    REPRODUCTIONS,
    async_at_scale,
    auto_switching,
    auto_switching_report,
    embeddings_report,
    embeddings_setting,
    failures,
    failures_claims,
    gba_global_batch_claims,
    gba_global_batch_report,
    gba_norms,
    gba_norms_claims,
    gba_norms_report,
    gba_scaling,
    gba_scaling_claims,
    gba_scaling_report,
    gba_stragglers_claims,
    gba_stragglers_report,
    gba_switching_claims,
    gba_switching_report,
    hierarchical_claims,
    hierarchical_report,
    hierarchical_trainers_claims,
    hierarchical_trainers_report,
    psp_claims,
    psp_report,
    shadowsync,
    shadowsync_algorithms_claims,
    shadowsync_algorithms_report,
    shadowsync_fig5_claims,
    shadowsync_quality_claims,
    shadowsync_quality_report,
    shadowsync_table2b_claims,
    shadowsync_table2b_report,
    shadowsync_threads,
    shadowsync_threads_claims,
    staleness_norm_claims,
    staleness_norm_report,
    swap_days_report,
)
from experiments.repro.claims import Claim
from experiments.repro.steady import MissingSteadyRate

ROOT = Path(__file__).resolve().parents[1]
REPORTS = ROOT / "reports"
BENCH_READERS = ROOT / "benchmarks" / "bench_readers.py"
ADVISE_CHECK = ROOT / "benchmarks" / "advise_check_doc.py"
READER_SIZING = ROOT / "benchmarks" / "reader_sizing_doc.py"
BENCH_BOX = ROOT / "benchmarks" / "bench_box.py"
INDEX = "results/index.md"


def _stragglers(results: Any, _: Path) -> str:
    if isinstance(results, list):  # one seed a strategy, before issue 55's setting
        return gba_stragglers_report.legacy(results)
    return gba_stragglers_report.render(results)


def _norms(rows: list[dict[str, Any]], _: Path) -> str:
    """GBA Fig. 4's report, its setting's batch sizes and workers read off the rows (the
    rest is the module's: the rows do not hold it)."""
    sync = {r["local_batch"] for r in rows if r["strategy"] == "sync"}
    found = {
        "workers": rows[0]["aggregate_examples"] // rows[0]["local_batch"],
        "sync_batch": min(sync) if sync else None,
        "bsp_batches": sorted({r["local_batch"] for r in rows if r["strategy"] == "bsp"}),
    }
    return gba_norms_report.report(rows, {**gba_norms.settings(), **found})


def _scaling(rows: list[dict[str, Any]], _: Path) -> str:
    """GBA Fig. 8's report, its global batch read off the rows (the rest is the module's)."""
    batch = rows[0]["workers"] * rows[0]["local_batch"]
    return gba_scaling_report.report(rows, {**gba_scaling.settings(), "global_batch": batch})


def _benchmark(path: Path) -> Any:
    """A script of benchmarks/, imported by its path (benchmarks/ is not a package)."""
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _reader_cost(results: dict[str, Any], _: Path) -> str:
    sizing = _benchmark(READER_SIZING)
    section: str = sizing.sizing_section(results)
    return "# The reader's cost on the user's files (benchmarks/bench_sim_vs_engine.py)\n\n" + (
        section
    )


def _advise_check(results: dict[str, Any], _: Path) -> str:
    check = _benchmark(ADVISE_CHECK)
    section: str = check.doc_section(results)
    title = "# `recsync advise` checked on the engine (benchmarks/bench_advise_vs_engine.py)"
    return f"{title}\n\n{section}"


def _network(results: dict[str, Any], _: Path) -> str:
    report: Callable[[dict[str, Any]], str] = _benchmark(BENCH_BOX).report
    return report(results)


def _readers(results: dict[str, Any], _: Path) -> str:
    bench = _benchmark(BENCH_READERS)
    markdown_table: Callable[[list[dict[str, object]]], str] = bench.markdown_table
    load = ", ".join(f"{x:.1f}" for x in results["load_before"])
    return "\n".join(
        [
            "# Reading files into batches (benchmarks/bench_readers.py)",
            "",
            f"{results['examples']:,} examples a format, medians of {results['repeats']} "
            "reads, the process CPU of every thread per example, torch on one thread as in "
            f"the reader's process; {results['cores']} cores, load average before: {load}. "
            "The row parser's figures are what each format costs read a line (or a row) at a "
            "time, the ratio the block reader's examples/s over the row parser's.",
            "",
            markdown_table(results["results"]),
        ]
    )


@dataclass(frozen=True)
class Report:
    """A directory of reports/ and how its report is rendered from its results file; the
    title names its page in the site's navigation; `claims`, where the reproduction computes
    them, feeds the claims table (docgen/claims_table.py)."""

    title: str
    directory: str
    results_file: str
    render: Callable[[Any, Path], str]
    claims: Callable[[Any], list[Claim]] | None = None  # its headline claims, from its results
    command: str | None = None  # a benchmark's: what writes its results file

    @property
    def page(self) -> str:
        """The page's path on the site."""
        return f"results/{self.directory}/index.md"


REPORTS_RENDERED = (
    Report(
        "ShadowSync Fig. 5",
        "shadowsync_fig5",
        "points.json",
        lambda r, _: shadowsync._report(r),
        shadowsync_fig5_claims.claims,
    ),
    Report(
        "ShadowSync quality",
        "shadowsync_quality",
        "results.json",
        lambda r, _: shadowsync_quality_report.report(r),
        shadowsync_quality_claims.claims,
    ),
    Report(
        "ShadowSync Table 2(b)",
        "shadowsync_table2b",
        "results.json",
        lambda r, _: shadowsync_table2b_report.report(r),
        shadowsync_table2b_claims.claims,
    ),
    Report(
        "ShadowSync MA and BMUF",
        "shadowsync_algorithms",
        "results.json",
        lambda r, _: shadowsync_algorithms_report.report(r),
        shadowsync_algorithms_claims.claims,
    ),
    Report(
        "ShadowSync worker threads",
        "shadowsync_threads",
        "results.json",
        lambda r, _: shadowsync_threads.report(r),
        shadowsync_threads_claims.claims,
    ),
    Report(
        "Async staleness",
        "async_staleness",
        "points.json",
        lambda r, _: async_at_scale._staleness_report(r["points"], r["fit"]),
        async_at_scale.claims,
    ),
    Report(
        "GBA under stragglers",
        "gba_stragglers",
        "results.json",
        _stragglers,
        gba_stragglers_claims.claims,
    ),
    Report(
        "GBA switching",
        "gba_switching",
        "results.json",
        lambda r, _: gba_switching_report.render(r),
        gba_switching_claims.claims,
    ),
    Report(
        "PSP",
        "psp",
        "results.json",
        lambda r, _: psp_report.report(r),
        psp_claims.claims,
    ),
    Report(
        "Failures",
        "failures",
        "results.json",
        lambda r, _: failures.render_report(r["scale"], r["best"], r["validation"]),
        failures_claims.claims,
    ),
    Report(
        "Staleness normalization",
        "staleness_norm",
        "results.json",
        lambda r, _: staleness_norm_report.report(r),
        staleness_norm_claims.claims,
    ),
    Report(
        "Automatic switching",
        "auto_switching",
        "results.json",
        lambda r, d: auto_switching_report.report(r, (d / "scenario.toml").read_text()),
        auto_switching.claims,
    ),
    Report(
        "SWAP over days",
        "swap_days",
        "results.json",
        lambda r, _: swap_days_report.report(r),
        swap_days_report.claims,
    ),
    Report(
        "Embedding tables",
        "embeddings",
        "results.json",
        lambda r, _: embeddings_report.report(r),
        embeddings_setting.claims,
    ),
    Report(
        "Hierarchical training",
        "hierarchical",
        "results.json",
        lambda r, _: hierarchical_report._report(r),
        hierarchical_claims.claims,
    ),
    Report(
        "Hierarchical training: EASGD over its trainers",
        "hierarchical_trainers",
        "results.json",
        lambda r, _: hierarchical_trainers_report.render(r),
        hierarchical_trainers_claims.claims,
    ),
    Report(
        "GBA workers at a fixed global batch",
        "gba_scaling",
        "results.json",
        _scaling,
        gba_scaling_claims.claims,
    ),
    Report(
        "GBA: the global batch after switching",
        "gba_global_batch",
        "results.json",
        lambda r, _: gba_global_batch_report.render(r),
        gba_global_batch_claims.claims,
    ),
    Report(
        "GBA gradient norms",
        "gba_norms",
        "results.json",
        _norms,
        gba_norms_claims.claims,
    ),
    Report(
        "The network on real links",
        "network",
        "results.json",
        _network,
        command="python benchmarks/bench_box.py --advise",
    ),
    Report("Readers", "readers", "results.json", _readers),
    Report("The reader's cost on the user's files", "reader_cost", "results.json", _reader_cost),
    Report("Advise checked on the engine", "advise_vs_engine", "results.json", _advise_check),
)


def generated(report: Report) -> bool:
    """Whether its reproduction has written the report's results file yet."""
    return (REPORTS / report.directory / report.results_file).is_file()


def load(report: Report) -> Any:
    """The report's results file, as its reproduction wrote it."""
    path = REPORTS / report.directory / report.results_file
    return json.loads(path.read_text(encoding="utf-8"))


def claims_of(report: Report) -> list[Claim]:
    """Its headline claims, from its results file: none where it computes none, where its
    results are older than its `claims` (they give none) or not generated yet."""
    if report.claims is None or not generated(report):
        return []
    try:
        return report.claims(load(report))
    except MissingSteadyRate:  # its page says which point lacks it
        return []


def _not_generated(report: Report, source: str) -> str:
    """The page of a report whose reproduction (or benchmark) has not written its results
    file yet."""
    names = [
        name
        for name, r in REPRODUCTIONS.items()
        if r.report_dir.rstrip("/").removeprefix("reports/") == report.directory
    ]
    command = (
        f"`recsync reproduce {names[0]}`"
        if names
        else f"`{report.command}`"
        if report.command
        else "its reproduction"
    )
    return (
        f"# {report.title}\n\nNot generated yet: `{source}` has not been written. "
        f"{command} writes it, with the report this page renders from it.\n"
    )


def _without_steady_rate(report: Report, missing: MissingSteadyRate) -> str:
    """The page of a report whose results file has a point without its steady examples/s
    (the figure every report reads for a speed): which, and how to measure it again."""
    reproduction = _reproduction_of(report)
    command = f"`recsync reproduce {reproduction.name}`" if reproduction else "its command"
    return (
        f"# {report.title}\n\nThe results file has a point without the steady examples/s "
        f"that the report reads for every speed; {command} measures it again.\n\n"
        f"| missing from the stored results |\n| --- |\n| {missing} |\n"
    )


def _reproduction_of(report: Report) -> Any:
    """The registered reproduction that writes the report (None: a benchmark's)."""
    for r in REPRODUCTIONS.values():
        if r.report_dir.rstrip("/").removeprefix("reports/") == report.directory:
            return r
    return None


@functools.cache
def status(report: Report) -> str | None:
    """ "current", or why not (`recsync reproduce --check`'s words); None where no
    reproduction writes the report."""
    reproduction = _reproduction_of(report)
    if reproduction is None:
        return None
    reason = reproduction.stale_reason(REPORTS / report.directory)
    return "current" if reason is None else str(reason)


def _status_line(report: Report) -> str:
    found = status(report)
    if found is None:
        return ""
    if found == "current":
        text = "current: the code it ran is the code as it is (`recsync reproduce --check`)"
    else:
        text = f"not current: {found}; regenerate it with its `recsync reproduce` command"
    return f"**Status:** {text}.\n\n"


@functools.cache
def render(report: Report) -> str:
    """The report's page: its status, then its report as its code renders it from its
    results file (a short page saying so where that file is not written yet)."""
    source = f"reports/{report.directory}/{report.results_file}"
    if not generated(report):
        return _not_generated(report, source)
    try:
        text = report.render(load(report), REPORTS / report.directory).rstrip()
    except MissingSteadyRate as missing:
        text = _without_steady_rate(report, missing)
    title, newline, body = text.partition("\n")
    if title.startswith("# "):
        text = f"{title}\n\n{_status_line(report)}{body.lstrip()}"
    else:
        text = _status_line(report) + text
    return f"{text}\n\n*Generated from `{source}` when the site was built.*\n"


def images(report: Report) -> list[Path]:
    """The figures its page shows (they sit beside it on the site)."""
    return sorted((REPORTS / report.directory).glob("*.png"))


def index() -> str:
    """The results page: what each reproduction measured, one link each."""
    lines = [
        "# Results",
        "",
        "Each page below is a reproduction's report, rendered when the site is built from",
        "the results file its `recsync reproduce NAME` run wrote under `reports/`. Rerun",
        "the command to measure again; the page follows. Timing benchmarks and the",
        "history of the engine's speed are in the [performance log](../perf-log.md).",
        "Every verdict follows one rule (an effect beyond twice the seed spread, at least",
        "3 seeds); each report's stamp (commit, command, seeds, machine, cost model) is in",
        "its `stamp.json`; both are described on the [simulator](../simulator.md) page.",
        "",
        "| report | results file | status |",
        "| --- | --- | --- |",
    ]
    for report in REPORTS_RENDERED:
        title = render(report).splitlines()[0].lstrip("# ").strip()
        source = f"reports/{report.directory}/{report.results_file}"
        found = status(report)
        state = "a benchmark's" if found is None else found if found == "current" else "stale"
        lines.append(f"| [{title}]({report.directory}/index.md) | `{source}` | {state} |")
    return "\n".join(lines) + "\n"
