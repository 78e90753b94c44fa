"""The run configuration's schema: one pydantic model per section ([run], [data], [model],
[train], [cluster], [strategy], [recovery], [simulate]), turned into specs by
`Config.to_specs`. The simulator's cost profile is a file of its own ([simulate] profile,
read by app/runs/cost_profile.py); an inline [cost] table is still accepted, deprecated.

Loading and layering (default, file, overrides) is in `config_load`. Unknown keys and wrong
types raise `ConfigError` naming the file and the full dotted key; values the spec
dataclasses reject (their ValueError) raise `ConfigError` naming the section. Sections that
mirror a spec dataclass ([data.synthetic], [train.*_optimizer]) are generated from its
fields, so they follow it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeAlias

from pydantic import Field, ModelWrapValidatorHandler, PrivateAttr, model_validator

from recsync.app.config.base import Section, build_dataclass, section_from_dataclass
from recsync.app.config.data import TABULAR_FORMATS, DataSection, file_paths, reader_schema
from recsync.app.config.job import ClusterSection, check_cluster_fits, check_model_fits
from recsync.app.config.model import ModelSection
from recsync.app.config.run import RecoverySection, RunSection, SimulateSection
from recsync.app.config.strategy import (
    StrategySection,
    default_strategy,
    rewrite_flat_keys,
    strategy_spec,
)
from recsync.app.config.tables import listed_tables, mixed_rows, own_policies, table_kinds
from recsync.coordinator.spec import ClusterSpec
from recsync.data.synthetic import SyntheticSpec
from recsync.errors import ConfigError
from recsync.io.sources import FileData
from recsync.model.hash_spec import Admission, Eviction, HashTables
from recsync.model.spec import ModelSpec, TableKind, TableSpec
from recsync.optim.dense import DenseOptimizerSpec
from recsync.optim.rowwise import RowOptimizerSpec
from recsync.optim.train_spec import TrainSpec
from recsync.strategy.config import StrategyConfig

CRITEO_DENSE, CRITEO_TABLES = 13, 26
_DEFAULT_TRAIN = TrainSpec()


if TYPE_CHECKING:  # the generated sections, as far as this module reads them
    DenseOptimizerSection: TypeAlias = Section
    SparseOptimizerSection: TypeAlias = Section
else:
    DenseOptimizerSection = section_from_dataclass(DenseOptimizerSpec)
    SparseOptimizerSection = section_from_dataclass(RowOptimizerSpec)


class TrainSection(Section):
    """[train]: batch size, passes over the data, and the dense and sparse optimizers."""

    batch_size: int = Field(
        default=_DEFAULT_TRAIN.batch_size, description="Examples in a worker's batch."
    )
    epochs: int = Field(
        default=_DEFAULT_TRAIN.epochs,
        description="Passes over the training data (--epochs); the first in the data's order.",
    )
    shuffle_buffer: int = Field(
        default=_DEFAULT_TRAIN.shuffle_buffer,
        description="Later passes are shuffled within blocks of this many examples (0: in order).",
    )
    dense_optimizer: DenseOptimizerSection = Field(
        default_factory=DenseOptimizerSection,
        description="The optimizer of the dense part (the MLPs).",
    )
    sparse_optimizer: SparseOptimizerSection = Field(
        default_factory=SparseOptimizerSection,
        description="The row-wise optimizer of the embedding tables.",
    )


@dataclass(frozen=True)
class RunSpecs:
    """Everything a run needs, as the specs the lower layers take."""

    model: ModelSpec
    train: TrainSpec
    synthetic: SyntheticSpec | None
    files: FileData | None
    cluster: ClusterSpec
    strategy: StrategyConfig | None = None


class Config(Section):
    """A whole validated run configuration."""

    run: RunSection = Field(
        default_factory=RunSection, description="The run's name, seed and bookkeeping."
    )
    data: DataSection = Field(default_factory=DataSection, description="Where examples come from.")
    model: ModelSection = Field(
        default_factory=ModelSection, description="The model's shape and its tables."
    )
    train: TrainSection = Field(
        default_factory=TrainSection, description="Batches, passes and optimizers."
    )
    cluster: ClusterSection = Field(
        default_factory=ClusterSection, description="The nodes of a distributed run."
    )
    strategy: StrategySection = Field(
        default_factory=default_strategy,
        description='How the nodes synchronize (the default: name = "easgd").',
    )
    recovery: RecoverySection = Field(
        default_factory=RecoverySection, description="What a run does when it loses a node."
    )
    simulate: SimulateSection = Field(
        default_factory=SimulateSection, description="How the simulator prices a run."
    )
    # deprecated: the cost profile inline; checked by app/runs/cost_profile.py
    cost: dict[str, Any] | None = Field(
        default=None,
        description="Deprecated: the cost profile's [cost] table inline; name a profile file "
        "in [simulate] profile instead.",
        json_schema_extra={"unset": "the cost profile's prices alone"},
    )
    _deprecations: list[str] = PrivateAttr(default_factory=list)

    @model_validator(mode="wrap")
    @classmethod
    def _rewrite_deprecated(cls, data: Any, handler: ModelWrapValidatorHandler[Config]) -> Config:
        """Old spellings of [strategy] keys moved to their place, each noted for
        `deprecations`."""
        messages: list[str] = []
        if isinstance(data, dict) and isinstance(data.get("strategy"), dict):
            strategy, messages = rewrite_flat_keys(data["strategy"])
            data = {**data, "strategy": strategy}
        config = handler(data)
        config._deprecations = messages
        return config

    def to_specs(self) -> RunSpecs:
        """The specs; raises ConfigError naming the key or section of a rejected value."""
        synthetic = (
            build_dataclass(SyntheticSpec, self.data.synthetic, "data.synthetic")
            if self.data.source == "synthetic"
            else None
        )
        if synthetic is not None:  # the synthetic ids are keys exactly when tables hash
            synthetic = dataclasses.replace(synthetic, keyed=self.hashed_tables)
        if synthetic is None:
            self._check_file_keys()
        model = self._model_spec()
        train = build_dataclass(
            TrainSpec,
            {
                "batch_size": self.train.batch_size,
                "epochs": self.train.epochs,
                "shuffle_buffer": self.train.shuffle_buffer,
                "seed": self.run.seed,
                "dense_optimizer": build_dataclass(
                    DenseOptimizerSpec, self.train.dense_optimizer, "train.dense_optimizer"
                ),
                "sparse_optimizer": build_dataclass(
                    RowOptimizerSpec, self.train.sparse_optimizer, "train.sparse_optimizer"
                ),
            },
            "train",
        )
        files = None if synthetic else self._file_data(model)
        strategy = strategy_spec(self.strategy)
        if strategy is not None:
            try:
                self.recovery.to_spec().check(strategy)
            except ValueError as error:
                raise ConfigError(f"recovery.{error}") from None
        check_model_fits(model, strategy)
        cluster = self.cluster.to_spec()
        check_cluster_fits(cluster, strategy)
        return RunSpecs(
            model=model,
            train=train,
            synthetic=synthetic,
            files=files,
            cluster=cluster,
            strategy=strategy,
        )

    def deprecations(self) -> list[str]:
        """Keys given in a deprecated way, with what to write instead."""
        messages = list(self._deprecations)
        if self.cost is not None:
            messages.append(
                "[cost] in the job config (or --set cost.KEY=...) is deprecated: put the "
                "table in a cost profile file, as `recsync calibrate` writes it, and pass it "
                "with `recsync simulate --profile FILE` or name it in [simulate] profile"
            )
        return messages

    def dump(self) -> dict[str, Any]:
        """The resolved configuration as JSON-ready nested dicts (None for unset keys);
        `load_config` of it, written as TOML without the None keys, gives an equal Config."""
        return self.model_dump(mode="json", by_alias=True)

    def _data_shape(self) -> tuple[int | None, int | None, tuple[int, ...] | None]:
        """(num_dense, num_tables, table_rows) the data dictates; None where it is free."""
        data = self.data
        if data.source == "synthetic":
            rows = tuple(data.synthetic.table_rows)
            return data.synthetic.num_dense, len(rows), rows
        if data.source == "criteo":
            return None, None, None
        if data.source == "libsvm":
            return len(data.libsvm.dense_indices), 1, None
        if data.source == "libffm":
            return len(data.libffm.dense_fields), None, None
        return len(data.table_schema.dense), len(data.table_schema.categorical), None

    @property
    def hashed_tables(self) -> bool:
        """Whether any table is a hash table (model.table_kind, "auto" resolved, and the
        kinds [[model.tables]] gives)."""
        return "hash" in table_kinds(self.model, self.data.source)

    def _model_spec(self) -> ModelSpec:
        m, source = self.model, self.data.source
        data_dense, data_tables, data_rows = self._data_shape()
        num_dense = _agree("model.num_dense", m.num_dense, data_dense, "dense features")
        num_tables = _agree("model.num_tables", m.num_tables, data_tables, "tables")
        tabular = source in TABULAR_FORMATS
        entries = listed_tables(
            m, source, num_tables, list(self.data.table_schema.categorical) if tabular else None
        )
        kinds = table_kinds(m, source)
        mixed = len(set(kinds)) > 1
        if entries is not None:
            num_tables = len(entries)
            if all(t.rows is not None for t in entries):
                m = m.model_copy(update={"table_rows": [t.rows for t in entries]})
            elif mixed and m.table_rows is None:
                m = m.model_copy(update={"table_rows": mixed_rows(entries, kinds, data_rows)})
            elif any(t.rows is not None for t in entries):
                i = next(i for i, t in enumerate(entries) if t.rows is None)
                raise ConfigError(f"model.tables[{i}].rows: give every table's rows, or none")
        rows = m.table_rows
        if isinstance(rows, list) and num_tables is not None and len(rows) != num_tables:
            raise ConfigError(f"model.table_rows: {len(rows)} tables, but there are {num_tables}")
        if source == "criteo":
            num_dense = CRITEO_DENSE if num_dense is None else num_dense
            num_tables = CRITEO_TABLES if num_tables is None else num_tables
        if num_tables == 0:
            raise ConfigError(
                "model: the data has no categorical feature (data.schema lists none): a DLRM "
                "learns from embedding tables, which need at least one categorical column "
                "(an id, or a bucketized value); list it in data.schema.categorical"
            )
        if rows is None and data_rows is None and self.hashed_tables:
            if num_tables is None:
                raise ConfigError(
                    f"model.num_tables: required when data.source is {source!r}: the number "
                    "of categorical features (libffm: its categorical fields)"
                )
            rows = [1] * num_tables  # hash tables grow; the expected rows are unknown
        if rows is None:
            if data_rows is None:
                listed = f"a list of {num_tables}" if num_tables else "a list, one per table"
                raise ConfigError(
                    f"model.table_rows: required when data.source is {source!r}: the rows of "
                    "each categorical feature's embedding table (ids are taken modulo it, "
                    "strings hashed into it); one number for every table (e.g. --set "
                    f"model.table_rows=100000) or {listed}"
                )
            rows = list(data_rows)
        elif isinstance(rows, int):
            if num_tables is None:
                raise ConfigError("model.num_tables: required when model.table_rows is one int")
            rows = [rows] * num_tables
        if data_rows is not None and tuple(rows) != data_rows:
            raise ConfigError(
                "model.table_rows: must equal data.synthetic.table_rows (the ids the data has)"
            )
        names = (
            self.data.table_schema.categorical
            if tabular
            else [f"C{i + 1}" for i in range(len(rows))]
        )
        dims = [m.embedding_dim] * len(rows)
        if entries is not None:
            names = [t.name for t in entries]
            dims = [m.embedding_dim if t.dim is None else t.dim for t in entries]
        hash_tables = (
            build_dataclass(HashTables, m.hash_tables, "model.hash_tables")
            if self.hashed_tables
            else None
        )
        policies: list[tuple[Admission | None, Eviction | None]] = [(None, None)] * len(rows)
        if entries is not None and hash_tables is not None:
            policies = [own_policies(i, t, hash_tables) for i, t in enumerate(entries)]
        own_kinds: list[TableKind | None] = [None] * len(rows)
        if mixed:  # fixed tables among hash tables
            own_kinds = ["fixed" if k == "fixed" else None for k in kinds]
        try:
            tables = tuple(
                TableSpec(name, r, dim, m.pooling, admission, eviction, kind)
                for name, r, dim, (admission, eviction), kind in zip(
                    names, rows, dims, policies, own_kinds, strict=True
                )
            )
            return ModelSpec(
                num_dense=num_dense or 0,
                tables=tables,
                bottom_mlp=tuple(m.bottom_mlp),
                top_mlp=tuple(m.top_mlp),
                data_norm=m.data_norm,
                hash_tables=hash_tables,
                interaction_dim=None if entries is None else m.embedding_dim,
            )
        except ValueError as error:
            raise ConfigError(f"model: {error}") from None

    def _check_file_keys(self) -> None:
        data = self.data
        if data.path is None:
            raise ConfigError(f"data.path: required when data.source is {data.source!r}")
        if data.test_path is not None and data.test_fraction > 0:
            raise ConfigError("data.test_path: give either data.test_path or data.test_fraction")
        if data.test_path is None and data.test_fraction == 0:
            raise ConfigError(
                "data.test_path: file data needs a held-out set: set data.test_path "
                "or data.test_fraction"
            )

    def _file_data(self, model: ModelSpec) -> FileData:
        data, rows = self.data, tuple(t.num_rows for t in model.tables)
        try:
            schema = reader_schema(data, model, rows)
        except ValueError as error:
            section = {"libsvm": "data.libsvm", "libffm": "data.libffm"}.get(
                data.source, "data.schema"
            )
            raise ConfigError(f"{section}: {error}") from None
        return FileData(
            paths=file_paths(data.path, data.storage),
            fmt=data.source,
            schema=schema,
            strict=data.strict,
            test_paths=file_paths(data.test_path, data.storage, "data.test_path"),
            test_fraction=data.test_fraction,
            test_max_examples=data.test_max_examples,
            dense_log1p=data.table_schema.dense_log1p and data.source in TABULAR_FORMATS,
            fixed_rows=model.fixed_rows,
        )


def _agree(key: str, given: int | None, dictated: int | None, what: str) -> int | None:
    if given is not None and dictated is not None and given != dictated:
        raise ConfigError(f"{key}: {given} {what}, but the data has {dictated}")
    return given if given is not None else dictated
