"""Header inference (io/columns.py, column_lists.py) on small tables made here:
id-like integers are categorical, counts, amounts and floats dense, lists of ids multi-hot bags;
what it infers is the schema a config with no declared columns trains on (and records)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from recsync.app.config.load import load_config
from recsync.io.column_lists import separated_list
from recsync.io.columns import infer_columns, table_sample
from recsync.io.formats.tabular.rows import TabularRowParser

AD_HEADER = (
    "clk,time_stamp,userid,adgroup_id,pid,cate_id,campaign_id,customer,brand,price,"
    "age_level,num_clicks,final_gender_code,click_sequence"
)


def ad_log(path, rows: int = 400, seed: int = 0) -> None:
    """An ad log shaped like Taobao's, small enough that every id column has few values
    (the names decide), with a `^`-separated list of clicked items."""
    rng = np.random.default_rng(seed)
    lines = []
    for _ in range(rows):
        clicks = "^".join(str(v) for v in rng.integers(100_000, 999_999, rng.integers(0, 4)))
        brand = "" if rng.random() < 0.2 else str(rng.integers(1, 30))
        lines.append(
            f"{int(rng.random() < 0.1)},{1_494_000_000 + rng.integers(0, 600_000)},"
            f"{rng.integers(1, 40)},{rng.integers(1, 60)},430548_100{rng.integers(0, 2)},"
            f"{rng.integers(1, 20)},{rng.integers(1, 50)},{rng.integers(1, 45)},{brand},"
            f"{rng.lognormal(4, 1):.2f},{rng.integers(0, 7)},{rng.poisson(2)},"
            f"{rng.integers(1, 3)},{clicks}"
        )
    path.write_text(AD_HEADER + "\n" + "\n".join(lines) + "\n")


def roles(path, label: str) -> dict[str, str]:
    found = infer_columns(table_sample(path, "csv"), label, str(path))
    return {r.name: r.role for r in found.roles}


def test_an_ad_log_reads_ids_by_name_counts_dense_and_the_click_list_as_a_bag(tmp_path):
    path = tmp_path / "ads.csv"
    ad_log(path)
    found = infer_columns(table_sample(path, "csv"), "clk", str(path))
    ids = ["userid", "adgroup_id", "pid", "cate_id", "campaign_id", "customer", "brand"]
    assert found.categorical == (*ids, "click_sequence")
    # few values each: age_level and the gender code are small codes, dense (declare them)
    assert found.dense == ("price", "age_level", "num_clicks", "final_gender_code")
    assert found.ignored == ("time_stamp",)
    assert found.multi_valued == (("click_sequence", "^"),)
    assert found.hashed == ("pid",)  # the clicked items are integer ids
    why = {r.name: r.why for r in found.roles}
    assert "thing with ids" in why["customer"] and "count" in why["num_clicks"]


def test_a_movielens_table_reads_its_ids_as_categorical(tmp_path):
    path = tmp_path / "ml_train.csv"
    rng = np.random.default_rng(1)
    lines = [
        f"{rng.integers(0, 2)},{rng.integers(1, 6041)},{rng.integers(1, 3953)},"
        f"{978_300_760 + rng.integers(0, 10**7)}"
        for _ in range(500)
    ]
    path.write_text("label,user_id,item_id,timestamp\n" + "\n".join(lines) + "\n")
    assert roles(path, "label") == {
        "label": "label",
        "user_id": "categorical",
        "item_id": "categorical",
        "timestamp": "left out",
    }


def test_counts_and_amounts_stay_dense_whatever_their_values():
    rng = np.random.default_rng(2)
    rows = 3000
    spread = rng.permutation(rows)  # evenly spread, no order: the values alone say ids
    table = pa.table(
        {
            "y": rng.integers(0, 2, rows),
            "num_clicks": spread,
            "view_count": spread,
            "price": spread,
            "n_items": spread,
            "rating": rng.integers(1, 6, rows),
            "score": rng.random(rows),  # floats: a measure
            "shop_ref": spread,  # no name rule: by the values, ids
        }
    )
    found = infer_columns(table, "y", "t")
    assert found.dense == ("num_clicks", "view_count", "price", "n_items", "rating", "score")
    assert found.categorical == ("shop_ref",)


def test_whole_floats_named_as_ids_are_categorical_and_read(tmp_path):
    # pandas writes an integer id column with nulls as floats: "17.0" and ""
    path = tmp_path / "pandas.csv"
    path.write_text("label,item_id,weight\n1,17.0,0.5\n0,,1.0\n1,3.0,2.5\n0,17.0,1.5\n")
    found = infer_columns(table_sample(path, "csv"), "label", str(path))
    assert found.categorical == ("item_id",) and found.dense == ("weight",)
    keys = {"data.source": "csv", "data.path": str(path), "data.test_fraction": 0.2}
    config = load_config(overrides=keys)
    files = config.to_specs().files
    assert files is not None
    bags = TabularRowParser(files.schema)(("1", "0.5", "17.0"))[1]
    assert len(bags) == 1 and len(bags[0]) == 1


@pytest.mark.parametrize(
    ("values", "separator", "hashed"),
    [
        (["1^2", "3", "4^5^6", None, ""], "^", False),
        (["red|blue", "sale"], "|", True),
        (["a;b", "c|d", "e;f"], ";", True),  # the separator in most values
        (["red, blue shoes", "green"], None, None),  # free text is not a list
        (["a^^b", "c^d"], None, None),  # an empty element: not a clean list
        (["430548_1007", "430539_1007"], None, None),
    ],
)
def test_a_separator_is_spotted_in_text_columns(values, separator, hashed):
    found = separated_list(pa.chunked_array([pa.array(values, pa.string())]))
    if separator is None:
        assert found is None
    else:
        assert found is not None and (found.separator, found.hashed) == (separator, hashed)


def test_the_inferred_schema_is_recorded_and_a_declared_one_used_as_is(tmp_path):
    path = tmp_path / "ads.csv"
    ad_log(path)
    keys = {"data.source": "csv", "data.path": str(path), "data.schema.label": "clk"}
    keys |= {"data.test_fraction": 0.2}
    schema = load_config(overrides=keys).dump()["data"]["schema"]
    assert schema["multi_valued"] == {"click_sequence": "^"}
    assert "num_clicks" in schema["dense"] and "customer" in schema["categorical"]
    declared = {
        **keys,
        "data.schema.dense": ["price", "customer"],  # a declared measure stays dense
        "data.schema.categorical": ["userid", "click_sequence"],
        "model.table_rows": 100,
    }
    schema = load_config(overrides=declared).dump()["data"]["schema"]
    assert schema["dense"] == ["price", "customer"] and schema["multi_valued"] == {}
