"""The reader's price of an example of file data: measured on the job's own file by
`recsync calibrate --data`, kept in the cost profile by format, charged by the simulator."""

from __future__ import annotations

import dataclasses
import random

import pytest

from recsync.app.runs.cost_profile import profile_cost, profile_text, read_profile
from recsync.app.runs.reader_cost import job_files, measure_reader, with_reader_cost
from recsync.errors import ConfigError
from recsync.runtime.sim.cost import CostModel, FileReading, StoredBytes

FIELDS = 4


def write_libffm(path, lines: int = 3_000) -> None:
    rng = random.Random(0)
    with open(path, "w") as out:
        for _ in range(lines):
            features = [f"{f}:{f * 100 + rng.randrange(100)}:1" for f in range(FIELDS)]
            out.write(" ".join([rng.choice("01"), *features]) + "\n")


def test_a_measured_format_prices_a_batch_at_its_examples_and_others_keep_the_batch_price():
    cost = CostModel(reader_batch_s=1e-4, file_example_s=FileReading(libffm=2e-6))
    assert cost.for_data("libffm", 256).reader_batch_s == pytest.approx(512e-6)
    assert cost.for_data("criteo", 256) == cost  # not measured: a synthetic batch's price
    assert cost.for_data(None, 256) == cost  # the synthetic stream


def test_on_a_store_a_batch_costs_the_longer_of_its_parse_and_its_bytes_transfer():
    cost = CostModel(
        file_example_s=FileReading(parquet=1e-6),
        file_example_bytes=StoredBytes(parquet=50.0),
        store_mbit=100.0,
    )
    # two readers share 100 Mbit/s: 6.25 MB/s each, 50 B an example: 8 us > 1 us parsing
    assert cost.for_data("parquet", 256, num_readers=2).reader_batch_s == pytest.approx(256 * 8e-6)
    fast_store = dataclasses.replace(cost, store_mbit=10_000.0)  # 0.08 us: parsing bounds
    assert fast_store.for_data("parquet", 256, 2).reader_batch_s == pytest.approx(256e-6)
    local = dataclasses.replace(cost, store_mbit=0.0)
    assert local.for_data("parquet", 256, 2).reader_batch_s == pytest.approx(256e-6)
    with pytest.raises(ValueError, match="store_mbit"):
        CostModel(store_mbit=-1.0)


def test_a_negative_price_is_refused_naming_the_format():
    with pytest.raises(ValueError, match="parquet must be >= 0"):
        FileReading(parquet=-1e-6)


def test_the_prices_of_several_formats_are_read_back_from_the_profile_file(tmp_path):
    cost = CostModel(file_example_s=FileReading(criteo=3e-6, parquet=1.5e-6))
    path = tmp_path / "profile.toml"
    path.write_text(profile_text(cost))
    assert profile_cost(read_profile(path), "test") == cost
    path.write_text("[cost.file_example_s]\ntsv = 1e-6\n")
    with pytest.raises(ConfigError, match="tsv"):
        profile_cost(read_profile(path), "test")


def test_the_reader_is_timed_on_the_jobs_file_and_its_format_priced(tmp_path):
    data = tmp_path / "train.libffm"
    write_libffm(data)
    files, train = job_files(data, None, None, {"model.num_tables": FIELDS})
    assert files.fmt == "libffm" and files.paths == (str(data.absolute()),)  # by the name
    measured = measure_reader(files, train, examples=1_000, repeats=3)
    assert measured.fmt == "libffm" and len(measured.passes) == 3
    assert measured.examples == 1_024  # whole batches of 256 until 1,000 were handed out
    assert 0 < measured.example_s < 1e-2 and measured.example_s in measured.passes
    base = dataclasses.replace(CostModel(), worker_flops=3e9)
    priced = with_reader_cost(base, measured)
    assert priced.file_example_s.libffm == measured.example_s
    lines = len(data.read_text().splitlines())
    assert measured.example_bytes == pytest.approx(data.stat().st_size / lines)
    assert priced.file_example_bytes.libffm == measured.example_bytes
    unpriced = dataclasses.replace(
        priced, file_example_s=FileReading(), file_example_bytes=StoredBytes()
    )
    assert unpriced == base


def test_the_jobs_held_out_set_and_batch_size_are_kept(tmp_path):
    data = tmp_path / "lines.txt"
    write_libffm(data, 10)
    config = tmp_path / "job.toml"
    config.write_text(
        '[data]\nsource = "libffm"\npath = "elsewhere.ffm"\ntest_fraction = 0.1\n'
        "[model]\nnum_tables = 4\n[train]\nbatch_size = 32\n"
    )
    files, train = job_files(data, None, config, {})
    assert (files.fmt, files.test_fraction, files.test_paths, train.batch_size) == (
        "libffm",
        0.1,
        (),
        32,
    )
    with pytest.raises(ConfigError, match="no such file"):
        job_files(tmp_path / "missing.ffm", None, config, {})
