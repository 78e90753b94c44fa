"""The mkdocs hook (mkdocs.yml `hooks:`): adds the generated pages to the site before it is
built, so that nav entries and links to them are checked like any page's, and puts the
generated claims table and advise section where a page holds their markers."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]  # docgen, experiments, benchmarks

from mkdocs.structure.files import File, Files  # noqa: E402

from docgen import (  # noqa: E402
    advise_section,
    claims_table,
    cli_reference,
    config_reference,
    file_references,
    results,
)

HOME_LINKS = {  # the README's links into docs/, as the site's pages see them
    "](docs/": "](",
    "(`docs/configuration.md` on the site)": "([configuration](configuration.md))",
    "(`docs/results/` on the site;": "([results](results/index.md);",
}


RESULTS = "Results"  # the nav entry of the results pages (mkdocs.yml)


def home_page(readme: str) -> str:
    """The README as the site's home page."""
    for old, new in HOME_LINKS.items():
        readme = readme.replace(old, new)
    return readme


def on_config(config: Any) -> Any:
    """The results section of the navigation: its index, then one entry per report."""
    pages: list[Any] = [results.INDEX]
    pages += [{report.title: report.page} for report in results.REPORTS_RENDERED]
    for entry in config["nav"]:
        if isinstance(entry, dict) and entry.get(RESULTS) == results.INDEX:
            entry[RESULTS] = pages
    return config


def on_files(files: Files, config: Any) -> Files:
    """The home page (the README), the configuration and command-line references, the
    references of the cost profile, the advise cluster file and the scenario file, and one
    page per report, with its figures."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    files.append(File.generated(config, "index.md", content=home_page(readme)))
    files.append(File.generated(config, "configuration.md", content=config_reference.render()))
    files.append(File.generated(config, "cli.md", content=cli_reference.render()))
    for page in file_references.PAGES:
        files.append(File.generated(config, page.page, content=page.render()))
    files.append(File.generated(config, results.INDEX, content=results.index()))
    for report in results.REPORTS_RENDERED:
        files.append(File.generated(config, report.page, content=results.render(report)))
        for image in results.images(report):
            uri = f"{report.page.rsplit('/', 1)[0]}/{image.name}"
            files.append(File.generated(config, uri, abs_src_path=str(image)))
    for uri, image in advise_section.figures():
        files.append(File.generated(config, uri, abs_src_path=str(image)))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    """The claims table and the advise section where the page holds their markers (their
    links are relative to the page: the site's root is as many folders up as the page's
    path is deep)."""
    base = "../" * page.file.src_uri.count("/")
    if claims_table.MARKER in markdown:
        markdown = markdown.replace(claims_table.MARKER, claims_table.section(base))
    if advise_section.MARKER in markdown:
        markdown = markdown.replace(advise_section.MARKER, advise_section.section(base=base))
    return markdown
