"""[data]: where examples come from (the synthetic task or files of a format), the
declared columns of a table, and the reader's schema and paths made from them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, model_validator

from recsync.app.config.base import Section, section_from_dataclass
from recsync.data.synthetic import SyntheticSpec
from recsync.errors import ConfigError
from recsync.io.formats.criteo.rows import CriteoSchema
from recsync.io.formats.libsvm.rows import LibFFMSchema, LibSVMSchema
from recsync.io.formats.tabular.rows import TabularSchema
from recsync.io.readers import format_of_name
from recsync.io.storage import expanded
from recsync.io.urls import with_endpoint
from recsync.model.spec import ModelSpec

TABULAR_FORMATS = ("csv", "parquet")

if TYPE_CHECKING:  # the generated section, as far as the config reads it

    class SyntheticSection(Section):
        num_dense: int = 0
        table_rows: list[int] = []

else:
    SyntheticSection = section_from_dataclass(SyntheticSpec)


_INFERRED = "read from the first file's header and rows when dense and categorical are empty"


class TabularSchemaSection(Section):
    """[data.schema]: the declared columns of a CSV or Parquet table."""

    label: str = Field(default="label", description="The label column (0 or 1).")
    dense: list[str] = Field(
        default=[],
        description="The dense (numeric) feature columns, in the model's order.",
        json_schema_extra={"unset": _INFERRED},
    )
    categorical: list[str] = Field(
        default=[],
        description="The categorical columns, one embedding table each, in the model's order.",
        json_schema_extra={"unset": _INFERRED},
    )
    hashed: list[str] = Field(
        default=[],
        description="Categorical columns of strings, hashed (mmh3 with hash_seed) into their "
        "table; the others hold integer ids.",
        json_schema_extra={"unset": _INFERRED},
    )
    null_dense: float | Literal["skip"] = Field(
        default=0.0,
        description='The value of a null dense cell, or "skip" to skip its row as a bad line.',
    )
    hash_seed: int = Field(
        default=0,
        description="The seed of the hash of string ids (hashed columns).",
        json_schema_extra={"values": "[0, 2^32)"},
    )
    dense_log1p: bool = Field(
        default=False,
        description="Feed the model log(1 + x) of each dense value (negative ones as 0).",
    )
    delimiter: str = Field(
        default=",",
        description='The field separator of CSV text, one character ("\\t" for TSV).',
    )
    multi_valued: dict[str, str] = Field(
        default={},
        description="column = separator: the column holds a multi-hot bag of ids a row, "
        "split at that one character.",
        json_schema_extra={"unset": _INFERRED},
    )


class LibSVMSection(Section):
    """[data.libsvm]: how libSVM and libFM lines map to features."""

    dense_indices: list[int] = Field(
        default=[],
        description="Indices whose values are the dense features, in order (absent: 0); "
        "every other index is an id of the one multi-hot categorical feature.",
    )


class LibFFMSection(Section):
    """[data.libffm]: how libffm lines map to features."""

    dense_fields: list[int] = Field(
        default=[],
        description="Field numbers whose values are the dense features, in order; the other "
        "fields are the categorical features, in increasing order.",
    )


class StorageSection(Section):
    """[data.storage]: where an S3-compatible store answers. Never credentials: those come
    from each host's environment or configuration."""

    endpoint: str | None = Field(
        default=None,
        description='The S3-compatible store\'s URL, e.g. "http://10.0.0.5:9000".',
        json_schema_extra={"unset": "AWS_ENDPOINT_URL, or AWS's configuration, or AWS itself"},
    )


SOURCES = ("synthetic", "criteo", "libsvm", "libfm", "libffm", "csv", "parquet", "auto")


