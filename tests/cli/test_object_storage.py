"""Data on a real S3-compatible object store (moto's server, in a process of its own): the
readers read s3:// URLs, globs and directories as they read local files, readers sharing
Parquet files read only their row groups (the bytes the store served, counted by a relay
in front of it), a store that stops answering for a while is read through (retried, nothing
read twice or skipped), and a missing object, a truncated file or credentials in a URL are
named errors that never show a secret."""

from __future__ import annotations

import dataclasses
import json
import random
import threading
from pathlib import Path

import pytest
import torch
from object_store import SECRET_KEY, running_store
from reader_jobs import drained, names, one_read, readers_of
from test_cli import config_file, invoke
from test_formats import sets
from test_parquet_shares_sim import ROWS, SCHEMA, _write, job

from recsync.coordinator.readers import joined_report
from recsync.errors import ConfigError, DataError
from recsync.io import retrying
from recsync.io.readers import open_dataset
from recsync.io.sources import FileData
from recsync.io.storage import expanded
from recsync.io.urls import with_endpoint


@pytest.fixture
def store(monkeypatch):
    with running_store(monkeypatch) as (store, proxy):
        yield store, proxy


def parquet_files(tmp_path: Path, rows: tuple[int, int] = ROWS) -> list[Path]:
    paths = [tmp_path / "part-0.parquet", tmp_path / "part-1.parquet"]
    _write(paths[0], rows[0], 0, 0)
    _write(paths[1], rows[1], 1, 100_000)
    return paths


def uploaded(store, paths: list[Path], folder: str) -> list[str]:
    return [store.put(path, f"{folder}/{path.name}") for path in paths]


def test_globs_and_directories_list_the_stores_files_in_name_order(store, tmp_path):
    store, proxy = store
    paths = parquet_files(tmp_path)
    uploaded(store, paths, "day=2026-12-01")
    uploaded(store, paths[:1], "day=2026-12-02")
    (tmp_path / "_SUCCESS").write_text("")
    store.put(tmp_path / "_SUCCESS", "day=2026-12-01/_SUCCESS")
    glob = with_endpoint("s3://clicks/day=2026-12-0*/part-*.parquet", proxy.endpoint)
    assert [u.split("?")[0] for u in expanded(glob)] == [
        "s3://clicks/day=2026-12-01/part-0.parquet",
        "s3://clicks/day=2026-12-01/part-1.parquet",
        "s3://clicks/day=2026-12-02/part-0.parquet",
    ]
    folder = with_endpoint("s3://clicks/day=2026-12-01/", proxy.endpoint)
    assert [u.split("?")[0].rsplit("/", 1)[1] for u in expanded(folder)] == [
        "part-0.parquet",
        "part-1.parquet",
    ]  # _SUCCESS is no data
    with pytest.raises(ConfigError, match=r"no data file at s3://clicks/day=2027\*"):
        expanded(with_endpoint("s3://clicks/day=2027*/x.parquet", proxy.endpoint))


def test_readers_sharing_parquet_on_the_store_read_their_row_groups_once(store, tmp_path):
    store, proxy = store
    paths = parquet_files(tmp_path, (60_000, 45_000))  # footers read whole: 64 KiB each
    urls = [with_endpoint(u, proxy.endpoint) for u in uploaded(store, paths, "train")]
    local = FileData(tuple(map(str, paths)), "parquet", SCHEMA, False, (), 0.05, 300, False)
    remote = dataclasses.replace(local, paths=tuple(urls))
    every, skips = one_read(local)
    size = sum(p.stat().st_size for p in paths)
    served = proxy.served
    spec = job(remote, 3)
    nodes = readers_of(spec)  # footers, and the planner's sample (the first rows)
    assembled = proxy.served - served
    handed = drained(spec, nodes)
    read = proxy.served - served - assembled
    test_set = nodes[0].stream.source.test_set()
    assert test_set is not None
    assert sorted(names(handed) + names([test_set])) == every
    # each reader read its own row groups: the data about once, not 3 times (the rest:
    # HTTP headers, the footers, the row groups reader 0 reads for the held-out rows)
    assert size * 0.9 < read < size * 1.25, (read, size)
    assert assembled < size, assembled  # the first 64Ki rows at most, and the footers
    again, again_skips = one_read(remote)
    assert again == every and again_skips.counts == skips.counts


