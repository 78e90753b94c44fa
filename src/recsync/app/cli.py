"""The `recsync` command line: train a model, write and inspect data files.

User errors (ConfigError, DataError, unreadable files) end the command with one red line
and exit status 1, without a traceback.
"""

from __future__ import annotations

import dataclasses
import re
import tomllib
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, NoReturn

import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq
import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from recsync.app import fig5
from recsync.app.calibrate import calibrate as run_calibration
from recsync.app.config import build_dataclass, load_config, parse_overrides
from recsync.app.plan_view import plan_table
from recsync.app.run_dir import RunDir, toml_text
from recsync.app.sim_run import run_simulation
from recsync.app.train import run_training
from recsync.app.train_job import job_spec, run_distributed
from recsync.coordinator.planning import plan_for
from recsync.data.criteo import CriteoSchema
from recsync.data.libsvm import LibSVMSchema
from recsync.data.synthetic import SyntheticSpec, SyntheticTask
from recsync.data.tabular import TabularSchema
from recsync.errors import ConfigError, DataError, JobFailed, RecsyncError
from recsync.io.readers import FORMATS, is_gzip, open_dataset

app = typer.Typer(
    name="recsync",
    help="Train recommendation models with switchable synchronization strategies.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,
)
data_app = typer.Typer(help="Write and inspect data files.", no_args_is_help=True)
app.add_typer(data_app, name="data")
reproduce_app = typer.Typer(help="Reproduce the papers' figures (reports/).", no_args_is_help=True)
app.add_typer(reproduce_app, name="reproduce")


SYNTH_CHUNK_ROWS = 65_536
INSPECT_BATCH_ROWS = 65_536
INSPECT_TABLE_ROWS = 2**62  # ids are only counted, never looked up: keep them distinct
_SUFFIX_FORMATS = {
    ".parquet": "parquet",
    ".pq": "parquet",
    ".csv": "csv",
    ".svm": "libsvm",
    ".libsvm": "libsvm",
    ".ffm": "libffm",
    ".libffm": "libffm",
    ".tsv": "criteo",
    ".txt": "criteo",
}

ConfigOption = Annotated[
    Path | None,
    typer.Option("--config", "-c", help="TOML config, layered on the embedded default."),
]
SetOption = Annotated[
    list[str] | None,
    typer.Option("--set", help="Override a config key, e.g. --set train.batch_size=128."),
]


class Split(StrEnum):
    """Which split of the synthetic task to write."""

    train = "train"
    test = "test"


def _fail(error: Exception) -> NoReturn:
    message = " ".join(str(error).split())
    Console(stderr=True, soft_wrap=True).print(
        f"[bold red]error:[/] [red]{escape(message)}[/]", highlight=False
    )
    raise typer.Exit(1)


def _number(value: float | None, digits: int = 4) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def _skips_text(skipped: dict[str, Any]) -> str:
    if not skipped["total"]:
        return "none"
    reasons = ", ".join(f"{r} {n:,}" for r, n in sorted(skipped["by_reason"].items()))
    return f"{skipped['total']:,} ({reasons})"


def _prepare_run(config, name, force, set_, extra: dict[str, Any]):
    """The validated config (defaults, file, `extra`, then --set) and a fresh run dir."""
    overrides = {**extra, **parse_overrides(set_ or [])}
    if name is not None:
        overrides["run.name"] = name
    cfg = load_config(config, overrides)
    run_dir = RunDir.create(
        cfg.run.runs_dir, cfg.run.name, force=force, tensorboard=cfg.run.tensorboard
    )
    return cfg, run_dir


