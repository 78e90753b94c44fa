"""The run configuration (recsync.app.config): defaults, overrides, errors."""

from __future__ import annotations

import json
import tomllib
from dataclasses import fields

import pytest

from recsync.app.config.load import load_config, parse_overrides
from recsync.app.config.schema import Config
from recsync.app.runs.run_dir import toml_text
from recsync.coordinator.spec import JobSpec
from recsync.data.synthetic import SyntheticSpec
from recsync.errors import ConfigError
from recsync.io.formats.tabular.rows import TabularSchema
from recsync.optim.swap import Swap
from recsync.strategy.family import family_of
from recsync.strategy.timing import Timing


def write(tmp_path, text: str):
    path = tmp_path / "run.toml"
    path.write_text(text)
    return path


def config_error(tmp_path, text: str, overrides=None) -> str:
    with pytest.raises(ConfigError) as caught:
        load_config(write(tmp_path, text), overrides or {})
    return str(caught.value)


def test_default_config_is_the_reference_dlrm_on_the_synthetic_task():
    config = load_config(None, {})
    specs = config.to_specs()
    assert config.data.source == "synthetic"
    assert specs.synthetic == SyntheticSpec()  # sizes are the dataclass's own defaults
    assert specs.model.embedding_dim == 16
    assert specs.model.bottom_mlp == (512, 256, 64)
    assert specs.model.top_mlp == (512, 256)
    assert [t.num_rows for t in specs.model.tables] == list(SyntheticSpec().table_rows)
    assert specs.train.batch_size == 256
    assert specs.train.dense_optimizer.name == specs.train.sparse_optimizer.name == "adagrad"
    assert specs.files is None


def test_synthetic_section_mirrors_every_dataclass_field():
    section = load_config().data.synthetic
    assert set(type(section).model_fields) == {f.name for f in fields(SyntheticSpec)}


def test_file_and_overrides_layer_on_the_default(tmp_path):
    path = write(tmp_path, "[train]\nbatch_size = 64\n[model]\nembedding_dim = 8\n")
    overrides = parse_overrides(
        ["train.sparse_optimizer.lr=0.1", "run.name=exp-1", "model.top_mlp=[32, 16]"]
    )
    config = load_config(path, overrides)
    specs = config.to_specs()
    assert specs.train.batch_size == 64
    assert specs.model.embedding_dim == 8
    assert specs.model.top_mlp == (32, 16)
    assert specs.model.bottom_mlp == (512, 256, 64)  # untouched default
    assert specs.train.sparse_optimizer.lr == 0.1
    assert config.run.name == "exp-1"


def test_swap_section_builds_the_swap_spec():
    config = load_config(None, {"train.sparse_optimizer.swap": {"decay": 0.5, "period": 100}})
    assert config.to_specs().train.sparse_optimizer.swap == Swap(0.5, 100)


def test_dense_swap_section_builds_the_swap_spec():
    config = load_config(None, {"train.dense_optimizer.swap": {"decay": 0.8, "period": 50}})
    assert config.to_specs().train.dense_optimizer.swap == Swap(0.8, 50)


def test_unknown_key_names_the_dotted_key_and_the_file(tmp_path):
    message = config_error(tmp_path, "[model]\nbogus = 1\n")
    assert "model.bogus: unknown key" in message
    assert str(tmp_path / "run.toml") in message


def test_unknown_nested_key(tmp_path):
    message = config_error(tmp_path, "[train.sparse_optimizer]\nlearning_rate = 0.1\n")
    assert "train.sparse_optimizer.learning_rate: unknown key" in message