def test_text_and_csv_files_on_the_store_read_as_local_ones(store, tmp_path):
    store, proxy = store
    lines = [f"{n % 2}\t{n}\t{n % 7}\tab{n % 5:x}\n" for n in range(2_000)]
    local = tmp_path / "day.txt"
    local.write_text("".join(lines))
    url = with_endpoint(store.put(local, "text/day.txt"), proxy.endpoint)
    from recsync.io.formats.criteo.rows import CriteoSchema

    schema = CriteoSchema((10,), num_integer=2)
    ours = [b.dense for b in open_dataset([url], "criteo", schema, batch_size=300)]
    theirs = [b.dense for b in open_dataset([local], "criteo", schema, batch_size=300)]
    assert len(ours) == len(theirs) == 7
    assert all((a == b).all() for a, b in zip(ours, theirs, strict=True))


def test_a_store_that_stops_answering_is_read_through_without_a_row_lost(store, tmp_path):
    store, proxy = store
    paths = parquet_files(tmp_path)
    urls = tuple(with_endpoint(u, proxy.endpoint) for u in uploaded(store, paths, "flaky"))
    before = retrying.retries_so_far()
    reader = open_dataset(urls, "parquet", SCHEMA, batch_size=512)
    first = next(reader)  # the first file's rows are read; the second's not yet
    proxy.stop()  # the store stops answering now, before the second file is opened
    restart = threading.Timer(2.0, proxy.start)
    restart.start()
    rest = list(reader)  # the second file opened while the store does not answer
    restart.join()
    assert retrying.retries_so_far() > before
    assert (
        names([first, *rest])
        == one_read(FileData(tuple(map(str, paths)), "parquet", SCHEMA, False, (), 0.0, 1, False))[
            0
        ]
    )


def test_a_missing_object_a_truncated_file_and_credentials_in_a_url_are_named(store, tmp_path):
    store, proxy = store
    paths = parquet_files(tmp_path)
    good = with_endpoint(uploaded(store, paths[:1], "bad")[0], proxy.endpoint)
    truncated = tmp_path / "cut.parquet"
    truncated.write_bytes(paths[0].read_bytes()[:5_000])
    cut = with_endpoint(store.put(truncated, "bad/cut.parquet"), proxy.endpoint)
    with pytest.raises(ConfigError, match="data file not found: s3://clicks/bad/none.parquet$"):
        open_dataset([good.replace("part-0", "none")], "parquet", SCHEMA, batch_size=64)
    with pytest.raises(DataError, match="file s3://clicks/bad/cut.parquet: not a readable"):
        list(open_dataset([cut], "parquet", SCHEMA, batch_size=64))
    leaky = f"s3://someone:{SECRET_KEY}@clicks/bad/part-0.parquet"
    with pytest.raises(ConfigError, match="carries credentials") as error:
        expanded(leaky)
    assert SECRET_KEY not in str(error.value)


def test_a_permission_the_credentials_lack_is_named_with_the_url(store, tmp_path):
    from object_store import ObjectStore

    path = parquet_files(tmp_path)[0]
    guarded = ObjectStore(open_actions=5)  # the upload's requests; then each is refused
    guarded.start()
    try:
        url = with_endpoint(guarded.put(path, "guarded/part-0.parquet"), guarded.endpoint)
        with pytest.raises(DataError) as error:
            list(open_dataset([url], "parquet", SCHEMA, batch_size=512))
    finally:
        guarded.stop()
    text = str(error.value)
    assert "s3://clicks/guarded/part-0.parquet" in text and "permission denied" in text
    assert SECRET_KEY not in text and "endpoint_override" not in text


