"""What benchmarks/bench_advise_vs_engine.py measured, in the words of docs/advise.md's
section "Checked on the engine" and the README's sentence on it: the text between each
pair of markers is made anew from reports/advise_vs_engine/results.json;
tests/unit/test_advise_check_doc.py checks both hold what the results file makes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "advise.md"
README = ROOT / "README.md"
RESULTS = ROOT / "reports" / "advise_vs_engine" / "results.json"
SOURCE = "benchmarks/advise_check_doc.py from reports/advise_vs_engine/results.json"
BEGIN = f"<!-- engine check: made by {SOURCE} -->"
END = "<!-- end of engine check -->"


def _times(value: float) -> str:
    return f"{value:.2f}x"


def doc_section(results: dict[str, Any]) -> str:
    """docs/advise.md's section body (markers included)."""
    check = results["check"]
    lines = [
        BEGIN,
        "",
        "| candidate | advice's rank | predicted examples/s | engine examples/s (runs) "
        "| predicted / engine |",
        "| --- | --- | --- | --- | --- |",
    ]
    for name in ("top", "bottom"):
        run = check[name]
        each = ", ".join(f"{e:,.0f}" for e in run["engine_eps_each"])
        cells = [
            f"`{run['label']}` ({'fastest' if name == 'top' else 'slowest'})",
            f"{run['rank']} of {results['ranked']}",
            f"{run['predicted_eps']:,.0f}",
            f"{run['engine_eps']:,.0f} ({each})",
            f"**{_times(run['predicted_over_engine'])}**",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    held = "held" if check["ranking_held"] else "did not hold"
    load = results["load_before"][0], results["load_after"][0]
    lines += [
        "",
        f"The ranking {held}: the engine ran the fastest candidate "
        f"{_times(check['engine_gap'])} as fast as the slowest, the advice had predicted "
        f"{_times(check['predicted_gap'])}. The default job, {check['examples']:,} examples "
        f"a run, the engine's figure the median of {results['repeats']} runs, on "
        f"{results['cores']} cores shared with other work (load average {load[0]:.1f} "
        f"before, {load[1]:.1f} after); the advice over {results['ranked']} candidates "
        f"(`{results['command']}`).",
        "",
        END,
    ]
    return "\n".join(lines)


def readme_sentence(results: dict[str, Any]) -> str:
    """The README's sentence on the check (markers included)."""
    check = results["check"]
    top, bottom = check["top"], check["bottom"]
    order = "in the order it predicted" if check["ranking_held"] else "in the other order"
    return "\n".join(
        [
            BEGIN,
            f"On a {results['cores']}-core machine shared with other work, the advice's "
            "fastest and "
            f"slowest candidates for the default job (`{top['label']}`, `{bottom['label']}`) "
            f"ran on Ray {order}; it predicted their examples/s "
            f"{_times(top['predicted_over_engine'])} and "
            f"{_times(bottom['predicted_over_engine'])} the engine's "
            "([checked on the engine](docs/advise.md#checked-on-the-engine)).",
            END,
        ]
    )


def with_section(page: str, section: str) -> str:
    """`page` with the text between its markers replaced by `section` (markers in it)."""
    start, end = page.index(BEGIN), page.index(END) + len(END)
    return page[:start] + section + page[end:]


def write_sections(results: dict[str, Any], doc: Path = DOC, readme: Path = README) -> None:
    for path, section in ((doc, doc_section(results)), (readme, readme_sentence(results))):
        path.write_text(with_section(path.read_text(encoding="utf-8"), section), "utf-8")