def test_wrong_type_names_the_dotted_key(tmp_path):
    message = config_error(tmp_path, '[train.sparse_optimizer]\nlr = "fast"\n')
    assert "train.sparse_optimizer.lr: Input should be a valid number" in message


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('[train]\nbatch_size = "64"\n', "train.batch_size: Input should be a valid integer"),
        ("[train]\nbatch_size = 64.0\n", "train.batch_size: Input should be a valid integer"),
        ("[run]\ntensorboard = 1\n", "run.tensorboard: Input should be a valid boolean"),
        ('[model]\nbottom_mlp = [64, "x"]\n', "model.bottom_mlp[1]: Input should be a valid"),
        ('[model]\npooling = "max"\n', "model.pooling: Input should be 'sum' or 'mean'"),
        ('[data]\nsource = "xml"\n', "data.source: Input should be"),
        ("[data.synthetic]\nnum_train = [1]\n", "data.synthetic.num_train: Input should be"),
    ],
)
def test_wrong_types_are_rejected(tmp_path, text, expected):
    assert expected in config_error(tmp_path, text)


def test_value_rejected_by_a_dataclass_names_the_section(tmp_path):
    message = config_error(tmp_path, '[train.sparse_optimizer]\nname = "nope"\n')
    assert "train.sparse_optimizer: unknown sparse optimizer 'nope'" in message
    message = config_error(tmp_path, "[train.sparse_optimizer.swap]\ndecay = 0.5\nperiod = 0\n")
    assert "train.sparse_optimizer.swap.period: swap.period must be >= 1" in message
    assert "data.synthetic: " in config_error(tmp_path, "[data.synthetic]\nbase_ctr = 2.0\n")
    assert "model: " in config_error(tmp_path, "[model]\nembedding_dim = 0\n")


def test_missing_required_swap_key(tmp_path):
    message = config_error(tmp_path, "[train.sparse_optimizer.swap]\ndecay = 0.5\n")
    assert "train.sparse_optimizer.swap.period: required key is missing" in message


def test_model_must_match_the_synthetic_data(tmp_path):
    assert "model.num_dense: 3 dense features, but the data has 13" in config_error(
        tmp_path, "[model]\nnum_dense = 3\n"
    )
    assert "model.table_rows: must equal data.synthetic.table_rows" in config_error(
        tmp_path, "[model]\ntable_rows = 7\n"
    )


def test_overrides_are_validated_too():
    with pytest.raises(ConfigError, match=r"with model\.bogus overridden: model\.bogus: unknown"):
        load_config(None, {"model.bogus": 1})
    many = {f"run.k{i}": 1 for i in range(6)}
    with pytest.raises(ConfigError, match=r"run\.k3 and 2 more overridden: run\.k0: unknown"):
        load_config(None, many)
    with pytest.raises(ConfigError, match="train.batch_size: is a value, not a table"):
        load_config(None, {"train.batch_size.x": 1})


def test_parse_overrides_reads_toml_values_or_bare_strings():
    assert parse_overrides(["a.b=1", "c=0.5", "d=true", "e=[1, 2]", "f=hello", 'g="7"']) == {
        "a.b": 1,
        "c": 0.5,
        "d": True,
        "e": [1, 2],
        "f": "hello",
        "g": "7",
    }
    with pytest.raises(ConfigError, match="expected key=value"):
        parse_overrides(["novalue"])


def test_invalid_toml_names_the_file(tmp_path):
    message = config_error(tmp_path, "[run\n")
    assert "invalid TOML" in message and "run.toml" in message


def test_csv_source_builds_a_tabular_reader_schema(tmp_path):
    text = """
[data]
source = "csv"
path = "train.csv"
test_fraction = 0.1
[data.schema]
dense = ["a", "b"]
categorical = ["u", "v", "w"]
hashed = ["w"]
null_dense = "skip"
[model]
table_rows = 100
"""
    specs = load_config(write(tmp_path, text)).to_specs()
    assert specs.synthetic is None
    assert specs.files.fmt == "csv"
    assert specs.files.schema == TabularSchema(
        "label", ("a", "b"), ("u", "v", "w"), (100, 100, 100), hashed=("w",), null_dense=None
    )
    assert specs.model.num_dense == 2
    assert [t.name for t in specs.model.tables] == ["u", "v", "w"]