def test_a_job_trains_from_the_store_as_from_local_files_and_keeps_no_secret(store, tmp_path):
    store, proxy = store
    folder = tmp_path / "day=2026-12-01"
    folder.mkdir()
    parquet_files(folder)
    uploaded(store, sorted(folder.iterdir()), "job/day=2026-12-01")
    keys = {
        "data.source": "auto",
        "data.test_fraction": "0.05",
        "data.schema.dense": '["name"]',
        "data.schema.categorical": '["c0", "c1"]',
        "model.table_rows": "[10, 30]",
    }
    summaries = {}
    for name, path in (("local", folder.as_posix()), ("s3", "s3://clicks/job/day=2026-12-01/")):
        more = {"data.path": path}
        if name == "s3":
            more["data.storage.endpoint"] = proxy.endpoint
        result = invoke(
            "simulate", "-c", config_file(tmp_path), "--name", name, "--no-progress",
            "--strategy", "async", *sets(**keys, **more),
        )  # fmt: skip
        assert result.exit_code == 0, result.output
        assert SECRET_KEY not in result.output
        summaries[name] = json.loads((tmp_path / "runs" / name / "summary.json").read_text())
    for key in ("examples_trained", "test_examples", "test_auc"):
        assert summaries["s3"][key] == summaries["local"][key], key
    skipped = [summaries[name]["skipped"]["by_reason"] for name in ("s3", "local")]
    assert skipped[0] == skipped[1] and sum(skipped[0].values()) > 0
    assert summaries["s3"]["examples_trained"] + summaries["s3"]["test_examples"] < sum(ROWS)
    for written in (tmp_path / "runs" / "s3").rglob("*"):
        if written.is_file():
            assert SECRET_KEY.encode() not in written.read_bytes(), written
    assert summaries["s3"]["storage_retries"] == 0
    # a test file on the store is read up front as one stream: two of its reads dropped
    # midway are each retried from the byte they reached
    test_url = store.put(sorted(folder.iterdir())[0], "job/test/part-0.parquet")
    more = {
        "data.path": "s3://clicks/job/day=2026-12-01/",
        "data.test_path": test_url,
        "data.storage.endpoint": proxy.endpoint,
    }
    runs, outputs = {}, {}
    for name, cuts in (("whole", 0), ("cut", 2)):
        proxy.cut_replies(cuts)
        result = invoke(
            "simulate", "-c", config_file(tmp_path), "--name", name, "--no-progress",
            "--strategy", "async", *sets(**{**keys, "data.test_fraction": "0"}, **more),
        )  # fmt: skip
        assert result.exit_code == 0, result.output
        runs[name] = json.loads((tmp_path / "runs" / name / "summary.json").read_text())
        outputs[name] = result.output
    assert runs["whole"]["storage_retries"] == 0 and runs["cut"]["storage_retries"] == 2
    assert "2 reads of remote data failed for a while and were retried" in outputs["cut"]
    for key in ("examples_trained", "test_examples", "test_auc", "skipped"):
        assert runs["cut"][key] == runs["whole"][key], key