@app.command()
def train(
    config: ConfigOption = None,
    name: Annotated[
        str | None, typer.Option(help="Run directory name (default: a timestamp).")
    ] = None,
    force: Annotated[bool, typer.Option(help="Overwrite a non-empty run directory.")] = False,
    set_: SetOption = None,
    progress: Annotated[bool, typer.Option(help="Show a progress bar.")] = True,
    address: Annotated[
        str | None,
        typer.Option(help="Join this Ray cluster (e.g. auto, or HEAD_IP:6379); default: local."),
    ] = None,
) -> None:
    """Train one pass over the data; write config, metrics, summary and plots to a run dir."""
    try:
        extra = {} if address is None else {"cluster.address": address}
        cfg, run_dir = _prepare_run(config, name, force, set_, extra)
        if cfg.strategy.name == "reference":
            summary = run_training(cfg, run_dir, progress=progress)
        else:
            summary = run_distributed(cfg, run_dir, progress=progress)
    except (RecsyncError, JobFailed, OSError) as error:
        _fail(error)
    table = Table(title="recsync train", show_header=False)
    table.add_row("run dir", summary["run_dir"])
    table.add_row("strategy", summary.get("strategy", "reference (single process)"))
    table.add_row("examples trained", f"{summary['examples_trained']:,}")
    table.add_row("EPS (examples/s)", f"{summary['eps']:,.0f}")
    if "elp" in summary:
        table.add_row("ELP (examples in flight)", f"{summary['elp']:,}")
        table.add_row("average sync gap", _number(summary["average_sync_gap"], 2))
    table.add_row("teacher AUC (best)", _number(summary["teacher_auc"]))
    table.add_row("test AUC", _number(summary["test_auc"]))
    table.add_row("test NE", _number(summary["test_ne"]))
    table.add_row("test logloss", _number(summary["test_logloss"]))
    table.add_row("calibration", _number(summary["test_calibration"], 3))
    if cfg.data.source != "synthetic":
        table.add_row("skipped lines", _skips_text(summary["skipped"]))
    Console().print(table)


@app.command()
def simulate(
    config: ConfigOption = None,
    name: Annotated[
        str | None, typer.Option(help="Run directory name (default: a timestamp).")
    ] = None,
    force: Annotated[bool, typer.Option(help="Overwrite a non-empty run directory.")] = False,
    set_: SetOption = None,
    progress: Annotated[bool, typer.Option(help="Show a spinner.")] = True,
    profile: Annotated[
        Path | None, typer.Option(help="A cost profile written by `recsync calibrate`.")
    ] = None,
) -> None:
    """Run the job of `train` in the cluster simulator ([cost] section): virtual time, real math."""
    try:
        cfg, run_dir = _prepare_run(config, name, force, set_, _profile_overrides(profile))
        summary = run_simulation(cfg, run_dir, progress=progress)
    except (RecsyncError, OSError) as error:
        _fail(error)
    table = Table(title="recsync simulate (virtual time)", show_header=False)
    table.add_row("run dir", summary["run_dir"])
    table.add_row("strategy", summary["strategy"])
    table.add_row("examples trained", f"{summary['examples_trained']:,}")
    table.add_row("virtual seconds", f"{summary['train_seconds']:,.2f}")
    table.add_row("EPS (virtual)", f"{summary['eps']:,.0f}")
    table.add_row("average sync gap", _number(summary["average_sync_gap"], 2))
    table.add_row("teacher AUC (best)", _number(summary["teacher_auc"]))
    table.add_row("test AUC", _number(summary["test_auc"]))
    table.add_row("test NE", _number(summary["test_ne"]))
    Console().print(table)


@app.command()
def calibrate(
    out: Annotated[Path, typer.Option(help="Where to write the cost profile (TOML).")] = Path(
        "cost_profile.toml"
    ),
    check: Annotated[
        bool, typer.Option(help="Also compare simulated and real EPS on the engine benchmarks.")
    ] = True,
    examples: Annotated[int, typer.Option(help="Examples per check run.")] = 100_000,
) -> None:
    """Measure this machine into a simulator cost profile (use: simulate --profile FILE)."""
    cost, measured, rows = run_calibration(examples, check)
    out.write_text(toml_text({"cost": dataclasses.asdict(cost)}), encoding="utf-8")
    table = Table(title="measured on this machine", show_header=False)
    for key, value in measured.items():
        table.add_row(key, f"{value * 1e6:,.2f} us")
    Console().print(table)
    if rows:
        checks = Table(title="simulator vs Ray engine (examples/s)")
        for column in ("config", "measured_eps", "predicted_eps", "error"):
            checks.add_column(column)
        for row in rows:
            checks.add_row(
                *(str(row[c]) for c in ("config", "measured_eps", "predicted_eps")),
                f"{row['error']:+.1%}",
            )
        Console().print(checks)
    Console().print(f"cost profile written to {out}")


def _profile_overrides(profile: Path | None) -> dict[str, Any]:
    if profile is None:
        return {}
    with profile.open("rb") as handle:
        tree = tomllib.load(handle)
    flat: dict[str, Any] = {}

    def walk(prefix: str, node: dict[str, Any]) -> None:
        for key, value in node.items():
            if isinstance(value, dict):
                walk(f"{prefix}{key}.", value)
            else:
                flat[f"{prefix}{key}"] = value

    walk("", {"cost": tree.get("cost", {})})
    return flat


