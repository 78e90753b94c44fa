"""docs/advise.md and the README quote the figures of reports/advise_vs_engine/results.json
as benchmarks/advise_check_doc.py renders them (rerun `python
benchmarks/bench_advise_vs_engine.py --render reports/advise_vs_engine/results.json` after
a new results file)."""

from __future__ import annotations

import copy
import json

from benchmarks.advise_check_doc import (
    DOC,
    README,
    RESULTS,
    doc_section,
    readme_sentence,
    with_section,
)

STALE = "stale: python benchmarks/bench_advise_vs_engine.py --render " + str(RESULTS)


def test_the_page_and_the_readme_hold_what_the_results_file_makes():
    results = json.loads(RESULTS.read_text())
    assert doc_section(results) in DOC.read_text(encoding="utf-8"), "docs/advise.md " + STALE
    assert readme_sentence(results) in README.read_text(encoding="utf-8"), "README " + STALE


def test_the_words_follow_the_figures():
    results = json.loads(RESULTS.read_text())
    check = results["check"]
    section, sentence = doc_section(results), readme_sentence(results)
    for run in (check["top"], check["bottom"]):
        assert f"**{run['predicted_over_engine']:.2f}x**" in section
        assert f"{run['predicted_over_engine']:.2f}x" in sentence and run["label"] in sentence
    flipped = copy.deepcopy(results)
    flipped["check"]["ranking_held"] = False
    assert "The ranking did not hold" in doc_section(flipped)
    assert "in the other order" in readme_sentence(flipped)
    page = "before\n" + doc_section(flipped) + "\nafter\n"
    assert with_section(page, section) == "before\n" + section + "\nafter\n"
