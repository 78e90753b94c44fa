"""docs/readers.md's section "Sizing the reader service", made from the results file of
benchmarks/bench_sim_vs_engine.py (reports/reader_cost/results.json): the section between
its two markers is rewritten whole; tests/unit/test_reader_sizing_doc.py checks the page
holds what the results file makes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

DOC = Path(__file__).resolve().parent.parent / "docs" / "readers.md"
RESULTS = Path(__file__).resolve().parent.parent / "reports" / "reader_cost" / "results.json"
BEGIN = (
    "<!-- sizing: made by benchmarks/reader_sizing_doc.py from reports/reader_cost/results.json -->"
)
END = "<!-- end of sizing -->"


def reader_eps(us_per_example: float) -> int:
    """Examples/s one core making batches at that price keeps up with."""
    return int(round(1e6 / us_per_example, -2)) if us_per_example else 0


def sizing_section(results: dict[str, Any]) -> str:
    """The section's Markdown (markers included) for `results`."""
    rows = results["rows"]
    lines = [
        BEGIN,
        "",
        "| file | reader CPU us/example (alone; passes) | in the engine's producer | "
        "one reader core keeps up with | engine EPS (runs) | simulated EPS | sim / engine "
        "| sim / engine, a synthetic batch's price |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        passes = ", ".join(str(p) for p in r["reader_us_per_example_passes"])
        producer = r["engine_producer_us_per_example"]
        each = ", ".join(f"{e:,}" for e in r["engine_eps_each"])
        cells = [
            r["file"],
            f"**{r['reader_us_per_example']}** ({passes})",
            "-" if producer is None else f"{producer}",
            f"{reader_eps(r['reader_us_per_example']):,} ex/s",
            f"{r['engine_eps']:,} ({each})",
            f"{r['sim_eps']:,}",
            f"**{r['ratio']}**",
            f"{r['ratio_synthetic_batch_price']}",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    worst = max(rows, key=lambda r: abs(r["ratio"] - 1))
    reader_share = max(
        r["reader_us_per_example"] / sum(r["engine_cpu_us_per_example"].values()) for r in rows
    )
    lines += [
        "",
        f"Measured on {results['cores']} shared cores (load average "
        f"{results['load_before'][0]:.1f} before, {results['load_after'][0]:.1f} after), "
        f"{results['examples']:,} lines a file, the engine's EPS the median of "
        f"{results['repeats']} runs, the machine calibrated in the same run "
        f"({results['fit_examples']:,} examples a fit job). The simulator's worst miss: "
        f"{worst['file']}, {worst['ratio'] - 1:+.1%} (`max_abs_error` "
        f"{results['max_abs_error']:.3f}; the target is 0.2). Making the examples took at "
        f"most {reader_share:.1%} of the CPU the engine spent an example on these jobs.",
        "",
        END,
    ]
    return "\n".join(lines)


def with_section(page: str, results: dict[str, Any]) -> str:
    """`page` with its sizing section made anew from `results`."""
    start, end = page.index(BEGIN), page.index(END) + len(END)
    return page[:start] + sizing_section(results) + page[end:]


def write_section(results: dict[str, Any], doc: Path = DOC) -> None:
    doc.write_text(with_section(doc.read_text(encoding="utf-8"), results), encoding="utf-8")