@app.command()
def plan(config: ConfigOption = None, set_: SetOption = None) -> None:
    """Print the placement plan: tables on embedding servers, dense slices on sync servers."""
    try:
        cfg = load_config(config, parse_overrides(set_ or []))
        spec = job_spec(cfg)
        if spec.strategy is None:
            raise ConfigError("strategy.name: 'reference' runs in one process; nothing to place")
        job_plan = plan_for(spec)
    except (RecsyncError, OSError) as error:
        _fail(error)
    Console().print(plan_table(job_plan, spec.model.tables))


def write_synthetic_parquet(spec: SyntheticSpec, out: Path, split: Split) -> int:
    """Write a split of the synthetic task as Parquet (label, I1.., C1.., all int64; I_j are
    the integer counts whose log(1+x) the task trains on); returns the number of rows."""
    task = SyntheticTask(spec)
    if split is Split.train:
        chunks = task.train_batches(SYNTH_CHUNK_ROWS)
    else:
        test, _ = task.test_set()
        starts = range(0, test.batch_size, SYNTH_CHUNK_ROWS)
        chunks = (test.slice(s, min(s + SYNTH_CHUNK_ROWS, test.batch_size)) for s in starts)
    dense_names = [f"I{j + 1}" for j in range(spec.num_dense)]
    categorical_names = [f"C{f + 1}" for f in range(len(spec.table_rows))]
    names = ["label", *dense_names, *categorical_names]
    schema = pa.schema([(column, pa.int64()) for column in names])
    out.parent.mkdir(parents=True, exist_ok=True)
    rows = 0
    with pq.ParquetWriter(out, schema) as writer:
        for batch in chunks:
            counts = batch.dense.double().expm1().round().long()
            ids = batch.ids.reshape(len(categorical_names), batch.batch_size)  # one id per bag
            columns = [batch.labels.long(), *counts.t(), *ids]
            writer.write_table(pa.table([c.numpy() for c in columns], schema=schema))
            rows += batch.batch_size
    return rows


@reproduce_app.command("shadowsync-fig5")
def reproduce_fig5(
    out: Annotated[Path, typer.Option(help="Report directory.")] = Path("reports/shadowsync_fig5"),
) -> None:
    """ShadowSync Fig. 5 in the simulator: EPS vs trainers, S-EASGD vs FR-EASGD-5/30."""
    console = Console()
    with console.status("simulating") as status:

        def show(point: dict[str, Any]) -> None:
            status.update(f"simulated {point['variant']} with {point['trainers']} trainers")
            console.print(
                f"{point['variant']:>12} {point['trainers']:>3} trainers: "
                f"{point['eps']:>12,.0f} ex/s, busiest sync NIC "
                f"{point['sync_server_nic_utilization']:.0%}",
                highlight=False,
            )

        fig5.reproduce(out, progress=show)
    console.print(f"report written to {out / 'report.md'}")


@data_app.command("synth")
def synth(
    out: Annotated[Path, typer.Option("--out", help="Parquet file to write.")],
    config: ConfigOption = None,
    split: Annotated[Split, typer.Option(help="Which split to write.")] = Split.train,
    set_: SetOption = None,
) -> None:
    """Write the synthetic task ([data.synthetic]) as a Parquet file."""
    try:
        cfg = load_config(config, parse_overrides(set_ or []))
        spec = build_dataclass(SyntheticSpec, cfg.data.synthetic, "data.synthetic")
        rows = write_synthetic_parquet(spec, out, split)
    except (RecsyncError, OSError) as error:
        _fail(error)
    Console().print(f"wrote {rows:,} {split.value} examples to {out}")


def _guess_format(path: Path) -> str:
    suffixes = [s.lower() for s in path.suffixes if s.lower() != ".gz"]
    if suffixes and suffixes[-1] in _SUFFIX_FORMATS:
        return _SUFFIX_FORMATS[suffixes[-1]]
    raise ConfigError(f"cannot tell the format of {path} from its name; pass --format")


def _table_columns(path: Path, fmt: str) -> pa.Schema:
    if fmt == "parquet":
        return pq.read_schema(path)
    skip_bad_rows = pa_csv.ParseOptions(invalid_row_handler=lambda row: "skip")
    with pa.input_stream(str(path), compression="gzip" if is_gzip(path) else None) as stream:
        return pa_csv.open_csv(stream, parse_options=skip_bad_rows).schema


