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


def rates(r: dict[str, Any]) -> tuple[str, int, list[int], int]:
    """A row's kind of examples/s and its figures: the engine's (the median run's and each
    run's) and the simulator's. The steady rate (`eps_steady`) where the row has it; a
    results file that holds only each run's whole-run rate says so ("whole run")."""
    if "engine_eps_steady" in r:
        return "steady", r["engine_eps_steady"], r["engine_eps_steady_each"], r["sim_eps_steady"]
    return "whole run", r["engine_eps"], r["engine_eps_each"], r["sim_eps"]


def cpu_ratio(r: dict[str, Any], role: str | None = None) -> float:
    """The simulator's CPU an example over the engine's (one role's, or all)."""
    engine, sim = r["engine_cpu_us_per_example"], r["sim_cpu_us_per_example"]
    if role is not None:
        return float(sim[role] / engine[role])
    return float(sum(sim.values()) / sum(engine.values()))


def sizing_section(results: dict[str, Any]) -> str:
    """The section's Markdown (markers included) for `results`."""
    rows = results["rows"]
    kind = rates(rows[0])[0]
    lines = [
        BEGIN,
        "",
        "The reader, CPU microseconds an example:",
        "",
        "| file | calibrated alone (passes) | the engine's reader node (its producer) "
        "| the simulator's reader node | one reader core keeps up with |",
        "| --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        passes = ", ".join(str(p) for p in r["reader_us_per_example_passes"])
        engine_cpu, sim_cpu = r["engine_cpu_us_per_example"], r["sim_cpu_us_per_example"]
        cells = [
            r["file"],
            f"**{r['reader_us_per_example']}** ({passes})",
            f"{engine_cpu['reader']} ({r['engine_producer_us_per_example']})",
            f"{sim_cpu['reader']} ({cpu_ratio(r, 'reader') - 1:+.0%})",
            f"{reader_eps(r['reader_us_per_example']):,} ex/s",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    lines += [
        "",
        "The job, engine vs simulator:",
        "",
        f"| file | engine EPS, {kind} (runs) | cores the engine's job got | simulated EPS, "
        f"{kind} (cores) "
        "| sim / engine | sim / engine, a synthetic batch's price | CPU us/example, engine "
        "/ sim | embedding servers' CPU us/example, engine / sim |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        _, engine_eps, engine_each, sim_eps = rates(r)
        each = ", ".join(f"{e:,}" for e in engine_each)
        engine_cpu, sim_cpu = r["engine_cpu_us_per_example"], r["sim_cpu_us_per_example"]
        servers = "embedding_servers"
        cells = [
            r["file"],
            f"{engine_eps:,} ({each})",
            f"{r['engine_cores']:.2f}",
            f"{sim_eps:,} ({r['sim_cores']:.2f})",
            f"**{r['ratio']}**",
            f"{r['ratio_synthetic_batch_price']}",
            f"{sum(engine_cpu.values()):.1f} / {sum(sim_cpu.values()):.1f} "
            f"({cpu_ratio(r) - 1:+.0%})",
            f"{engine_cpu[servers]} / {sim_cpu[servers]} ({cpu_ratio(r, servers) - 1:+.0%})",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    worst = max(rows, key=lambda r: abs(r["ratio"] - 1))
    worst_cpu = max(rows, key=lambda r: abs(cpu_ratio(r) - 1))
    reader_share = max(
        r["reader_us_per_example"] / sum(r["engine_cpu_us_per_example"].values()) for r in rows
    )
    fits = ", ".join(f"{f['error']:+.0%}" for f in results["fit_checks"])
    lines += [
        "",
        f"Measured on {results['cores']} cores shared with other work (load average "
        f"{results['load_before'][0]:.1f} before, {results['load_after'][0]:.1f} after), "
        f"{results['examples']:,} lines a file, the engine's EPS the median of "
        f"{results['repeats']} runs, the machine calibrated in the same run "
        f"({results['fit_examples']:,} examples a fit job; the simulator's error on the "
        f"three fit jobs themselves: {fits}). The simulator's worst miss in EPS: "
        f"{worst['file']}, {worst['ratio'] - 1:+.1%} (`max_abs_error` "
        f"{results['max_abs_error']:.3f}, against a bound of 0.2); in CPU an example: "
        f"{worst_cpu['file']}, {cpu_ratio(worst_cpu) - 1:+.1%}. Making the examples took at "
        f"most {reader_share:.1%} of the CPU the engine spent an example on these jobs."
        + (
            " EPS here is each run's examples over its whole time, start-up included, not "
            "the steady rate (`eps_steady`, [Examples per second](simulator.md#examples-per-"
            "second)): `python benchmarks/bench_sim_vs_engine.py` measures the steady one."
            if kind == "whole run"
            else " EPS: the steady rate ([Examples per second](simulator.md#examples-per-second))."
        ),
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
