"""The user's pages (the README and every page of the site's navigation outside its
"Development" section) speak of the product, not of how it was made: no issue numbers,
sessions, commit hashes, "as before", the development machine or the issue's asks."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml
from doc_commands import ROOT

DEVELOPMENT = "Development"  # the nav section of the pages about making recsync
HISTORY = [
    re.compile(r"\bissue\s*#?\d+", re.I),
    re.compile(r"\bsession\b", re.I),
    # a commit hash in backticks: 7 or 40 hex digits, at least one a letter (not a number)
    re.compile(r"`(?=[0-9a-f]*[a-f])(?:[0-9a-f]{40}|[0-9a-f]{7})`", re.I),
    re.compile(r"\bas before\b", re.I),
    re.compile(r"\bdevelopment machine\b", re.I),
    re.compile(r"\bthe issue's\b", re.I),
]


def _nav_pages(entries: list[Any], skip: str) -> list[str]:
    """The pages of a nav list, depth first, but those of the section named `skip`."""
    pages: list[str] = []
    for entry in entries:
        values = entry.values() if isinstance(entry, dict) else [entry]
        if isinstance(entry, dict) and skip in entry:
            continue
        for value in values:
            pages += _nav_pages(value, skip) if isinstance(value, list) else [value]
    return pages


def nav() -> list[Any]:
    return yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))["nav"]


def user_pages() -> list[Path]:
    """The README and the user's pages that are files of docs/ (the generated ones are
    not: docgen/hooks.py adds them when the site is built)."""
    found = [ROOT / "docs" / page for page in _nav_pages(nav(), DEVELOPMENT)]
    return [ROOT / "README.md", *(path for path in found if path.is_file())]


def history_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) of every line that speaks of how the project was made."""
    return [
        (number, line)
        for number, line in enumerate(text.splitlines(), 1)
        if any(pattern.search(line) for pattern in HISTORY)
    ]


def test_the_user_pages_hold_no_development_history():
    pages = user_pages()
    assert len(pages) >= 15 and ROOT / "docs" / "getting-started.md" in pages
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in pages
        for number, line in history_lines(path.read_text(encoding="utf-8"))
    ]
    assert not found, "development history in a user's page:\n" + "\n".join(found)


def test_the_development_pages_are_out_of_the_users_guide():
    development = next(e[DEVELOPMENT] for e in nav() if isinstance(e, dict) and DEVELOPMENT in e)
    pages = _nav_pages(development, skip="")
    assert {"perf-log.md", "architecture.md", "design-file-shares.md"} <= set(pages)
    assert not set(pages) & set(_nav_pages(nav(), DEVELOPMENT))


def test_every_page_of_docs_is_in_the_navigation():
    listed = set(_nav_pages(nav(), skip=""))
    pages = {p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs").rglob("*.md")}
    assert pages <= listed, f"pages in no section of mkdocs.yml's nav: {sorted(pages - listed)}"


def test_the_words_are_caught():
    text = (
        "fixed in issue #12\nthis session\nat `1a2b3c4`\n`1000000` rows\nruns as before\n"
        "our development machine\nthe issue's targets\nan issue of the data\n"
    )
    assert [n for n, _ in history_lines(text)] == [1, 2, 3, 5, 6, 7]


def report_pages() -> list[Path]:
    """The Markdown pages under reports/ that stand for the code as it is: every page of a
    report no reproduction makes (written with the measurement it records), and those of each
    reproduction whose report is current (a stale one is rewritten when it is regenerated)."""
    from experiments.repro import REPRODUCTIONS, stamp

    made = {ROOT / r.report_dir: r for r in REPRODUCTIONS.values()}
    pages = []
    for path in sorted((ROOT / "reports").rglob("*.md")):
        owner = next((r for folder, r in made.items() if folder in path.parents), None)
        if (
            owner is None
            or stamp.stale_reason(owner.run.__module__, ROOT / owner.report_dir) is None
        ):
            pages.append(path)
    return pages


def test_the_reports_hold_no_development_history():
    pages = report_pages()
    assert ROOT / "reports" / "scaling_16cores" / "README.md" in pages
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()[:160]}"
        for path in pages
        for number, line in history_lines(path.read_text(encoding="utf-8"))
    ]
    assert not found, "development history in a report:\n" + "\n".join(found)
