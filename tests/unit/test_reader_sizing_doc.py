"""docs/readers.md quotes the figures of reports/reader_cost/results.json as
benchmarks/reader_sizing_doc.py renders them (rerun it after a new results file)."""

from __future__ import annotations

import json

from benchmarks.reader_sizing_doc import DOC, RESULTS, sizing_section, with_section


def test_the_sizing_section_is_the_one_the_results_file_makes():
    results = json.loads(RESULTS.read_text())
    page = DOC.read_text(encoding="utf-8")
    assert sizing_section(results) in page, (
        "docs/readers.md is stale: python benchmarks/bench_sim_vs_engine.py --render "
        "reports/reader_cost/results.json"
    )


def test_the_section_shows_each_files_ratio_and_rewrites_only_itself():
    results = json.loads(RESULTS.read_text())
    section = sizing_section(results)
    for row in results["rows"]:
        assert f"**{row['ratio']}**" in section and row["file"] in section
    page = "before\n" + sizing_section({**results, "rows": results["rows"][:1]}) + "\nafter\n"
    assert with_section(page, results) == "before\n" + section + "\nafter\n"


def test_rows_with_the_steady_rate_are_shown_as_steady_and_whole_run_ones_as_such():
    results = json.loads(RESULTS.read_text())
    steady_rows = [
        {
            **{k: v for k, v in r.items() if k not in ("engine_eps", "engine_eps_each", "sim_eps")},
            "engine_eps_steady": 1_000,
            "engine_eps_steady_each": [900, 1_000, 1_100],
            "sim_eps_steady": 1_100,
        }
        for r in results["rows"]
    ]
    steady = sizing_section({**results, "rows": steady_rows})
    assert "| engine EPS, steady (runs) |" in steady and "1,000 (900, 1,000, 1,100)" in steady
    assert "whole run" not in steady
    if "engine_eps" in results["rows"][0]:  # the stored file: each run's whole-run rate
        whole = sizing_section(results)
        assert "| engine EPS, whole run (runs) |" in whole
        assert "not the steady rate (`eps_steady`" in whole
