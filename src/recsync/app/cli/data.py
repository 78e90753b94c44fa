"""`recsync data`: write the synthetic task to Parquet, inspect data files."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import pyarrow as pa
import pyarrow.parquet as pq
import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from recsync.app.cli.common import ConfigOption, SetOption, fail, number, skips_text
from recsync.app.config.base import build_dataclass
from recsync.app.config.load import load_config, parse_overrides
from recsync.data.keys import MAX_TABLES
from recsync.data.synthetic import SyntheticSpec, SyntheticTask
from recsync.errors import ConfigError, RecsyncError
from recsync.io.column_lists import separated_list
from recsync.io.columns import (
    InferredColumns,
    infer_columns,
    table_columns,
    table_sample,
)
from recsync.io.formats.criteo.rows import CriteoSchema
from recsync.io.formats.libsvm.rows import LibFFMSchema, LibSVMSchema
from recsync.io.formats.tabular.rows import TabularSchema
from recsync.io.libffm_fields import (
    INDEX_KINDS_KEPT,
    FieldSeen,
    LibFFMFields,
    libffm_fields,
)
from recsync.io.readers import FORMATS, Schema, format_of_name, open_dataset
from recsync.io.storage import exists, expanded
from recsync.io.urls import shown

data_app = typer.Typer(
    help="Write and inspect data files.", no_args_is_help=True, rich_markup_mode=None
)


SYNTH_CHUNK_ROWS = 65_536
INSPECT_BATCH_ROWS = 65_536
INSPECT_TABLE_ROWS = 2**62  # ids are only counted, never looked up: keep them distinct


class Split(StrEnum):
    """Which split of the synthetic task to write."""

    train = "train"
    test = "test"


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


@data_app.command("synth")
def synth(
    out: Annotated[Path, typer.Option("--out", metavar="FILE", help="Parquet file to write.")],
    config: ConfigOption = None,
    split: Annotated[Split, typer.Option(help="Which split to write.")] = Split.train,
    set_: SetOption = None,
) -> None:
    """Write the synthetic task as a Parquet file.

    The task of the config's data.synthetic table, as columns label, I1.., C1..."""
    try:
        cfg = load_config(config, parse_overrides(set_ or []))
        spec = build_dataclass(SyntheticSpec, cfg.data.synthetic, "data.synthetic")
        rows = write_synthetic_parquet(spec, out, split)
    except (RecsyncError, OSError) as error:
        fail(error)
    Console(emoji=False).print(f"wrote {rows:,} {split.value} examples to {out}")


def _inferred_tabular_schema(found: InferredColumns) -> TabularSchema:
    """The schema a config with no declared columns trains on (io/columns.py), with its
    hash tables' keys (file data's tables when no table size is set: a negative integer id
    is a key there, a fixed table's bad_id)."""
    rows = (INSPECT_TABLE_ROWS,) * len(found.categorical)
    return TabularSchema(
        found.label,
        found.dense,
        found.categorical,
        rows,
        hashed=found.hashed,
        multi_valued=dict(found.multi_valued),
        keyed=len(found.categorical) <= MAX_TABLES,
    )


def _describe_schema(schema: Any) -> str:
    if isinstance(schema, TabularSchema):
        hashed = f" (hashed: {', '.join(schema.hashed)})" if schema.hashed else ""
        if schema.multi_valued:
            lists = ", ".join(f"{c} split at {s!r}" for c, s in schema.multi_valued.items())
            hashed += f" (multi-valued: {lists})"
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


def _inspect_schema(
    path: str, fmt: str | None, config: Path | None, label: str
) -> tuple[str, Schema, pa.Schema | None, InferredColumns | LibFFMFields | None]:
    """(format, reader schema, the file's own columns or None, what was inferred of them
    (a table's columns, a libffm file's fields) or None) to read `path` with."""
    if not exists(path):
        raise ConfigError(f"data file not found: {shown(path)}")
    if config is not None:
        overrides: dict[str, Any] = {"data.path": path, "data.test_path": path}
        overrides |= {"data.test_fraction": 0.0, **({"data.source": fmt} if fmt else {})}
        files = load_config(config, overrides).to_specs().files
        if files is None:
            raise ConfigError(f"{config}: data.source is synthetic; pass --format")
        columns = table_columns(path, files.fmt) if files.fmt in ("csv", "parquet") else None
        return files.fmt, files.schema, columns, None
    fmt = "libsvm" if fmt == "libfm" else fmt or format_of_name(path)
    if fmt == "criteo":
        return fmt, CriteoSchema((INSPECT_TABLE_ROWS,) * 26), None, None
    if fmt == "libsvm":
        return fmt, LibSVMSchema(INSPECT_TABLE_ROWS), None, None
    if fmt == "libffm":
        fields = libffm_fields(path)
        if not fields.num_fields:
            raise ConfigError(
                f"libffm: no field:index:value token in the first {fields.lines:,} lines"
            )
        return fmt, LibFFMSchema((INSPECT_TABLE_ROWS,) * fields.num_fields), None, fields
    sample = table_sample(path, fmt)
    found = infer_columns(sample, label, shown(path))
    return fmt, _inferred_tabular_schema(found), sample.schema, found


def _undeclared_lists(path: str, fmt: str, schema: TabularSchema) -> list[str]:
    """A declared text column that holds lists of ids (io/column_lists.py) but
    is not in data.schema.multi_valued: what to declare, one line each."""
    sample = table_sample(path, fmt, schema.delimiter)
    lines = []
    for column in schema.categorical:
        if column in schema.multi_valued or column not in sample.column_names:
            continue
        if not pa.types.is_string(sample.schema.field(column).type):
            continue
        found = separated_list(sample.column(column))
        if found is not None:
            declare = f'data.schema.multi_valued = {{{column} = "{found.separator}"}}'
            lines.append(f"{column}: {found.why}; read as one string unless you declare {declare}")
    return lines


