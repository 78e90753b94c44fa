"""The simulator charges a reader node the price of an example of the job's file format
(`cost.file_example_s`, measured by `recsync calibrate --data`) for each batch it makes."""

from __future__ import annotations

import dataclasses
import math

import pytest
from test_reader_cost import FIELDS, write_libffm

from recsync.app.config.load import load_config
from recsync.app.runs.distributed import job_spec
from recsync.coordinator.spec import plan_for
from recsync.protocol.address import Role
from recsync.runtime.sim.cost import CostModel, FileReading, StoredBytes
from recsync.runtime.sim.job import SimJob


def file_job(tmp_path):
    data = tmp_path / "train.libffm"
    write_libffm(data, 4_000)
    tiny = {
        "data.source": "libffm",
        "data.path": str(data),
        "data.test_fraction": 0.05,
        "model.num_tables": FIELDS,
        "model.embedding_dim": 4,
        "model.bottom_mlp": [8],
        "model.top_mlp": [8],
        "train.batch_size": 100,
    }
    return job_spec(load_config(None, tiny))


def test_a_reader_bound_file_job_runs_at_the_readers_examples_per_second(tmp_path):
    spec = file_job(tmp_path)
    fast = CostModel(worker_flops=1e12, request_s=0.0, row_s=0.0, element_s=0.0)
    slow = dataclasses.replace(fast, file_example_s=FileReading(libffm=1e-3))
    quick, bound = (SimJob(spec, plan_for(spec), c).run() for c in (fast, slow))
    assert bound["examples_trained"] == quick["examples_trained"] > 3_000
    batches = math.ceil(bound["examples_trained"] / spec.train.batch_size)
    asks = batches + spec.cluster.hogwild_threads  # and each worker's last: no batch left
    reader_s = bound["cpu_seconds"][Role.READER.value]
    assert reader_s == pytest.approx(asks * spec.train.batch_size * 1e-3, abs=0.01)
    assert bound["eps"] == pytest.approx(bound["examples_trained"] / reader_s, rel=0.02)
    assert quick["eps"] > 5 * bound["eps"]


def test_a_price_measured_for_another_format_leaves_the_batch_price(tmp_path):
    spec = file_job(tmp_path)
    cost = CostModel(worker_flops=1e12, reader_batch_s=2e-3)
    other = dataclasses.replace(cost, file_example_s=FileReading(parquet=1.0))
    runs = [SimJob(spec, plan_for(spec), c).run() for c in (cost, other)]
    assert runs[0]["eps"] == runs[1]["eps"]


def test_a_job_reading_from_a_slow_store_runs_at_the_stores_bytes_per_second(tmp_path):
    spec = file_job(tmp_path)
    parse = CostModel(
        worker_flops=1e12,
        request_s=0.0,
        row_s=0.0,
        element_s=0.0,
        file_example_s=FileReading(libffm=1e-6),
    )
    # 1,000 bytes an example over 8 Mbit/s (1 MB/s) for the job's one reader: 1 ms each
    store = dataclasses.replace(
        parse, file_example_bytes=StoredBytes(libffm=1_000.0), store_mbit=8.0
    )
    local, remote = (SimJob(spec, plan_for(spec), c).run() for c in (parse, store))
    assert remote["examples_trained"] == local["examples_trained"]
    assert spec.cluster.readers == 1
    batches = math.ceil(remote["examples_trained"] / spec.train.batch_size)
    asks = batches + spec.cluster.hogwild_threads  # and each worker's last: no batch left
    busy_s = remote["cpu_seconds"][Role.READER.value]
    assert busy_s == pytest.approx(asks * spec.train.batch_size * 1e-3, abs=0.01)
    assert remote["eps"] == pytest.approx(remote["examples_trained"] / busy_s, rel=0.02)
    assert local["eps"] > 5 * remote["eps"]
