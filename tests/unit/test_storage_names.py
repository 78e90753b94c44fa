"""Data files' names (io/storage.py): local folders and globs expanded in name order,
bookkeeping files left out, URLs shown without credentials or query, an endpoint carried in
an s3:// URL, credentials in a URL refused, and day partitions in date order."""

from __future__ import annotations

import pytest

from recsync.errors import ConfigError
from recsync.io.readers import format_of_name
from recsync.io.storage import day_partitions, expanded
from recsync.io.urls import base_name, is_url, shown, with_endpoint


def test_a_local_folder_and_a_glob_are_their_data_files_in_name_order(tmp_path):
    for name in ("b/part-1.csv", "a/part-0.csv", "a/part-2.csv", "a/_SUCCESS", "a/.crc"):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text("x\n")
    assert [p.split(str(tmp_path))[1] for p in expanded(str(tmp_path))] == [
        "/a/part-0.csv",
        "/a/part-2.csv",
        "/b/part-1.csv",
    ]
    assert [base_name(p) for p in expanded(f"{tmp_path}/*/part-[01].csv")] == [
        "part-0.csv",
        "part-1.csv",
    ]
    assert expanded(f"file://{tmp_path}/a/part-0.csv") == [f"{tmp_path}/a/part-0.csv"]
    with pytest.raises(ConfigError, match=r"data.test_path: no data file at .*/c\*"):
        expanded(f"{tmp_path}/c*", "data.test_path")
    missing = f"{tmp_path}/not-yet.csv"
    assert expanded(missing) == [missing]  # a file's name is kept: opening it says more


def test_urls_are_shown_without_credentials_or_query_and_carry_an_endpoint():
    url = with_endpoint("s3://clicks/day=2026-12-01/part-0.parquet", "http://10.0.0.5:9000")
    assert url.startswith("s3://clicks/day=2026-12-01/part-0.parquet?endpoint_override=")
    assert shown(url) == "s3://clicks/day=2026-12-01/part-0.parquet"
    assert with_endpoint("gs://b/x.csv", "http://h:1") == "gs://b/x.csv"
    assert with_endpoint("s3://b/x.csv", None) == "s3://b/x.csv"
    assert shown("s3://key:secret@clicks/x.csv") == "s3://clicks/x.csv"
    assert is_url(url) and is_url("hdfs://nn:8020/a") and not is_url("/data/x.csv")
    assert not is_url("file:///data/x.csv")
    assert format_of_name(url) == "parquet" and base_name(url) == "part-0.parquet"


@pytest.mark.parametrize(
    "url",
    [
        "s3://AKIAEXAMPLE:wJalrXUtnFEMI@clicks/x.parquet",
        "s3://clicks/x.parquet?access_key=AKIAEXAMPLE&secret_key=wJalrXUtnFEMI",
    ],
)
def test_credentials_in_a_url_are_refused_without_being_repeated(url):
    with pytest.raises(ConfigError, match="carries credentials") as error:
        expanded(url)
    assert "wJalrXUtnFEMI" not in str(error.value) and "AKIAEXAMPLE" not in str(error.value)


def test_day_partitions_are_in_date_order_and_others_left_out(tmp_path):
    for name in ("day=2026-12-03", "day=2026-12-01", "dt=2026-12-02", "notes", "day=soon"):
        (tmp_path / name).mkdir()
    days = day_partitions(str(tmp_path))
    assert [(date, base_name(folder)) for date, folder in days] == [
        ("2026-12-01", "day=2026-12-01"),
        ("2026-12-02", "dt=2026-12-02"),
        ("2026-12-03", "day=2026-12-03"),
    ]
    assert [d for d, _ in day_partitions(f"{tmp_path}/day=2026-12-0[13]")] == [
        "2026-12-01",
        "2026-12-03",
    ]
    (tmp_path / "date=2026-12-01").mkdir()
    with pytest.raises(ConfigError, match="two partitions of one date"):
        day_partitions(str(tmp_path))
    with pytest.raises(ConfigError, match="no day partition"):
        day_partitions(str(tmp_path / "notes"))
