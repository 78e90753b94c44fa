"""`recsync calibrate`: this machine into a cost profile for the simulator, or (--data)
the reader's cost on a data file into one."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from recsync.app.cli.common import ConfigOption, ProgressOption, SetOption, cpu_table, fail
from recsync.app.config.load import parse_overrides
from recsync.app.runs.calibrate import calibrate as run_calibration
from recsync.app.runs.calibrate import calibration_steps
from recsync.app.runs.cost_profile import profile_text
from recsync.app.runs.network_cost import calibrate_network
from recsync.app.runs.progress import steps_bar
from recsync.app.runs.reader_cost import (
    READER_PASSES,
    base_profile,
    job_files,
    measure_reader,
    with_reader_cost,
)
from recsync.errors import RecsyncError


def calibrate(
    out: Annotated[
        Path, typer.Option(metavar="FILE", help="Where to write the cost profile (TOML).")
    ] = Path("cost_profile.toml"),
    check: Annotated[
        bool,
        typer.Option(
            show_default=False,
            help="Also compare simulated and real EPS on the engine benchmarks (default).",
        ),
    ] = True,
    examples: Annotated[
        int,
        typer.Option(metavar="N", help="Examples per engine run (each fit job and each check)."),
    ] = 180_000,
    repeats: Annotated[
        int,
        typer.Option(
            min=1, metavar="N", help="Runs of each fit job (the one of median EPS is measured)."
        ),
    ] = 1,
    progress: ProgressOption = True,
    data: Annotated[
        Path | None,
        typer.Option(
            metavar="FILE",
            help="Measure only the reader on this data file (the job's: --config, --format, "
            "--set) and set its format's price of an example in the profile at --out.",
        ),
    ] = None,
    format_: Annotated[
        str | None,
        typer.Option(
            "--format", "-f", help="The --data file's format (default: by the file's name)."
        ),
    ] = None,
    sample: Annotated[
        int,
        typer.Option(
            min=1, metavar="N", help="Examples each timed pass over the --data file reads."
        ),
    ] = 50_000,
    config: ConfigOption = None,
    set_: SetOption = None,
    network: Annotated[
        bool,
        typer.Option(
            "--network",
            show_default=False,
            help="Measure only the links between the machines of the Ray cluster at "
            "--address (each machine's rate, the latency between machines) into the "
            "profile at --out ([cost.machines]).",
        ),
    ] = False,
    address: Annotated[
        str | None,
        typer.Option(metavar="HOST:PORT", help="With --network: the Ray cluster to measure."),
    ] = None,
) -> None:
    """Measure this machine into a simulator cost profile.

    Then simulate with it: recsync simulate --profile FILE. With --data, measure only the
    reader's cost on a data file, into the profile; with --network --address, the links
    between a cluster's machines."""
    if network:
        _calibrate_network(out, address)
        return
    if data is not None:
        _calibrate_reader(out, data, format_, config, set_, sample)
        return
    with steps_bar("calibrate", calibration_steps(check, repeats), progress) as announce:
        cost, measured, rows = run_calibration(examples, check, announce, repeats)
    out.write_text(profile_text(cost), encoding="utf-8")
    table = Table(title="measured on this machine", show_header=False)
    for key, value in measured.items():
        if key.endswith("_factor"):
            shown = f"x {value:.3f}"
        elif key.endswith("_share"):
            shown = f"{value:.1%}"
        elif key.endswith("_cpus"):
            shown = f"{value:.4f} of a core"
        elif value < 1e-8:  # a dense element's or a byte's seconds
            shown = f"{value * 1e9:.4g} ns"
        elif value < 1e-3:
            shown = f"{value * 1e6:.4g} us"
        else:
            shown = f"{value * 1e3:.4g} ms"
        table.add_row(key, shown)
    Console(emoji=False).print(table)
    if rows:
        checks = Table(title="simulator vs Ray engine (examples/s)")
        for column in ("config", "measured_eps", "predicted_eps", "error"):
            checks.add_column(column)
        for row in rows:
            checks.add_row(
                *(str(row[c]) for c in ("config", "measured_eps", "predicted_eps")),
                f"{row['error']:+.1%}",
            )
        Console(emoji=False).print(checks)
        Console(emoji=False).print(cpu_table(rows))
    Console(emoji=False).print(f"cost profile written to {out}")


def _calibrate_network(out: Path, address: str | None) -> None:
    """`calibrate --network`: measure the cluster's links into `out`'s [cost.machines]."""
    if not address:
        fail(RecsyncError("--network needs --address HOST:PORT of a Ray cluster of machines"))
    try:
        with Console(emoji=False).status(f"measuring the links of {address}"):
            cost, measured, had_profile = calibrate_network(address, out)
    except (RecsyncError, ConnectionError, ValueError, OSError) as error:
        fail(RecsyncError(str(error)))
    table = Table(title=f"the links of {address}")
    for column in ("machine", "address", "link (Mbit/s each way)"):
        table.add_column(column)
    for m, rate in enumerate(cost.machines.link_bytes_s):
        table.add_row(str(m), measured.addresses[m], f"{rate * 8 / 1e6:.1f}")
    console = Console(emoji=False)
    console.print(table)
    console.print(
        f"latency a machine boundary adds: {cost.machines.latency_s * 1e6:.0f} us one way "
        f"(a call within a machine: {measured.loopback_round_trip_s * 1e6:.0f} us round trip)"
    )
    first = " ".join(f"{r * 8 / 1e6:.1f}" for r in measured.sharing[0])
    console.print(
        f"{len(measured.sharing[0])} replies pulled from the slowest link's machine at once, "
        f"{len(measured.sharing)} times (Mbit/s each, the first time: {first}): spread "
        f"(sigma of log rate) {cost.machines.flow_spread:.2f}"
    )
    kept = "its other prices kept" if had_profile else "the other prices: defaults"
    console.print(f"cost.machines written to {out} ({kept})")


def _calibrate_reader(
    out: Path,
    data: Path,
    fmt: str | None,
    config: Path | None,
    set_: list[str] | None,
    sample: int,
) -> None:
    """`calibrate --data`: time the reader on `data` and write its price into `out`."""
    try:
        files, train = job_files(data, fmt, config, parse_overrides(set_ or []))
        base = base_profile(out)
        measured = measure_reader(files, train, examples=sample, repeats=READER_PASSES)
        cost = with_reader_cost(base, measured)
        out.write_text(profile_text(cost), encoding="utf-8")
    except (RecsyncError, OSError) as error:
        fail(error)
    table = Table(title=f"the reader on {data}", show_header=False)
    table.add_row("format", measured.fmt)
    table.add_row("examples a pass", f"{measured.examples:,}")
    passes = ", ".join(f"{s * 1e6:.2f}" for s in measured.passes)
    table.add_row("CPU us an example", f"{measured.example_s * 1e6:.2f} (passes: {passes})")
    table.add_row("a batch of the job", f"{measured.example_s * train.batch_size * 1e3:.3f} ms")
    table.add_row("bytes an example as stored", f"{measured.example_bytes:.1f}")
    Console(emoji=False).print(table)
    what = f"updated {out}" if base is not None else f"wrote {out} (the other costs: defaults)"
    Console(emoji=False).print(
        f"cost.file_example_s.{measured.fmt} and cost.file_example_bytes.{measured.fmt}: {what}"
    )