def test_file_data_needs_a_path_a_held_out_set_and_fixed_tables_their_rows(tmp_path):
    assert "data.path: required" in config_error(tmp_path, '[data]\nsource = "criteo"\n')
    no_test = '[data]\nsource = "criteo"\npath = "x"\n[model]\ntable_rows = 10\n'
    assert "data.test_path: file data needs a held-out set" in config_error(tmp_path, no_test)
    no_rows = '[data]\nsource = "criteo"\npath = "x"\ntest_fraction = 0.1\n'
    fixed = no_rows + '[model]\ntable_kind = "fixed"\n'
    assert "model.table_rows: required when data.source is 'criteo'" in config_error(
        tmp_path, fixed
    )
    hashed = load_config(write(tmp_path, no_rows)).to_specs()  # hash tables need no rows
    assert hashed.model.hash_tables is not None and hashed.files.schema.keyed


def test_criteo_defaults_to_13_dense_and_26_tables(tmp_path):
    text = '[data]\nsource = "criteo"\npath = "x"\ntest_path = "y"\n[model]\ntable_rows = 10\n'
    specs = load_config(write(tmp_path, text)).to_specs()
    assert specs.model.num_dense == 13 and specs.model.num_features == 26
    assert specs.files.schema.table_rows == (10,) * 26


def test_dump_is_json_and_its_toml_loads_back_equal(tmp_path):
    config = load_config(
        None,
        {
            "run.name": "x",
            "train.sparse_optimizer.swap.decay": 0.5,
            "train.sparse_optimizer.swap.period": 10,
        },
    )
    json.dumps(config.dump())
    tree = tomllib.loads(toml_text(config.dump()))
    assert Config.model_validate(tree) == config
    assert load_config(write(tmp_path, toml_text(config.dump()))) == config


def test_strategy_and_cluster_sections_build_specs():
    from recsync.app.config.load import load_config

    specs = load_config(
        None,
        {
            "strategy.name": "bmuf",
            "strategy.timing.mode": "fixed",
            "strategy.timing.every_iterations": 5,
            "strategy.block_momentum": 0.5,
            "cluster.num_trainers": 3,
            "cluster.trainer_slowdown": [1.0, 2.0, 4.0],
        },
    ).to_specs()
    assert specs.strategy.describe().startswith("FR-BMUF-5")
    assert specs.strategy.block_momentum == 0.5
    assert specs.cluster.num_trainers == 3 and specs.cluster.slowdown(2) == 4.0
    assert load_config(None, {"strategy.name": "reference"}).to_specs().strategy is None


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"strategy.name": "hogwild"}, "strategy.name: 'hogwild' is none of 'reference', "),
        ({"strategy.timing.mode": "fixed"}, "strategy.timing.mode: mode='fixed' takes exactly"),
        ({"strategy.alpha": 1.5}, r"strategy.alpha: alpha must be a number in \(0, 1\]"),
        ({"cluster.num_trainers": 0}, "cluster.num_trainers"),
        ({"cluster.trainer_slowdown": [1.0]}, "cluster.trainer_slowdown"),
        ({"strategy.name": "allreduce"}, "cluster.workers_per_trainer: all-reduce runs one"),
        (
            {"strategy.name": "gba", "cluster.num_dense_servers": 0},
            "cluster.num_dense_servers: GBA .* dense server, got 0",
        ),
        (
            {"strategy.name": "easgd", "cluster.num_dense_servers": 0},
            "cluster.num_dense_servers: S-EASGD .* sync server, got 0",
        ),
        (
            {"strategy.name": "hierarchical", "cluster.num_dense_servers": 0},
            "cluster.num_dense_servers: HT .* group PS a group, got 0",
        ),
        (
            {
                "strategy.timing.mode": "fixed",
                "strategy.timing.every_seconds": 1.0,
                "cluster.worker_processes": True,
            },
            "cluster.worker_processes: not with FR-EASGD.*every P seconds",
        ),
        (
            {
                "strategy.name": "ma",
                "strategy.timing.mode": "fixed",
                "strategy.timing.every_iterations": 4,
                "cluster.worker_processes": True,
            },
            "cluster.worker_processes: not with FR-MA-4.*collective",
        ),
    ],
)
def test_strategy_and_cluster_errors_name_the_key(overrides, message):
    from recsync.app.config.load import load_config

    with pytest.raises(ConfigError, match=message):
        load_config(None, overrides).to_specs()


