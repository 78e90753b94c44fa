"""`recsync data inspect` on tables with no declared schema: it never crashes on a readable
file, says per column what it inferred and why (io/columns.py's rule), and
`simulate` trains on what it inferred with no hand-written schema."""

from __future__ import annotations

import json
import re

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import torch
from test_cli import config_file, invoke
from test_formats import sets

from recsync.data.batch import Batch, concat
from recsync.io.columns import infer_columns

AD_HEADER = "clk,time_stamp,userid,adgroup_id,pid,cate_id,campaign_id,customer,brand,price"


def role_of(output: str, column: str) -> str:
    """The 'read as' cell of `column`'s row in inspect's table of inferred columns."""
    found = re.search(rf"│ {re.escape(column)} +│ [^│]+│ ([a-z ]+?) +│", output)
    assert found, output
    return found.group(1)


def popular_ids(rng: np.random.Generator, rows: int, vocab: int, high: int) -> np.ndarray:
    """Ids drawn from a range, Zipf-popular in an order unrelated to their value."""
    values = rng.choice(np.arange(1, high), size=vocab, replace=False)
    weights = 1.0 / np.arange(1, vocab + 1) ** 1.1
    return values[rng.choice(vocab, size=rows, p=weights / weights.sum())]


def ad_log(path, rows: int = 5000) -> None:
    """An ad click log shaped like Taobao's (raw_sample joined with ad_feature)."""
    rng = np.random.default_rng(0)
    columns = [
        (rng.random(rows) < 0.2).astype(int),
        1_494_000_000 + rng.integers(0, 8 * 86_400, rows),
        popular_ids(rng, rows, 2000, 1_141_730),
        popular_ids(rng, rows, 1500, 846_812),
        rng.choice(["430548_1007", "430539_1007"], rows),
        popular_ids(rng, rows, 300, 12_961),
        popular_ids(rng, rows, 800, 423_437),
        popular_ids(rng, rows, 700, 255_876),
        popular_ids(rng, rows, 600, 461_498),
        np.round(np.exp(rng.normal(5, 1.5, rows)), 2),
    ]
    lines = (",".join(map(str, row)) for row in zip(*columns, strict=True))
    path.write_text(AD_HEADER + "\n" + "\n".join(lines) + "\n")


def ratings(path, rows: int = 3000) -> None:
    """MovieLens-like clicks: label,user_id,item_id,timestamp, all integers; the label
    depends on the user and the item."""
    rng = np.random.default_rng(1)
    users, items = rng.integers(1, 300, rows), rng.integers(1, 200, rows)
    labels = ((users % 3 == 0) ^ (items % 2 == 0)).astype(int)
    times = 978_300_000 + rng.integers(0, 10**6, rows)
    lines = (f"{a},{b},{c},{d}" for a, b, c, d in zip(labels, users, items, times, strict=True))
    path.write_text("label,user_id,item_id,timestamp\n" + "\n".join(lines) + "\n")


def test_a_table_with_no_categorical_column_over_several_blocks_is_inspected(tmp_path):
    # the crash: a table read as dense only, past one CSV block (1 MiB), re-cut batches of
    # no categorical feature and concat's torch.cat had no tensors to join
    path = tmp_path / "measures.csv"
    rows = 80_000
    path.write_text(
        "label,age,price\n" + "".join(f"{i % 2},{i % 60},{i % 97}.25\n" for i in range(rows))
    )
    result = invoke("data", "inspect", str(path))
    assert result.exit_code == 0, result.output
    assert f"{rows:,}" in result.output
    assert role_of(result.output, "age") == "dense" and role_of(result.output, "price") == "dense"
    assert "no column reads as categorical" in result.output  # what the user must declare


def test_batches_with_no_categorical_feature_concatenate_and_slice():
    def dense_only(size: int) -> Batch:
        no_ids = torch.zeros(0, dtype=torch.int64)
        return Batch(
            torch.ones(size, 2), no_ids, torch.zeros(1, dtype=torch.int64), torch.ones(size)
        )

    joined = concat([dense_only(3), dense_only(2)])
    assert joined.batch_size == 5 and joined.num_features == 0 and joined.ids.numel() == 0
    part = joined.slice(1, 4)
    assert part.batch_size == 3 and part.offsets.tolist() == [0] and part.dense.shape == (3, 2)