def _inferred_tabular_schema(columns: pa.Schema, label: str, source: str) -> TabularSchema:
    """label = `label`; string columns and C<n> columns categorical (strings hashed);
    the other numeric columns dense."""
    if label not in columns.names:
        raise DataError(f"no label column {label!r} among {columns.names}", source=source)
    categorical, hashed, dense = [], [], []
    for field in columns:
        textual = pa.types.is_string(field.type) or pa.types.is_binary(field.type)
        if field.name == label:
            continue
        if textual or re.fullmatch(r"C\d+", field.name):
            categorical.append(field.name)
            hashed += [field.name] if textual else []
        elif pa.types.is_integer(field.type) or pa.types.is_floating(field.type):
            dense.append(field.name)
    rows = (INSPECT_TABLE_ROWS,) * len(categorical)
    return TabularSchema(label, tuple(dense), tuple(categorical), rows, hashed=tuple(hashed))


def _describe_schema(schema: Any) -> str:
    if isinstance(schema, TabularSchema):
        hashed = f" (hashed: {', '.join(schema.hashed)})" if schema.hashed else ""
        return (
            f"label {schema.label}; {len(schema.dense)} dense: {', '.join(schema.dense) or '-'}; "
            f"{len(schema.categorical)} categorical: {', '.join(schema.categorical) or '-'}"
            f"{hashed}"
        )
    if isinstance(schema, CriteoSchema):
        return f"label, {schema.num_integer} integer, {len(schema.table_rows)} categorical"
    if isinstance(schema, LibSVMSchema):
        return f"dense indices {list(schema.dense_indices)}; the other indices one multi-hot bag"
    return f"{schema.num_fields} fields, dense fields {list(schema.dense_fields)}"


def _inspect_schema(path: Path, fmt: str, config: Path | None, label: str):
    """(format, reader schema, the file's own columns or None) to read `path` with."""
    if not path.is_file():
        raise ConfigError(f"data file not found: {path}")
    if config is not None:
        overrides: dict[str, Any] = {"data.path": str(path), "data.test_path": str(path)}
        overrides |= {"data.test_fraction": 0.0, **({"data.source": fmt} if fmt else {})}
        files = load_config(config, overrides).to_specs().files
        if files is None:
            raise ConfigError(f"{config}: data.source is synthetic; pass --format")
        columns = _table_columns(path, files.fmt) if files.fmt in ("csv", "parquet") else None
        return files.fmt, files.schema, columns
    fmt = fmt or _guess_format(path)
    if fmt == "criteo":
        return fmt, CriteoSchema((INSPECT_TABLE_ROWS,) * 26), None
    if fmt == "libsvm":
        return fmt, LibSVMSchema(INSPECT_TABLE_ROWS), None
    if fmt == "libffm":
        raise ConfigError("libffm: the file does not say which fields are dense; pass --config")
    columns = _table_columns(path, fmt)
    return fmt, _inferred_tabular_schema(columns, label, str(path)), columns


@data_app.command("inspect")
def inspect(
    path: Annotated[Path, typer.Argument(help="Data file to read.")],
    format_: Annotated[
        str | None,
        typer.Option("--format", "-f", help=f"One of {', '.join(FORMATS)} (default: by name)."),
    ] = None,
    config: Annotated[
        Path | None, typer.Option("--config", "-c", help="Take the schema from this config.")
    ] = None,
    label: Annotated[str, typer.Option(help="Label column of a CSV/Parquet table.")] = "label",
    strict: Annotated[bool, typer.Option(help="Stop at the first malformed line.")] = False,
) -> None:
    """Read a data file: its schema, rows, positive rate and skipped lines by reason."""
    try:
        if format_ is not None and format_ not in FORMATS:
            raise ConfigError(f"--format {format_!r}: expected one of {list(FORMATS)}")
        fmt, schema, columns = _inspect_schema(path, format_, config, label)
        reader = open_dataset(path, fmt, schema, batch_size=INSPECT_BATCH_ROWS, strict=strict)
        rows = positives = 0
        for batch in reader:
            rows += batch.batch_size
            positives += int(batch.labels.sum())
    except (RecsyncError, OSError, pa.ArrowException) as error:
        _fail(error)
    table = Table(title=str(path), show_header=False)
    table.add_row("format", fmt)
    if columns is not None:
        table.add_row("columns", ", ".join(f"{f.name}: {f.type}" for f in columns))
    table.add_row("schema", escape(_describe_schema(schema)))
    table.add_row("rows", f"{rows:,}")
    table.add_row("positive rate", _number(positives / rows if rows else None))
    table.add_row("skipped lines", _skips_text(reader.skips.as_dict()))
    for reason, where in sorted(reader.skips.first.items()):
        table.add_row(f"  first {reason}", escape(where))
    Console().print(table)


if __name__ == "__main__":
    app()
