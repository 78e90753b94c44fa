"""The documentation site's generated pages: the configuration reference names every key
of the config schema, and every results file under reports/ has its page."""

from __future__ import annotations

import re
from typing import Any

from doc_commands import pages

from docgen import claims_table, config_reference, file_references, hooks, results
from recsync.app.config.schema import Config
from recsync.app.config.strategy import SECTIONS
from recsync.strategy.staleness_norm import StalenessNorm


def _dotted(table: dict[str, Any], prefix: str) -> set[str]:
    keys = set()
    for key, value in table.items():
        keys.add(f"{prefix}.{key}")
        if isinstance(value, dict) and key not in ("server_slowdown", "cost"):
            keys |= _dotted(value, f"{prefix}.{key}")
    return keys


def test_the_reference_names_every_key_of_every_section_and_strategy():
    keys = set()
    for section, table in Config().dump().items():
        if isinstance(table, dict) and section != "cost":
            keys |= _dotted(table, section)
    for section in SECTIONS.values():
        keys |= _dotted(section().model_dump(by_alias=True), "strategy")
    keys |= {f"strategy.staleness_norm.{key}" for key in StalenessNorm.__dataclass_fields__}
    page = config_reference.render()
    missing = sorted(key for key in keys if f"`{key}`" not in page)
    assert len(keys) > 100 and not missing, missing
    for name in SECTIONS:
        assert f'`[strategy] name = "{name}"`' in page


def test_the_reference_describes_a_key_from_its_schema():
    page = config_reference.render()
    assert (
        "| `run.eval_every` | int | `50000` | >= 0 | Examples handed out between evaluations"
        in page
    )


def test_every_results_file_under_reports_has_a_page():
    files = {
        path.parent.name
        for name in ("results.json", "points.json")
        for path in results.REPORTS.glob(f"*/{name}")
    }
    assert files == {r.directory for r in results.REPORTS_RENDERED if results.generated(r)}
    for report in results.REPORTS_RENDERED:
        page = results.render(report)
        assert page.startswith("# "), report.directory
        if results.generated(report):
            assert "\n| --- |" in page, report.directory
        else:  # a reproduction or benchmark not run yet: a short page saying how to run it
            run = "`recsync reproduce " if report.command is None else report.command
            assert "Not generated yet" in page and run in page, page
        for image in results.images(report):
            assert image.exists()


def test_a_report_not_generated_yet_has_a_short_page_no_claims_and_a_gap_line():
    def claims(_):
        raise AssertionError("no results file to compute claims from")

    report = results.Report("Not run", "no_such_report", "results.json", lambda r, _: "", claims)
    assert not results.generated(report) and results.claims_of(report) == []
    assert results.render(report).startswith("# Not run\n\nNot generated yet: ")
    names = {r.directory for r in claims_table.reproductions()}
    assert {"shadowsync_algorithms", "shadowsync_threads"} <= names
    assert "[ShadowSync worker threads](results/shadowsync_threads/index.md)" in (
        claims_table.section()
    )


def test_the_home_page_links_the_readme_to_the_site_pages():
    home = hooks.home_page("see [training](docs/training.md)")
    assert home == "see [training](training.md)"


COMMIT = re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def test_no_page_but_the_performance_log_names_a_commit():
    texts = {path.name: path.read_text(encoding="utf-8") for path in pages()}
    texts.pop("perf-log.md")
    texts["configuration.md"] = config_reference.render()
    texts |= {page.page: page.render() for page in file_references.PAGES}
    texts |= {r.directory: results.render(r) for r in results.REPORTS_RENDERED}
    named = {name: COMMIT.findall(FENCE.sub("", text)) for name, text in texts.items()}
    assert not {name: found for name, found in named.items() if found}


def test_a_results_file_without_the_steady_rate_has_a_page_naming_the_point(monkeypatch):
    from experiments.repro.steady import MissingSteadyRate, steady

    def render(r, _=None):
        return str(steady(r["points"][0], "reports/gba_switching/results.json", "bsp, seed 1"))

    report = results.Report("Switching", "gba_switching", "results.json", render, render)
    monkeypatch.setattr(results, "load", lambda _: {"points": [{"eps": 1.0}]})
    page = results.render(report)
    assert page.startswith("# Switching\n\n") and "| --- |" in page
    assert "reports/gba_switching/results.json, point bsp, seed 1: no steady" in page
    assert results.claims_of(report) == []
    assert isinstance(MissingSteadyRate("x"), LookupError)
