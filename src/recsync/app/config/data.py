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


class TabularSchemaSection(Section):
    """[data.schema]: the declared columns of a CSV or Parquet table."""

    label: str = "label"
    dense: list[str] = []
    categorical: list[str] = []
    hashed: list[str] = []
    null_dense: float | Literal["skip"] = 0.0
    hash_seed: int = 0
    dense_log1p: bool = False
    delimiter: str = ","  # "\t" for TSV tables
    multi_valued: dict[str, str] = {}  # column = separator: a multi-hot bag of ids a row


class LibSVMSection(Section):
    """[data.libsvm]: which libSVM indices are dense features."""

    dense_indices: list[int] = []


class LibFFMSection(Section):
    """[data.libffm]: which libFM field numbers are dense features."""

    dense_fields: list[int] = []


class StorageSection(Section):
    """[data.storage]: where an S3-compatible store answers, if not where the environment
    (AWS_ENDPOINT_URL) or AWS's configuration says. Never credentials: those come from
    each host's environment or configuration."""

    endpoint: str | None = None  # e.g. "http://10.0.0.5:9000"


class DataSection(Section):
    """[data]: where examples come from, and the held-out set for file data."""

    source: Literal["synthetic", "criteo", "libsvm", "libffm", "csv", "parquet"] = "synthetic"
    # also accepted on input: "libfm" (read as libsvm) and "auto" (by data.path's name)
    path: str | list[str] | None = None
    strict: bool = False
    test_path: str | list[str] | None = None
    test_fraction: float = Field(default=0.0, ge=0.0, lt=1.0)
    test_max_examples: int = Field(default=100_000, ge=1)
    synthetic: SyntheticSection = Field(default_factory=SyntheticSection)
    table_schema: TabularSchemaSection = Field(default_factory=TabularSchemaSection, alias="schema")
    libsvm: LibSVMSection = Field(default_factory=LibSVMSection)
    libffm: LibFFMSection = Field(default_factory=LibFFMSection)
    storage: StorageSection = Field(default_factory=StorageSection)

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