def test_integer_ids_of_a_ratings_table_read_as_categorical_and_its_times_are_left_out(tmp_path):
    path = tmp_path / "ml_train.csv"
    ratings(path)
    result = invoke("data", "inspect", str(path))
    assert result.exit_code == 0, result.output
    roles = {c: role_of(result.output, c) for c in ("label", "user_id", "item_id", "timestamp")}
    assert roles == {
        "label": "label",
        "user_id": "categorical",
        "item_id": "categorical",
        "timestamp": "left out",
    }
    assert "left out: timestamp" in result.output


def test_an_ad_log_reads_ids_as_categorical_price_dense_and_time_left_out(tmp_path):
    path = tmp_path / "ads.csv"
    ad_log(path)
    result = invoke("data", "inspect", str(path), "--label", "clk")
    assert result.exit_code == 0, result.output
    expected = {"clk": "label", "time_stamp": "left out", "pid": "categorical", "price": "dense"}
    expected |= dict.fromkeys(
        ["userid", "adgroup_id", "cate_id", "campaign_id", "customer", "brand"], "categorical"
    )
    assert {c: role_of(result.output, c) for c in expected} == expected
    assert "--set data.schema.label=clk" in result.output
    # without --label: the error names the 0/1 column to pick
    unlabelled = invoke("data", "inspect", str(path))
    assert unlabelled.exit_code == 1 and "clk holds only 0 and 1" in unlabelled.output


def test_measures_stay_dense_and_ids_by_value_are_categorical():
    rng = np.random.default_rng(2)
    rows = 4000
    table = pa.table(
        {
            "label": rng.integers(0, 2, rows),
            "clicks": np.floor(np.exp(rng.normal(3, 1.5, rows))).astype(np.int64),
            "height_mm": np.round(rng.normal(1700, 70, rows)).astype(np.int64),
            "age": rng.integers(18, 80, rows),
            "I1": popular_ids(rng, rows, 500, 10**6),  # named as a count
            "paid": np.round(np.exp(rng.normal(7, 1, rows))).astype(np.int64),  # not an id
            "vendor_ref": popular_ids(rng, rows, 900, 10**6),  # ids by their values
            "C3": rng.integers(0, 5, rows),
            "score": rng.random(rows),
            "created_time": rng.integers(0, 40, rows),  # a duration, not a Unix time
        }
    )
    found = infer_columns(table, "label", "t")
    why = {r.name: r.why for r in found.roles}
    assert found.categorical == ("vendor_ref", "C3"), why
    assert found.dense == ("clicks", "height_mm", "age", "I1", "paid", "score", "created_time"), why
    assert "not ordered like a measure" in why["vendor_ref"] and "named as an id" in why["C3"]


