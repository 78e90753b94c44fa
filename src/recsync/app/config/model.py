"""[model]: the DLRM's shape and its embedding tables ([[model.tables]], each table's own
dim, rows and hash admission and eviction over [model.hash_tables]'). `Config` turns it
into a ModelSpec with the data's shape (app/config/schema.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, TypeAlias

from pydantic import Field
from pydantic.config import JsonDict

from recsync.app.config.base import Section, section_from_dataclass
from recsync.model.hash_spec import HashTables
from recsync.model.spec import ModelSpec

_DEFAULT_MODEL = ModelSpec()

if TYPE_CHECKING:  # the generated section, as far as this module reads it
    HashTablesSection: TypeAlias = Section
else:
    HashTablesSection = section_from_dataclass(HashTables)

_GLOBAL: JsonDict = {"unset": "model.hash_tables' value"}


class TableAdmissionSection(Section):
    """A hash table's own admission keys (the others: model.hash_tables.admission's)."""

    min_count: int | None = Field(
        default=None,
        description="An id gets a row at its min_count-th sighting.",
        json_schema_extra=_GLOBAL,
    )
    probability: float | None = Field(
        default=None,
        description="Each sighting admits the id with this probability.",
        json_schema_extra=_GLOBAL,
    )


class TableEvictionSection(Section):
    """A hash table's own eviction keys (the others: model.hash_tables.eviction's)."""

    ttl_steps: int | None = Field(
        default=None,
        description="Rows not seen for this many updates of their shard go.",
        json_schema_extra=_GLOBAL,
    )
    min_l2: float | None = Field(
        default=None,
        description="Rows whose L2 norm fell below this go.",
        json_schema_extra=_GLOBAL,
    )
    on_full: Literal["evict", "error"] | None = Field(
        default=None,
        description="What a full table does with a new id: evict a row, or stop the run.",
        json_schema_extra=_GLOBAL,
    )
    ttl_days: int | None = Field(
        default=None,
        description="Continual training: rows not seen for this many days go.",
        json_schema_extra=_GLOBAL,
    )


class TableSection(Section):
    """One [[model.tables]] entry: a table's name, its dim (default: model.embedding_dim),
    its kind (default: model.table_kind's; hash and fixed tables may mix), its rows (a
    fixed table's, else table_rows'), and a hash table's own admission and eviction keys
    (over model.hash_tables')."""

    name: str = Field(description="The table's name: its categorical column's.")
    dim: int | None = Field(
        default=None,
        description="The width of the table's rows.",
        json_schema_extra={"unset": "model.embedding_dim"},
    )
    kind: Literal["hash", "fixed"] | None = Field(
        default=None,
        description="hash: keyed by raw ids, rows made as ids arrive; fixed: `rows` rows, "
        "ids taken modulo it. Tables of both kinds may mix in one job.",
        json_schema_extra={"unset": "model.table_kind's"},
    )
    rows: int | None = Field(
        default=None,
        description="A fixed table's rows (required where hash tables give none), or a "
        "hash table's expected ids (every table's or none).",
        json_schema_extra={"unset": "model.table_rows'"},
    )
    admission: TableAdmissionSection | None = Field(
        default=None,
        description="This hash table's own admission keys.",
        json_schema_extra={"unset": "model.hash_tables.admission"},
    )
    eviction: TableEvictionSection | None = Field(
        default=None,
        description="This hash table's own eviction keys.",
        json_schema_extra={"unset": "model.hash_tables.eviction"},
    )


class ModelSection(Section):
    """[model]: the DLRM's shape and its embedding tables; the counts default to the
    data's. Tables whose dim is not `embedding_dim` (the interaction's, the bottom MLP's
    output) are projected to it."""

    num_dense: int | None = Field(
        default=None,
        description="Dense features; must equal the data's where the data says.",
        json_schema_extra={"unset": "the data's (Criteo: 13)"},
    )
    num_tables: int | None = Field(
        default=None,
        description="Embedding tables, one per categorical feature.",
        json_schema_extra={"unset": "the data's (Criteo: 26; libffm: its first lines' fields)"},
    )
    table_rows: list[int] | int | None = Field(
        default=None,
        description="Rows of each table (a list), or one count for every table; ids are "
        "taken modulo it.",
        json_schema_extra={
            "unset": "the synthetic task's; hash tables: grown as ids arrive; else required"
        },
    )
    table_kind: Literal["auto", "hash", "fixed"] = Field(
        default="auto",
        description="hash: tables keyed by raw ids, rows made as ids arrive; fixed: "
        "table_rows rows; auto: the one kind [[model.tables]] gives, else hash for file "
        "data without table_rows, fixed otherwise. A table's own kind overrides it.",
    )
    tables: list[TableSection] | None = Field(
        default=None,
        description="[[model.tables]]: one entry per categorical column, in the data's "
        "order: each table's own dim, rows, and hash admission and eviction.",
        json_schema_extra={"unset": "every table of embedding_dim, table_rows and hash_tables"},
    )
    hash_tables: HashTablesSection = Field(
        default_factory=HashTablesSection,
        description="Admission, eviction and the bound of hash tables.",
    )
    embedding_dim: int = Field(
        default=_DEFAULT_MODEL.embedding_dim,
        description="The interaction's width, and every table's dim unless [[model.tables]] "
        "sets its own.",
    )
    pooling: Literal["sum", "mean"] = Field(
        default="sum", description="How a multi-hot bag's rows are pooled into one vector."
    )
    bottom_mlp: list[int] = Field(
        default=list(_DEFAULT_MODEL.bottom_mlp),
        description="Hidden layer widths of the MLP over the dense features (it ends at "
        "embedding_dim).",
    )
    top_mlp: list[int] = Field(
        default=list(_DEFAULT_MODEL.top_mlp),
        description="Hidden layer widths of the MLP over the interactions (it ends at one logit).",
    )
    data_norm: bool = Field(
        default=_DEFAULT_MODEL.data_norm,
        description="A data normalization layer (the batch's mean and scale) after each "
        "hidden layer of both MLPs.",
    )