class DataSection(Section):
    """[data]: where examples come from, and the held-out set for file data."""

    source: Literal["synthetic", "criteo", "libsvm", "libffm", "csv", "parquet"] = Field(
        default="synthetic",
        description='The synthetic task, or files of a format; "libfm" is read as libsvm, '
        '"auto" is the format data.path\'s name says.',
        json_schema_extra={"values": list(SOURCES)},
    )
    path: str | list[str] | None = Field(
        default=None,
        description="The training files: files, directories or globs, local paths or URLs "
        "(s3://, gs://, ...).",
        json_schema_extra={"unset": "required for file data"},
    )
    strict: bool = Field(
        default=False,
        description="Stop at the first bad line of file data, naming it; false: skip bad "
        "lines and report them.",
    )
    test_path: str | list[str] | None = Field(
        default=None,
        description="The held-out files of file data (or set test_fraction instead).",
        json_schema_extra={"unset": "the held-out set is test_fraction of data.path"},
    )
    test_fraction: float = Field(
        default=0.0,
        ge=0.0,
        lt=1.0,
        description="The share of data.path's lines (Parquet: rows) held out for evaluation "
        "(file data without test_path).",
    )
    test_max_examples: int = Field(
        default=100_000,
        ge=1,
        description="The most held-out examples of file data (the first ones, by file and line).",
    )
    synthetic: SyntheticSection = Field(
        default_factory=SyntheticSection, description="The synthetic task (source = synthetic)."
    )
    table_schema: TabularSchemaSection = Field(
        default_factory=TabularSchemaSection,
        alias="schema",
        description="The declared columns of CSV and Parquet data.",
    )
    libsvm: LibSVMSection = Field(
        default_factory=LibSVMSection, description="The dense indices of libSVM / libFM data."
    )
    libffm: LibFFMSection = Field(
        default_factory=LibFFMSection, description="The dense fields of libffm data."
    )
    storage: StorageSection = Field(
        default_factory=StorageSection, description="Where an S3-compatible store answers."
    )

    @model_validator(mode="before")
    @classmethod
    def _resolve_source(cls, values: Any) -> Any:
        """ "libfm" is read as libsvm (the same `label index:value` lines); "auto" is the
        format data.path's name says (io/readers.py SUFFIX_FORMATS)."""
        if not isinstance(values, dict):
            return values
        source = values.get("source")
        if source == "libfm":
            return {**values, "source": "libsvm"}
        if source == "auto":
            path = values.get("path")
            first = path[0] if isinstance(path, list) and path else path
            if not isinstance(first, str):
                raise ValueError("'auto' needs data.path: the format is read from its name")
            try:
                return {**values, "source": format_of_name(first)}
            except ConfigError:  # a directory: its first file's name tells
                storage = values.get("storage") or {}
                endpoint = storage.get("endpoint") if isinstance(storage, dict) else None
                files = expanded(with_endpoint(first, endpoint))
                return {**values, "source": format_of_name(files[0])}
        return values


def reader_schema(
    data: DataSection, model: ModelSpec, rows: tuple[int, ...]
) -> CriteoSchema | LibSVMSchema | LibFFMSchema | TabularSchema:
    """The schema file data is read with, as [data] declares it."""
    keyed = model.hash_tables is not None
    if data.source == "criteo":
        return CriteoSchema(rows, num_integer=model.num_dense, keyed=keyed)
    if data.source == "libsvm":
        return LibSVMSchema(rows[0], dense_indices=tuple(data.libsvm.dense_indices), keyed=keyed)
    if data.source == "libffm":
        return LibFFMSchema(rows, dense_fields=tuple(data.libffm.dense_fields), keyed=keyed)
    s = data.table_schema
    return TabularSchema(
        label=s.label,
        dense=tuple(s.dense),
        categorical=tuple(s.categorical),
        table_rows=rows,
        hashed=tuple(s.hashed),
        null_dense=None if s.null_dense == "skip" else s.null_dense,
        hash_seed=s.hash_seed,
        delimiter=s.delimiter,
        keyed=keyed,
        multi_valued=dict(s.multi_valued),
    )


def file_paths(
    value: str | list[str] | None, storage: StorageSection | None = None, what: str = "data.path"
) -> tuple[str, ...]:
    """The data files named (files, directories, globs; local paths or URLs: io/storage.py),
    local ones absolute against the working directory of the command (the reader's actor
    may run elsewhere: another directory, or with Ray already running, another cwd)."""
    if value is None:
        return ()
    endpoint = storage.endpoint if storage is not None else None
    files = []
    for given in [value] if isinstance(value, str) else value:
        files.extend(expanded(with_endpoint(given, endpoint), what))
    return tuple(files)