def test_simulate_trains_on_an_integer_id_csv_with_no_schema(tmp_path):
    path = tmp_path / "ml.csv"
    ratings(path, rows=1500)
    keys = {"data.source": "csv", "data.path": path.as_posix(), "data.test_fraction": "0.2"}
    result = invoke(
        "simulate", "-c", config_file(tmp_path), "--name", "ml", "--no-progress",
        "--strategy", "async", *sets(**keys),
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    run = tmp_path / "runs" / "ml"
    summary = json.loads((run / "summary.json").read_text())
    assert summary["examples_trained"] > 0 and summary["test_auc"] is not None
    toml = (run / "config.toml").read_text()
    assert 'categorical = ["user_id", "item_id"]' in toml and "dense = []" in toml
    schema = json.loads((run / "config.json").read_text())["data"]["schema"]
    assert schema["categorical"] == ["user_id", "item_id"] and schema["dense"] == []


def with_click_lists(path, rows: int = 1500) -> None:
    """A ratings-like table with a `^`-separated list of clicked items that decides the
    label."""
    rng = np.random.default_rng(4)
    lines = []
    for _ in range(rows):
        clicks = rng.integers(1, 60, rng.integers(1, 4))
        label = int((clicks % 5 == 0).any())
        clicks_text = "^".join(map(str, clicks))
        lines.append(f"{label},{rng.integers(1, 300)},{rng.random():.3f},{clicks_text}")
    path.write_text("clk,userid,score,click_sequence\n" + "\n".join(lines) + "\n")


def test_a_click_list_is_inspected_as_a_bag_and_trained_on(tmp_path):
    path = tmp_path / "clicks.csv"
    with_click_lists(path)
    result = invoke("data", "inspect", str(path), "--label", "clk")
    assert result.exit_code == 0, result.output
    assert role_of(result.output, "click_sequence") == "categorical"
    assert "a multi-hot bag of integer ids" in result.output
    assert 'data.schema.multi_valued = {click_sequence = "^"}' in result.output
    keys = {"data.source": "csv", "data.path": path.as_posix(), "data.test_fraction": "0.2"}
    keys |= {"data.schema.label": "clk"}
    trained = invoke(
        "simulate", "-c", config_file(tmp_path), "--name", "bags", "--no-progress",
        "--strategy", "async", *sets(**keys),
    )  # fmt: skip
    assert trained.exit_code == 0, trained.output
    run = tmp_path / "runs" / "bags"
    summary = json.loads((run / "summary.json").read_text())
    assert summary["examples_trained"] > 0 and summary["skipped"]["total"] == 0
    assert '[data.schema.multi_valued]\nclick_sequence = "^"' in (run / "config.toml").read_text()


def test_a_parquet_list_column_is_inspected_as_a_bag(tmp_path):
    path = tmp_path / "lists.parquet"
    history = [[1, 2], [], None, [7]]
    table = pa.table(
        {
            "label": [0, 1, 0, 1],
            "user_id": [1, 2, 3, 4],
            "history": pa.array(history, pa.list_(pa.int64())),
            "tags": pa.array([["a"], ["b", "c"], [], ["a"]], pa.list_(pa.string())),
            "vector": pa.array([[0.5]] * 4, pa.list_(pa.float32())),
        }
    )
    pq.write_table(table, path)
    result = invoke("data", "inspect", str(path))
    assert result.exit_code == 0, result.output
    assert role_of(result.output, "history") == "categorical"
    assert role_of(result.output, "tags") == "categorical"
    assert role_of(result.output, "vector") == "left out"
    assert re.search(r"rows +│ 4 ", result.output), result.output


def test_a_libffm_file_is_inspected_and_trained_on_with_the_fields_it_shows(tmp_path):
    path = tmp_path / "clicks.ffm"
    rng = np.random.default_rng(5)
    lines = []
    for _ in range(1200):
        user, items = rng.integers(0, 50), rng.integers(0, 80, rng.integers(1, 3))
        label = int(user % 2 == 0)
        tokens = [f"0:0:{rng.random() * 9:.2f}", f"1:{user}:1", *(f"2:{i}:1" for i in items)]
        lines.append(f"{label} " + " ".join(tokens))
    path.write_text("\n".join(lines) + "\n")
    result = invoke("data", "inspect", str(path))
    assert result.exit_code == 0, result.output
    assert "data.libffm.dense_fields=[0]" in result.output and "reads 3 fields" in result.output
    keys = {"data.source": "libffm", "data.path": path.as_posix(), "data.test_fraction": "0.2"}
    keys |= {"data.libffm.dense_fields": "[0]"}
    trained = invoke(
        "simulate", "-c", config_file(tmp_path), "--name", "ffm", "--no-progress",
        "--strategy", "async", *sets(**keys),
    )  # fmt: skip
    assert trained.exit_code == 0, trained.output
    run = tmp_path / "runs" / "ffm"
    assert json.loads((run / "config.json").read_text())["model"]["num_tables"] == 2
    assert json.loads((run / "summary.json").read_text())["test_auc"] > 0.6


def test_a_declared_text_column_of_lists_not_declared_multi_valued_is_pointed_out(tmp_path):
    path = tmp_path / "clicks.csv"
    with_click_lists(path, rows=200)
    config = tmp_path / "declared.toml"
    config.write_text(
        '[data]\nsource = "csv"\ntest_fraction = 0.2\n[data.schema]\nlabel = "clk"\n'
        'categorical = ["userid", "click_sequence"]\nhashed = ["click_sequence"]\n'
    )
    result = invoke("data", "inspect", str(path), "-c", str(config))
    assert result.exit_code == 0, result.output
    assert "undeclared list" in result.output
    assert 'declare data.schema.multi_valued = {click_sequence = "^"}' in result.output