def test_one_key_counts_the_servers_of_the_dense_part_of_every_strategy():
    from recsync.app.config.load import load_config

    def servers(strategy: str, count: int | None = None) -> int:
        keys = {"strategy.name": strategy}
        if count is not None:
            keys["cluster.num_dense_servers"] = count
        specs = load_config(overrides=keys).to_specs()
        spec = JobSpec(specs.model, specs.train, specs.cluster, specs.strategy, specs.synthetic)
        return family_of(spec.strategy).dense_nodes(spec)

    assert [servers(s) for s in ("gba", "easgd", "hierarchical", "ma")] == [1, 1, 3, 0]
    # gba's dense servers, EASGD's sync servers, HT's 2 groups of 2 group PSs + 2 sync servers
    assert [servers(s, 2) for s in ("gba", "easgd", "hierarchical", "ma")] == [2, 2, 6, 0]


@pytest.mark.parametrize(
    ("keys", "old", "written"),
    [
        ({"cluster.num_sync_servers": 2}, "cluster.num_sync_servers", 2),
        ({"strategy.name": "gba", "cluster.num_sync_servers": 3}, "cluster.num_sync_servers", 3),
        (
            {"strategy.name": "hierarchical", "strategy.group_servers": 3},
            "strategy.group_servers",
            3,
        ),
    ],
)
def test_the_retired_counts_of_dense_part_servers_are_refused_by_name(keys, old, written):
    from recsync.app.config.load import load_config

    with pytest.raises(ConfigError) as refused:
        load_config(overrides=keys)
    message = str(refused.value)
    assert f"{old} is no longer a key" in message
    assert f"write cluster.num_dense_servers = {written}" in message


def test_a_saved_config_with_a_retired_count_is_refused_naming_its_file(tmp_path):
    """A run directory's config.toml (what --resume reads) is refused as any file is."""
    saved = tmp_path / "config.toml"
    saved.write_text('[cluster]\nnum_sync_servers = 2\n\n[strategy]\nname = "easgd"\n')
    with pytest.raises(ConfigError, match=f"^{saved}: cluster.num_sync_servers is no longer"):
        load_config(saved)


@pytest.mark.parametrize(
    ("asked", "workers", "strategy", "timing", "split"),
    [
        (None, 2, "easgd", None, True),
        (None, 2, "async", None, True),
        (None, 1, "easgd", None, False),
        (True, 1, "allreduce", None, False),
        (None, 2, "easgd", Timing("fixed", every_seconds=1.0), False),
        (None, 2, "ma", Timing("fixed", every_iterations=3), False),
        (None, 2, "easgd", Timing("fixed", every_iterations=3), True),
        (False, 2, "easgd", None, False),
    ],
)
def test_workers_run_in_processes_where_the_strategy_allows(
    asked, workers, strategy, timing, split
):
    from recsync.coordinator.spec import ClusterSpec
    from recsync.coordinator.topology import split_workers
    from recsync.families import strategy_config

    fields = {} if timing is None else {"timing": timing}
    cluster = ClusterSpec(2, workers, 2, worker_processes=asked)
    assert split_workers(cluster, strategy_config(strategy, **fields)) is split
    if split:  # unset, the cores decide: a CPU per worker (2 trainers here), or threads
        enough, short = 2 * workers, 2 * workers - 1
        assert split_workers(cluster, strategy_config(strategy, **fields), enough)
        assert split_workers(cluster, strategy_config(strategy, **fields), short) is (asked is True)
