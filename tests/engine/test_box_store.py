"""Data on an object store on another host: an S3-compatible server (moto) on host 2 of a
3-host box, the readers on hosts 0 and 1 reading their shares of Parquet day files over the
network (`recsync train --address` on host 0, as a user would, the credentials in each
host's environment only). The store's host sends the data about once (its link's kernel
counters), every example is trained once, a run stopped midway resumes from its checkpoint,
and no secret reaches the run directory."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from box_hosts import recsync_on, running_box, skip_reason, train, train_args
from object_store import ACCESS_KEY, SECRET_KEY, ObjectStore

from recsync.app.cli.data import Split, write_synthetic_parquet
from recsync.data.synthetic import SyntheticSpec
from recsync.tools.box.counters import counters

pytestmark = pytest.mark.skipif(skip_reason() is not None, reason=str(skip_reason()))

STORE_HOST = 2
FILES = 6
ROWS = 100_000  # a file's rows (synthetic clicks, 13 dense and 26 categorical columns)
SCHEMA = [
    'data.schema.dense=["' + '","'.join(f"I{i}" for i in range(1, 14)) + '"]',
    'data.schema.categorical=["' + '","'.join(f"C{i}" for i in range(1, 27)) + '"]',
]
SPEC = SyntheticSpec(num_train=ROWS, num_test=1_000, table_rows=(1_000,) * 26, num_dense=13)


@pytest.fixture(scope="module")
def store_box(no_local_ray, tmp_path_factory):
    """The box, its Ray nodes started with the store's credentials in their environment
    (as a cluster's hosts hold theirs), and the store on host 2 holding three files."""
    data = tmp_path_factory.mktemp("data")
    with pytest.MonkeyPatch.context() as env:
        env.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
        env.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
        env.setenv("AWS_DEFAULT_REGION", "us-east-1")
        env.setenv("AWS_EC2_METADATA_DISABLED", "true")
        with running_box(hosts=3) as state:
            namespace = state.plan.namespace(STORE_HOST)
            store = ObjectStore(
                state.plan.ip(STORE_HOST), prefix=["ip", "netns", "exec", namespace]
            )
            store.start()
            try:
                size = 0
                for day in range(FILES):
                    path = data / f"part-{day}.parquet"
                    write_synthetic_parquet(dataclasses.replace(SPEC, seed=day), path, Split.train)
                    store.put(path, f"box/day=2026-12-01/{path.name}")
                    size += path.stat().st_size
                yield state, store, size
            finally:
                store.stop()


def overrides(store: ObjectStore) -> list[str]:
    return [
        "strategy.name=async",
        "data.source=parquet",
        "data.path=s3://clicks/box/day=2026-12-01/",
        f"data.storage.endpoint={store.endpoint}",
        "data.test_fraction=0.05",
        "data.test_max_examples=500",  # the held-out rows: within the first row group
        "model.table_rows=1000",
        "cluster.num_readers=2",
        "cluster.placement.reader=[0, 1]",
        "cluster.placement.trainer=[1]",
        "run.eval_every=0",
        "run.checkpoint.every_examples=50000",
        *SCHEMA,
    ]


def _no_secret_under(folder: Path) -> None:
    for written in folder.rglob("*"):
        if written.is_file():
            assert SECRET_KEY.encode() not in written.read_bytes(), written


def test_readers_on_two_hosts_read_their_shares_from_the_store_once(store_box, tmp_path):
    state, store, size = store_box
    before = counters(state)
    done, summary = train(state, tmp_path, "store", overrides(store))
    after = counters(state)
    assert done.returncode == 0 and summary is not None, done.stdout[-3000:]
    assert SECRET_KEY not in done.stdout
    ips = [state.plan.ip(h) for h in state.plan.hosts]
    readers = {ip for node, ip in summary["node_hosts"].items() if node.startswith("reader")}
    assert readers == {ips[0], ips[1]}
    assert summary["examples_trained"] + summary["test_examples"] == FILES * ROWS
    served = after[STORE_HOST]["tx_bytes"] - before[STORE_HOST]["tx_bytes"]
    print(f"the store's host sent {served:,} bytes for {size:,} bytes of data")
    # every reader read only its row groups: the data about once, not twice; beside it,
    # each process's footers, the driver's planner sample (the first row group) and reader
    # 0's held-out rows (the row groups up to the cap's last: here the first)
    assert size < served < 1.35 * size, (served, size)  # measured: 1.27
    _no_secret_under(tmp_path / "store")


def test_a_run_stopped_midway_resumes_from_its_checkpoint_on_the_store(store_box, tmp_path):
    state, store, _ = store_box
    args = [*train_args(state, tmp_path, "part", overrides(store)), "--stop-after", "150000"]
    stopped = recsync_on(state, 0, args)
    assert stopped.returncode == 0, (stopped.stdout + stopped.stderr)[-3000:]
    part = json.loads((tmp_path / "part" / "summary.json").read_text())
    assert 100_000 < part["examples_trained"] < FILES * ROWS
    resume = ["train", "--address", state.plan.head_address, "--resume", str(tmp_path / "part")]
    resume += ["--name", "rest", "--no-progress"]
    rest_run = recsync_on(state, 0, resume)
    assert rest_run.returncode == 0, (rest_run.stdout + rest_run.stderr)[-3000:]
    rest = json.loads((tmp_path / "rest" / "summary.json").read_text())
    trained = part["examples_trained"] + rest["examples_trained"]
    assert trained + rest["test_examples"] == FILES * ROWS  # every example once
    _no_secret_under(tmp_path)
