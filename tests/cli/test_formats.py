"""Data as users have it: libFM files (`label index:value`, global indices), the format
read from a file's name (`data.source = "auto"`), TSV tables (a delimiter)."""

from __future__ import annotations

import gzip
import json

import pytest
from test_cli import config_file, invoke


def libfm_lines(count: int) -> str:
    """Global feature indices: 0-9 a user, 10-29 an item, 30 a dense value."""
    return "".join(
        f"{(i % 10 + i % 20 // 3) % 2} {i % 10}:1 {10 + i % 20}:1 30:{i % 7 / 7:.3f}\n"
        for i in range(count)
    )


def sets(**keys: str) -> list[str]:
    return [a for key, value in keys.items() for a in ("--set", f"{key}={value}")]


@pytest.mark.parametrize("source", ["libfm", "auto"])
def test_a_libfm_file_trains_by_name_or_by_its_extension(tmp_path, source):
    train, test = tmp_path / "train.libfm.gz", tmp_path / "test.libfm"
    with gzip.open(train, "wt") as out:
        out.write(libfm_lines(1200))
    test.write_text(libfm_lines(300))
    keys = {"data.source": source, "data.path": train.as_posix(), "data.test_path": test.as_posix()}
    keys |= {"data.libsvm.dense_indices": "[30]", "model.table_rows": "64"}
    result = invoke(
        "simulate", "-c", config_file(tmp_path), "--name", source, "--no-progress",
        "--strategy", "async", *sets(**keys),
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "runs" / source / "summary.json").read_text())
    assert summary["examples_trained"] == 1200 and summary["skipped"]["total"] == 0
    config = (tmp_path / "runs" / source / "config.toml").read_text()
    assert 'source = "libsvm"' in config  # what it was read as


def test_a_held_out_set_of_one_class_is_a_clear_error(tmp_path):
    train, test = tmp_path / "train.libfm", tmp_path / "test.libfm"
    train.write_text(libfm_lines(400))
    test.write_text("".join(f"0 {i % 10}:1\n" for i in range(50)))
    keys = {"data.source": "auto", "data.path": train.as_posix(), "data.test_path": test.as_posix()}
    result = invoke(
        "simulate", "-c", config_file(tmp_path), "--no-progress", "--strategy", "async",
        *sets(**keys, **{"model.table_rows": "64"}),
    )  # fmt: skip
    assert result.exit_code == 1 and "labels are all 0" in result.output


def test_auto_needs_a_name_it_knows(tmp_path):
    data = tmp_path / "day_0"
    data.write_text("1\t2\n")
    result = invoke(
        "simulate", "-c", config_file(tmp_path), "--no-progress",
        *sets(**{"data.source": "auto", "data.path": data.as_posix()}),
    )  # fmt: skip
    assert result.exit_code == 1 and "cannot tell the format of" in result.output


def test_a_tsv_table_reads_with_its_delimiter(tmp_path):
    rows = "".join(f"{i % 2}\t{i % 5}\tu{i % 9}\n" for i in range(400))
    train, test = tmp_path / "train.tsv.csv", tmp_path / "test.csv"
    train.write_text("label\tcount\tuser\n" + rows)
    test.write_text("label\tcount\tuser\n" + rows[:2000])
    keys = {
        "data.source": "auto",
        "data.path": train.as_posix(),
        "data.test_path": test.as_posix(),
        "data.schema.delimiter": "\t",
        "data.schema.dense": '["count"]',
        "data.schema.categorical": '["user"]',
        "data.schema.hashed": '["user"]',
        "model.table_rows": "32",
    }
    result = invoke(
        "simulate", "-c", config_file(tmp_path), "--name", "tsv", "--no-progress",
        "--strategy", "async", *sets(**keys),
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "runs" / "tsv" / "summary.json").read_text())
    assert summary["examples_trained"] == 400 and summary["skipped"]["total"] == 0


def test_inspect_reads_a_libfm_file_by_its_extension(tmp_path):
    data = tmp_path / "small.libfm"
    data.write_text(libfm_lines(50))
    result = invoke("data", "inspect", str(data))
    assert result.exit_code == 0, result.output
    assert "libsvm" in result.output and "50" in result.output


def ads_table(count: int) -> str:
    """A header with a label not called "label", numbers and strings."""
    cities = ("oslo", "rome", "lima")
    rows = [
        f"{int(i % 3 == 0) ^ int(i % 7 == 0)},{18 + i % 50},{i % 13 * 1.5},{cities[i % 3]},{i % 24}"
        for i in range(count)
    ]
    return "\n".join(["clicked,age,price,city,hour", *rows]) + "\n"


def test_a_table_with_no_declared_columns_trains_on_its_headers_columns(tmp_path):
    table = tmp_path / "ads.csv"
    table.write_text(ads_table(1500))
    keys = {"data.source": "auto", "data.path": table.as_posix(), "data.test_fraction": "0.2"}
    keys |= {"data.schema.label": "clicked", "model.table_rows": "16"}
    result = invoke(
        "simulate", "-c", config_file(tmp_path), "--name", "ads", "--no-progress",
        "--strategy", "async", *sets(**keys),
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    config = json.loads((tmp_path / "runs" / "ads" / "config.json").read_text())
    schema = config["data"]["schema"]
    assert (schema["label"], schema["dense"]) == ("clicked", ["age", "price", "hour"])
    assert schema["categorical"] == schema["hashed"] == ["city"]
    summary = json.loads((tmp_path / "runs" / "ads" / "summary.json").read_text())
    assert summary["examples_trained"] + summary["test_examples"] == 1500


@pytest.mark.parametrize(
    ("header", "keys", "says"),
    [
        ("clicked,age", {"data.schema.label": "clicked"}, "no categorical feature"),
        (
            "clicked,age,city",
            {"data.schema.label": "clicked", "model.table_kind": "fixed"},
            "model.table_rows: required",
        ),
        ("clicked,age,city", {}, "no label column 'label'"),
    ],
)
def test_a_table_that_cannot_train_is_refused_saying_what_to_set(tmp_path, header, keys, says):
    table = tmp_path / "t.csv"
    values = ",".join(["1", "30", "oslo"][: header.count(",") + 1])
    table.write_text(f"{header}\n{values}\n")
    keys |= {"data.source": "csv", "data.path": table.as_posix(), "data.test_fraction": "0.5"}
    result = invoke("train", "-c", config_file(tmp_path), "--no-progress", *sets(**keys))
    assert result.exit_code != 0 and says in result.output, result.output