def _declare_text(found: InferredColumns, path: str, fmt: str) -> list[str]:
    """What a user must declare to train on a table read as `found` infers it."""
    label = f" --set data.schema.label={found.label}" if found.label != "label" else ""
    needs = []
    if not found.categorical:
        needs.append(
            "no column reads as categorical, and a DLRM needs one (an id): declare the "
            "columns in [data.schema] (dense = [...], categorical = [...])"
        )
    if found.multi_valued:
        lists = ", ".join(f'{c} = "{s}"' for c, s in found.multi_valued)
        needs.append(
            f"nothing for the lists: train records data.schema.multi_valued = {{{lists}}}; a "
            "declared schema must list it"
        )
    if found.ignored:
        needs.append(
            f"left out: {', '.join(found.ignored)}; to use one, declare the columns in "
            "[data.schema]"
        )
    return [
        *(needs or ["nothing: train reads the columns as above"]),
        f"train with: --set data.source={fmt} --set data.path={path}{label}",
        "to change a column's role, list the columns in [data.schema] dense and categorical "
        "(a declared schema is used as is)",
    ]


@data_app.command("inspect")
def inspect(
    given: Annotated[
        str,
        typer.Argument(
            metavar="FILE", help="Data file to read (a path or URL; a folder or glob: its first)."
        ),
    ],
    format_: Annotated[
        str | None,
        typer.Option(
            "--format",
            "-f",
            metavar="FORMAT",
            help=f"One of {', '.join(FORMATS)} (default: by the file's name).",
        ),
    ] = None,
    config: Annotated[
        Path | None,
        typer.Option("--config", "-c", metavar="FILE", help="Take the schema from this config."),
    ] = None,
    label: Annotated[
        str, typer.Option(metavar="COLUMN", help="Label column of a CSV or Parquet table.")
    ] = "label",
    strict: Annotated[
        bool, typer.Option(show_default=False, help="Stop at the first malformed line.")
    ] = False,
) -> None:
    """Read a data file and say how it reads.

    Its schema (each column and what it is taken for), rows, positive rate, and the
    lines skipped by reason."""
    try:
        if format_ is not None and format_ not in FORMATS:
            raise ConfigError(f"--format {format_!r}: expected one of {list(FORMATS)}")
        path = expanded(given, "FILE")[0]
        fmt, schema, columns, found = _inspect_schema(path, format_, config, label)
        reader = open_dataset(path, fmt, schema, batch_size=INSPECT_BATCH_ROWS, strict=strict)
        rows = positives = 0
        for batch in reader:
            rows += batch.batch_size
            positives += int(batch.labels.sum())
    except (RecsyncError, OSError, pa.ArrowException, ValueError) as error:
        fail(error)
    table = Table(title=escape(shown(path)), show_header=False)
    table.add_row("format", fmt)
    if columns is not None and found is None:
        table.add_row("columns", ", ".join(f"{f.name}: {f.type}" for f in columns))
    table.add_row("schema", escape(_describe_schema(schema)))
    if isinstance(schema, TabularSchema) and found is None:
        for line in _undeclared_lists(path, fmt, schema):
            table.add_row("undeclared list", escape(line))
    table.add_row("rows", f"{rows:,}")
    table.add_row("positive rate", number(positives / rows if rows else None))
    table.add_row("skipped lines", skips_text(reader.skips.as_dict()))
    for reason, where in sorted(reader.skips.first.items()):
        table.add_row(f"  first {reason}", escape(where))
    console = Console(emoji=False)
    console.print(table)
    if isinstance(found, LibFFMFields):
        _print_fields(console, found, path)
    elif found is not None:
        roles = Table(title=escape("columns, inferred (no [data.schema] declared)"))
        for heading in ("column", "type", "read as", "why"):
            roles.add_column(heading)
        for role in found.roles:
            roles.add_row(escape(role.name), escape(role.type), role.role, escape(role.why))
        console.print(roles)
        console.print("to declare:")
        for line in _declare_text(found, path, fmt):
            console.print(f"  {escape(line)}", highlight=False, soft_wrap=True)


def _print_fields(console: Console, found: LibFFMFields, path: str) -> None:
    """A libffm file's fields as its first lines show them, and what to declare."""
    fields = Table(title=f"fields, read from the first {found.lines:,} lines")
    for heading in ("field", "lines", "indices", "read as"):
        fields.add_column(heading)
    measures = []
    for field_number in range(found.num_fields):
        seen = found.fields.get(field_number, FieldSeen())
        indices = len(seen.indices)
        many = "or more" if indices > INDEX_KINDS_KEPT else ""
        role = "categorical"
        if seen.looks_dense():
            role = "categorical (one index, values not 0/1: a measure? declare it dense)"
            measures.append(field_number)
        fields.add_row(str(field_number), f"{seen.lines:,}", f"{indices} {many}".strip(), role)
    console.print(fields)
    console.print("to declare:")
    lines = [
        f"a run with no model.num_tables reads {found.num_fields} fields from the file "
        "(the categorical ones are its tables)",
        f"train with: --set data.source=libffm --set data.path={path}",
    ]
    if measures:
        lines.insert(
            0,
            f"fields {measures} look like measures: --set data.libffm.dense_fields={measures} "
            "to read them as dense (the file cannot say)",
        )
    for line in lines:
        console.print(f"  {escape(line)}", highlight=False, soft_wrap=True)