def test_continual_takes_its_days_from_the_stores_partitions_in_date_order(store, tmp_path):
    from small_jobs import small_continual

    from recsync.app.cli.data import Split, write_synthetic_parquet
    from recsync.data.synthetic import SyntheticSpec

    store, proxy = store
    base = SyntheticSpec(num_train=1024, num_test=256, table_rows=(50,) * 4, num_dense=3)
    for day, date in enumerate(("2026-12-03", "2026-12-01", "2026-12-02")):  # put unordered
        path = tmp_path / f"d{day}.parquet"
        write_synthetic_parquet(dataclasses.replace(base, seed=day), path, Split.train)
        store.put(path, f"days/day={date}/part-0.parquet")
    store.put(path, "days/notes/part-0.parquet")  # no partition: not a day
    keys = {k: v for k, v in small_continual(3).items() if not k.startswith("data.")}
    keys |= {"data.source": "parquet", "model.table_rows": "50", "run.runs_dir": str(tmp_path)}
    keys |= {"data.storage.endpoint": proxy.endpoint}
    result = invoke(
        "continual", "--days", "s3://clicks/days/", "--engine", "sim", "--name", "c",
        "--no-progress", *sets(**keys),
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    said = [line.strip() for line in result.output.splitlines() if line.startswith("day ")]
    assert said[:3] == [
        "day 0: 2026-12-01 (s3://clicks/days/day=2026-12-01/)",
        "day 1: 2026-12-02 (s3://clicks/days/day=2026-12-02/)",
        "day 2: 2026-12-03 (s3://clicks/days/day=2026-12-03/)",
    ]
    records = [json.loads(line) for line in (tmp_path / "c" / "metrics.jsonl").open()]
    assert [(r["day"], r["data"], r["examples"]) for r in records] == [
        (0, "s3://clicks/days/day=2026-12-01/", 1024),
        (1, "s3://clicks/days/day=2026-12-02/", 1024),
    ]
    assert "read s3://clicks/days/day=2026-12-01/" in result.output
    glob = invoke("continual", "--days", "s3://clicks/days/day=2027*", "--engine", "sim",
                  *sets(**keys))  # fmt: skip
    assert glob.exit_code != 0 and "no day partition (day=YYYY-MM-DD)" in glob.output


def text_files_on_the_store(store, proxy, tmp_path, monkeypatch):
    """The libffm files of the line-shares tests on the store, read in byte blocks of
    16 KiB (about 14 blocks), each read with 1 KiB past it."""
    from test_line_shares_sim import LINES
    from test_line_shares_sim import SCHEMA as FFM
    from test_line_shares_sim import _write as write_lines

    from recsync.io import byte_blocks

    monkeypatch.setattr(byte_blocks, "BLOCK_BYTES", 16 << 10)
    monkeypatch.setattr(byte_blocks, "TAIL_BYTES", 1 << 10)
    paths = [tmp_path / "a.ffm", tmp_path / "b.ffm"]
    write_lines(paths[0], LINES[0], 0, 0)
    write_lines(paths[1], LINES[1], 1, 100_000)
    urls = tuple(with_endpoint(u, proxy.endpoint) for u in uploaded(store, paths, "text"))
    local = FileData(tuple(map(str, paths)), "libffm", FFM, False, (), 0.05, 300, False)
    return paths, local, dataclasses.replace(local, paths=urls)


def text_job(files: FileData, readers: int, resume=None):
    from test_line_shares_sim import job as line_job

    return line_job(files, readers, resume)


def test_readers_share_text_on_the_store_by_byte_ranges_reading_it_once(
    store, tmp_path, monkeypatch
):
    from recsync.io.byte_blocks import ByteBlocks

    store, proxy = store
    paths, local, remote = text_files_on_the_store(store, proxy, tmp_path, monkeypatch)
    every, skips = one_read(local)
    size = sum(p.stat().st_size for p in paths)
    served = proxy.served
    spec = text_job(remote, 3)
    nodes = readers_of(spec)
    assembled = proxy.served - served  # the cap's prefix and the planner's sample
    assert isinstance(nodes[0].stream.source.lines, ByteBlocks)
    assert nodes[0].stream.source.lines.unit == "bytes/16384"
    handed = drained(spec, nodes)
    read = proxy.served - served - assembled
    test_set = nodes[0].stream.source.test_set()
    assert test_set is not None and 0 < test_set.batch_size <= 300
    assert names(handed) == sorted(set(names(handed)))
    assert sorted(names(handed) + names([test_set])) == every
    assert size * 0.95 < read < size * 1.3, (read, size)  # each block once, 1 KiB past it
    report = joined_report([node.report() for node in nodes])
    assert report.skipped["by_reason"] == skips.counts
    assert all("the line at byte" in text for text in report.skipped["first"].values())
    two = readers_of(text_job(remote, 2))[0].stream.source.test_set()
    assert two is not None and torch.equal(two.dense, test_set.dense)


def test_a_cut_of_three_byte_range_readers_resumes_onto_two_with_every_example_once(
    store, tmp_path, monkeypatch
):
    from reader_jobs import cuts_of

    from recsync.coordinator.spec import plan_for
    from recsync.data.shares import Deal
    from recsync.runtime.sim.cost import CostModel
    from recsync.runtime.sim.job import SimJob

    store, proxy = store
    _, local, remote = text_files_on_the_store(store, proxy, tmp_path, monkeypatch)
    spec = text_job(remote, 3)
    state = next(s for s in cuts_of(spec, every_examples=2_000) if s.data_beyond)
    assert state.data_unit == "bytes/16384"
    resumed_spec = text_job(remote, 2, resume=state)
    resumed = SimJob(resumed_spec, plan_for(resumed_spec), CostModel())
    resumed.run()
    lines = readers_of(spec)[0].stream.source.lines
    assert resumed.final_state is not None
    assert resumed.final_state.data_position == lines.slots
    share = lines.share(Deal(1, lines.block_lines), 0, 1, 1, False)
    position = state.stream_position
    before = []
    for block in range(lines.blocks):
        examples = share._block_examples(block)
        for k, name in enumerate([] if examples is None else examples.dense[:, 0].tolist()):
            slot = block * lines.block_lines + k
            if slot < position.prefix or any(a <= slot < b for a, b in position.beyond):
                before.append(int(name))
    test_set = readers_of(spec)[0].stream.source.test_set()
    rest = names(drained(resumed_spec))
    assert sorted(rest + before + names([test_set])) == one_read(local)[0]


def _write_csv(path: Path, rows: int, first: int, rng: random.Random) -> None:
    """label,n,a,b rows named by `n` (from `first`), a value of "b" quoted now and then,
    and some bad rows: a bad number, a wrong field count, an empty line."""
    with path.open("w") as out:
        out.write("label,n,a,b\n")
        for k in range(rows):
            kind = rng.random()
            if kind < 0.01:
                out.write(f"1,{first + k},x,\n")  # "x": no id (a bad row)
            elif kind < 0.015:
                out.write(f"1,{first + k},3\n")  # a field short
            elif kind < 0.018:
                out.write("\n")
            else:
                b = f'"{k % 30}"' if kind > 0.9 else str(k % 30)
                out.write(f"{k % 2},{first + k},{k % 10},{b}\n")


def test_readers_share_csv_on_the_store_by_byte_ranges_and_refuse_values_spanning_lines(
    store, tmp_path, monkeypatch
):
    from recsync.io import byte_blocks
    from recsync.io.byte_blocks import ByteBlocks
    from recsync.io.formats.tabular.rows import TabularSchema

    store, proxy = store
    monkeypatch.setattr(byte_blocks, "BLOCK_BYTES", 16 << 10)
    monkeypatch.setattr(byte_blocks, "TAIL_BYTES", 1 << 10)
    rng = random.Random(4)
    paths = [tmp_path / "a.csv", tmp_path / "b.csv"]
    _write_csv(paths[0], 9_000, 0, rng)
    _write_csv(paths[1], 7_000, 100_000, rng)
    schema = TabularSchema("label", ("n",), ("a", "b"), (10, 30))
    urls = tuple(with_endpoint(u, proxy.endpoint) for u in uploaded(store, paths, "csv"))
    local = FileData(tuple(map(str, paths)), "csv", schema, False, (), 0.05, 300, False)
    remote = dataclasses.replace(local, paths=urls)
    every, skips = one_read(local)
    size = sum(p.stat().st_size for p in paths)
    served = proxy.served
    spec = text_job(remote, 3)
    nodes = readers_of(spec)
    assembled = proxy.served - served  # the headers, the cap's prefix, the planner's sample
    assert isinstance(nodes[0].stream.source.lines, ByteBlocks)
    handed = drained(spec, nodes)
    read = proxy.served - served - assembled
    test_set = nodes[0].stream.source.test_set()
    assert test_set is not None and 0 < test_set.batch_size <= 300
    assert names(handed) == sorted(set(names(handed)))
    assert sorted(names(handed) + names([test_set])) == every  # the header is no row
    assert size * 0.95 < read < size * 1.3, (read, size)
    report = joined_report([node.report() for node in nodes])
    assert report.skipped["by_reason"] == skips.counts
    assert all("the line at byte" in text for text in report.skipped["first"].values())

    spanning = tmp_path / "spanning.csv"
    spanning.write_text('label,n,a,b\n1,1,2,"3\n4"\n0,2,3,4\n')
    url = with_endpoint(store.put(spanning, "csv/spanning.csv"), proxy.endpoint)
    bad = dataclasses.replace(local, paths=(url,), test_fraction=0.0)
    with pytest.raises(DataError, match="opens a quoted value it does not close") as error:
        drained(text_job(bad, 2))
    assert "as Parquet" in str(error.value) and "line at byte 12" in str(error.value)


def gzip_files_on_the_store(store, proxy, tmp_path):
    """Three gzip libffm files (5% bad lines) on the store, and the same files here."""
    import gzip

    from test_line_shares_sim import SCHEMA as FFM
    from test_line_shares_sim import _write as write_lines

    paths = []
    for k, count in enumerate((6_000, 4_500, 5_200)):
        plain = tmp_path / f"p{k}.ffm"
        write_lines(plain, count, k, k * 100_000)
        packed = tmp_path / f"day-{k}.ffm.gz"
        packed.write_bytes(gzip.compress(plain.read_bytes()))
        paths.append(packed)
    urls = tuple(with_endpoint(u, proxy.endpoint) for u in uploaded(store, paths, "gz"))
    local = FileData(tuple(map(str, paths)), "libffm", FFM, False, (), 0.05, 300, False)
    return paths, local, dataclasses.replace(local, paths=urls)


def test_readers_share_gzip_files_on_the_store_a_whole_file_each_reading_each_once(store, tmp_path):
    from recsync.io.gzip_shares import GzipFiles

    store, proxy = store
    paths, local, remote = gzip_files_on_the_store(store, proxy, tmp_path)
    every, skips = one_read(local)
    size = sum(p.stat().st_size for p in paths)
    local_nodes = readers_of(text_job(local, 2))  # local gzip files: a whole file each too
    assert isinstance(local_nodes[0].stream.source.lines, GzipFiles)
    served = proxy.served
    spec = text_job(remote, 2)
    nodes = readers_of(spec)
    assembled = proxy.served - served  # the cap's prefix, the planner's sample
    assert isinstance(nodes[0].stream.source.lines, GzipFiles)
    handed = drained(spec, nodes)
    read = proxy.served - served - assembled
    test_set = nodes[0].stream.source.test_set()
    assert test_set is not None and 0 < test_set.batch_size <= 300
    assert names(handed) == sorted(set(names(handed)))
    assert sorted(names(handed) + names([test_set])) == every
    assert size * 0.95 < read < size * 1.3, (read, size)  # each file once (the held prefix)
    report = joined_report([node.report() for node in nodes])
    assert report.skipped["by_reason"] == skips.counts
    three = readers_of(text_job(remote, 3))[0].stream.source.test_set()
    assert three is not None and torch.equal(three.dense, test_set.dense)
    here = local_nodes[0].stream.source.test_set()
    assert here is not None and torch.equal(here.dense, test_set.dense)


def test_a_cut_of_gzip_readers_midway_through_a_file_resumes_onto_three(store, tmp_path):
    from reader_jobs import cuts_of

    from recsync.data.shares import Deal
    from recsync.io.gzip_shares import FILE_SLOTS

    store, proxy = store
    _, local, remote = gzip_files_on_the_store(store, proxy, tmp_path)
    spec = text_job(remote, 2)
    state = next(s for s in cuts_of(spec, every_examples=2_500) if s.data_position > 0)
    assert state.data_unit == "gzfiles/1099511627776"
    position = state.stream_position
    assert any(b % FILE_SLOTS for _, b in position.beyond) or position.prefix % FILE_SLOTS
    resumed = text_job(remote, 3, resume=state)
    rest = names(drained(resumed))
    files = readers_of(spec)[0].stream.source.lines
    share = files.share(Deal(1, FILE_SLOTS), 0, 1, 1, False)
    before = []
    for file_index in range(files.blocks):
        made = 0
        for examples in share._file_examples(file_index, counted=False):
            for name in examples.dense[:, 0].tolist():
                slot = file_index * FILE_SLOTS + made
                if slot < position.prefix or any(a <= slot < b for a, b in position.beyond):
                    before.append(int(name))
                made += 1
    test_set = readers_of(spec)[0].stream.source.test_set()
    assert sorted(rest + before + names([test_set])) == one_read(local)[0]


def test_evaluations_and_cuts_over_byte_range_and_gzip_shares_count_examples(store, tmp_path):
    """Positions count slots (a gzip file's are 2**40), evaluations and cuts examples."""
    from recsync.coordinator.cuts import CheckpointEvery
    from recsync.coordinator.spec import plan_for
    from recsync.runtime.sim.cost import CostModel
    from recsync.runtime.sim.job import SimJob

    store, proxy = store
    _, _, remote = gzip_files_on_the_store(store, proxy, tmp_path)
    spec = text_job(remote, 2)
    states: list = []
    sim = SimJob(
        spec,
        plan_for(spec),
        CostModel(),
        eval_every=2_000,
        checkpoint_every=CheckpointEvery(examples=4_000),
        on_checkpoint=states.append,
    )
    summary = sim.run()
    trained = summary["examples_trained"]
    assert 13_000 < trained < 15_700
    marks = [record["examples"] for record in sim.curve[:-1]]  # trained at each mark
    assert len(marks) == (trained - 1) // 2_000 and marks == sorted(marks), marks
    assert len(states) == trained // 4_000
    assert all(s.data_unit == "gzfiles/1099511627776" for s in states)
