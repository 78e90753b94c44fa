"""Hash tables in a job: the config that picks them, their layout over shards, training in
the simulator, checkpoints and resume, and the export for serving."""

from __future__ import annotations

import dataclasses

import pyarrow.parquet as pq
import pytest
import torch

from recsync.app.config.load import load_config
from recsync.coordinator.cuts import CheckpointEvery
from recsync.coordinator.spec import ClusterSpec, JobSpec, plan_for
from recsync.data.batch import collate
from recsync.data.keys import make_keys
from recsync.data.synthetic import SyntheticSpec
from recsync.errors import ConfigError
from recsync.families import strategy_config
from recsync.model.hash_spec import Admission, Eviction, HashTables
from recsync.model.spec import ModelSpec, TableSpec
from recsync.optim.rowwise import RowOptimizerSpec
from recsync.optim.train_spec import TrainSpec
from recsync.ps.hash_layout import HashLayout, shard_of_keys
from recsync.ps.local import LocalEmbeddings, build_shards
from recsync.ps.serving_tables import KeyedRows
from recsync.runtime.sim.cost import CostModel
from recsync.runtime.sim.job import SimJob

TABLES = tuple(TableSpec(f"C{i}", 50, 4, "mean" if i == 2 else "sum") for i in range(3))


def keyed_batch(rows: list[list[list[int]]]) -> torch.Tensor:
    """A batch of raw ids per example and feature, as feature-prefixed keys."""
    batch = collate([[0.0]] * len(rows), rows, [0.0] * len(rows))
    B, F = batch.batch_size, batch.num_features
    lengths = batch.bag_lengths().reshape(F, B).sum(1)
    parts, start = [], 0
    for f, n in enumerate(lengths.tolist()):
        parts.append(torch.from_numpy(make_keys(f, batch.ids[start : start + n].numpy())))
        start += n
    return dataclasses.replace(batch, ids=torch.cat(parts))


def test_auto_table_kind_is_hash_for_file_data_and_fixed_with_table_rows():
    base = {"data.source": "criteo", "data.path": "x.tsv", "data.test_fraction": 0.1}
    assert load_config(None, base).to_specs().model.hash_tables is not None
    fixed = load_config(None, {**base, "model.table_rows": 1000})
    assert fixed.to_specs().model.hash_tables is None
    assert load_config(None, {}).to_specs().model.hash_tables is None  # synthetic
    hashed = load_config(None, {"model.table_kind": "hash"}).to_specs()
    assert hashed.model.hash_tables is not None and hashed.synthetic.keyed


def test_hash_table_keys_are_validated_by_name():
    bad = {"model.table_kind": "hash", "model.hash_tables.admission.min_count": 0}
    with pytest.raises(ConfigError, match="model.hash_tables.admission"):
        load_config(None, bad).to_specs()


def test_any_number_of_shards_pools_what_one_shard_pools():
    config = HashTables()
    spec = RowOptimizerSpec("adagrad", lr=0.1)
    batch = keyed_batch([[[1, 2], [7], [3, 4, 5]], [[2], [], [9]], [[11], [7, 8], [2**40]]])
    one = HashLayout(TABLES, 1, config)
    three = HashLayout(TABLES, 3, config)
    single = LocalEmbeddings(one, build_shards(one, spec, seed=4))
    split = LocalEmbeddings(three, build_shards(three, spec, seed=4))
    for _ in range(3):  # trained the same way, they stay the same
        a, requests_a = single.lookup(batch)
        b, requests_b = split.lookup(batch)
        torch.testing.assert_close(a, b)
        grad = torch.randn(a.shape, generator=torch.Generator().manual_seed(0))
        single.apply(grad, requests_a)
        split.apply(grad, requests_b)
    assert sum(s.num_rows for s in split.shards) == single.shards[0].num_rows == 10


def test_the_same_id_in_two_features_is_two_rows():
    layout = HashLayout(TABLES[:2], 1, HashTables())
    embeddings = LocalEmbeddings(layout, build_shards(layout, RowOptimizerSpec(), seed=0))
    pooled, _ = embeddings.lookup(keyed_batch([[[5], [5]]]))
    assert embeddings.shards[0].num_rows == 2
    assert not torch.equal(pooled[0, 0], pooled[0, 1])


def test_keys_spread_evenly_over_shards():
    keys = torch.from_numpy(make_keys(3, torch.arange(100_000).numpy()))
    counts = torch.bincount(shard_of_keys(keys, 8), minlength=8)
    assert int(counts.min()) > 0.9 * 100_000 / 8


def test_admission_keeps_a_once_seen_id_out():
    config = HashTables(admission=Admission(min_count=2))
    layout = HashLayout(TABLES[:1], 1, config)
    embeddings = LocalEmbeddings(layout, build_shards(layout, RowOptimizerSpec(), seed=0))
    first, _ = embeddings.lookup(keyed_batch([[[6]]]))
    assert torch.equal(first, torch.zeros_like(first)) and embeddings.shards[0].num_rows == 0
    embeddings.lookup(keyed_batch([[[6]]]))
    assert embeddings.shards[0].num_rows == 1


def small_job(**hash_fields: object) -> JobSpec:
    synthetic = SyntheticSpec(
        num_train=2_048, num_test=512, num_dense=2, table_rows=(40,) * 3, keyed=True
    )
    model = ModelSpec(
        num_dense=2,
        tables=tuple(TableSpec(f"C{i}", 40, 4) for i in range(3)),
        bottom_mlp=(4,),
        top_mlp=(8,),
        hash_tables=HashTables(**hash_fields),  # type: ignore[arg-type]
    )
    cluster = ClusterSpec(2, 2, 2, num_dense_servers=1)
    return JobSpec(model, TrainSpec(batch_size=64), cluster, strategy_config("easgd"), synthetic)


def test_a_simulated_job_trains_hash_tables_deterministically():
    spec = small_job()
    first = SimJob(spec, plan_for(spec), CostModel()).run()
    second = SimJob(spec, plan_for(spec), CostModel()).run()
    assert first["examples_trained"] == 2_048
    assert first["test_auc"] == second["test_auc"] > 0.55
    assert first["embedding_rows"]["live"] == 120  # every id of 3 x 40 was seen


def test_keyed_rows_pool_as_the_shards_do():
    layout = HashLayout(TABLES, 2, HashTables())
    embeddings = LocalEmbeddings(layout, build_shards(layout, RowOptimizerSpec(), seed=2))
    batch = keyed_batch([[[1, 2], [7], [3, 4]], [[2], [], [9]]])
    trained, _ = embeddings.lookup(batch)
    rows = KeyedRows.from_shards([s.state_dict() for s in embeddings.shards])
    torch.testing.assert_close(rows.pooled(TABLES, batch.ids, batch.offsets), trained)
    ids, vectors = rows.table(2)
    assert ids.tolist() == [3, 4, 9] and vectors.shape == (3, 4)
    unseen = keyed_batch([[[99], [98], [97]]])
    pooled = rows.pooled(TABLES, unseen.ids, unseen.offsets)
    assert torch.equal(pooled, torch.zeros_like(pooled))


def test_export_writes_plain_parquet_tables_and_a_dense_program(tmp_path):
    from recsync.app.runs.export_keyed import delta, read_table, table_arrow

    ids, vectors = torch.tensor([5, 9, 2]), torch.arange(6.0).reshape(3, 2)
    path = tmp_path / "t.parquet"
    pq.write_table(table_arrow(ids, vectors), path)
    got_ids, got_vectors = read_table(path)
    assert got_ids.tolist() == [5, 9, 2] and torch.equal(got_vectors, vectors)
    new_vectors = vectors.clone()
    new_vectors[1] += 1
    changes = delta((ids, vectors), (torch.tensor([5, 9, 7]), new_vectors)).to_pydict()
    assert changes["id"] == [9, 7, 2] and changes["deleted"] == [False, False, True]


@pytest.mark.parametrize("eviction", [Eviction(), Eviction(ttl_steps=3)], ids=["keep", "ttl"])
def test_a_hash_table_job_resumed_from_a_cut_ends_with_the_uninterrupted_jobs_model(eviction):
    # sync's math does not depend on timing: a resumed job must end bit-identical to the
    # uninterrupted one, rows, keys, optimizer state, sketch and counters (with eviction at
    # every cut too: both runs evict the same rows at the same points)
    synthetic = SyntheticSpec(
        num_train=3_200, num_test=500, num_dense=2, table_rows=(60,) * 3, keyed=True
    )
    model = ModelSpec(
        num_dense=2,
        tables=tuple(TableSpec(f"C{i}", 60, 4) for i in range(3)),
        bottom_mlp=(4,),
        top_mlp=(8,),
        hash_tables=HashTables(admission=Admission(min_count=2), eviction=eviction),
    )
    cluster = ClusterSpec(2, 2, 2, num_dense_servers=2)
    spec = JobSpec(model, TrainSpec(batch_size=64), cluster, strategy_config("sync"), synthetic)
    states: list = []
    every = CheckpointEvery(examples=800)
    sim = SimJob(
        spec, plan_for(spec), CostModel(), checkpoint_every=every, on_checkpoint=states.append
    )
    summary = sim.run()
    assert summary["embedding_rows"]["refused_lookups"] > 0
    assert (summary["embedding_rows"]["evicted"] > 0) == (eviction.ttl_steps is not None)
    final = sim.final_state
    state = states[1]
    resumed_spec = dataclasses.replace(spec, resume=state)
    resumed = SimJob(resumed_spec, plan_for(resumed_spec), CostModel(), checkpoint_every=every)
    resumed.run()
    assert torch.equal(resumed.final_state.dense, final.dense)
    for mine, theirs in zip(resumed.final_state.shards, final.shards, strict=True):
        assert mine.keys() == theirs.keys()
        for name in ("keys", "weight", "versions", "last_seen", "sketch"):
            assert torch.equal(mine[name], theirs[name]), name


def test_the_export_page_scores_a_keyed_export_as_predict_does(tmp_path, monkeypatch):
    import re
    from pathlib import Path

    from test_cli import invoke

    monkeypatch.chdir(tmp_path)
    lines = [
        f"{(u + i) % 2} 0:{10**12 + u}:1 1:{7 * 10**15 + i}:1" for u in range(40) for i in range(25)
    ]
    (tmp_path / "clicks.ffm").write_text("\n".join(lines) + "\n")
    data = ["--set", "data.source=libffm", "--set", "data.path=clicks.ffm"]
    trained = invoke(
        "simulate", *data, "--set", "data.test_fraction=0.2", "--set", "model.num_tables=2",
        "--set", "model.embedding_dim=4", "--name", "r", "--no-progress",
    )  # fmt: skip
    assert trained.exit_code == 0, trained.output
    assert invoke("export", "runs/r", "model_dir").exit_code == 0
    predicted = invoke("predict", "runs/r", "clicks.ffm", "--out", "s.parquet")
    assert predicted.exit_code == 0, predicted.output
    page = Path(__file__).resolve().parents[2] / "docs" / "export.md"
    found = re.search(
        r"<!-- keyed-export-snippet -->\n```python\n(.*?)```", page.read_text("utf-8"), re.S
    )
    assert found, "docs/export.md has no keyed export snippet"
    snippet = found
    scope: dict = {}
    exec(compile(snippet.group(1), "docs/export.md snippet", "exec"), scope)
    scores = pq.read_table(tmp_path / "s.parquet").column("score").to_pylist()
    for n in (0, 333, 999):
        user, item = lines[n].split()[1:]
        got = scope["score"]([[int(user.split(":")[1])], [int(item.split(":")[1])]], [])
        assert float(got[0]) == pytest.approx(scores[n], abs=1e-6)


def test_full_and_delta_checkpoints_load_back_as_the_last_cut(tmp_path):
    from recsync.app.runs.checkpoints import (
        DELTA_GLOB,
        CheckpointWriter,
        load_run_checkpoint,
    )

    spec = small_job(eviction=Eviction(ttl_steps=2), admission=Admission(min_count=2))
    synthetic = dataclasses.replace(spec.synthetic, table_rows=(3_000,) * 3)
    spec = dataclasses.replace(spec, strategy=strategy_config("sync"), synthetic=synthetic)
    spec = dataclasses.replace(spec, cluster=ClusterSpec(2, 2, 2, num_dense_servers=1))
    writer = CheckpointWriter(tmp_path, deltas_per_full=2)
    states: list = []

    def cut(state):
        states.append(state)
        writer.write(state)
        writer.wait()
        loaded, refused = load_run_checkpoint(tmp_path)  # base + every delta so far
        assert refused is None
        for mine, theirs in zip(loaded.shards, state.shards, strict=True):
            for name in ("keys", "weight", "versions", "last_seen", "sketch"):
                assert torch.equal(mine[name], theirs[name]), name
            for name, value in theirs["optimizer"].items():
                assert torch.equal(mine["optimizer"][name], value), name
        assert torch.equal(loaded.dense, state.dense)

    every = CheckpointEvery(examples=256)
    SimJob(spec, plan_for(spec), CostModel(), checkpoint_every=every, on_checkpoint=cut).run()
    written = writer.stats()
    assert written["full"]["count"] >= 2 and written["delta"]["count"] >= 4
    assert written["delta"]["bytes"] / written["delta"]["count"] < (
        written["full"]["bytes"] / written["full"]["count"]
    )
    deltas = sorted(tmp_path.glob(DELTA_GLOB))
    if deltas:  # a damaged delta: the chain stops before it, and says so
        deltas[-1].write_bytes(deltas[-1].read_bytes()[:-10])
        _, refused = load_run_checkpoint(tmp_path)
        assert refused is not None and "corrupted delta" in refused


def test_the_simulator_charges_a_hash_tables_rows_their_own_price():
    hashed = small_job()
    hashed = dataclasses.replace(hashed, cluster=ClusterSpec(2, 2, 1, num_dense_servers=1))
    fixed = dataclasses.replace(
        hashed,
        model=dataclasses.replace(hashed.model, hash_tables=None),
        synthetic=dataclasses.replace(hashed.synthetic, keyed=False),
    )

    def seconds(spec: JobSpec, hash_row_s: float) -> float:
        cost = CostModel(row_s=1e-6, hash_row_s=hash_row_s)
        return SimJob(spec, plan_for(spec), cost).run()["train_seconds"]

    assert seconds(hashed, 0.0) == seconds(fixed, 0.0) == seconds(fixed, 1e-5)
    assert seconds(hashed, 1e-5) > seconds(hashed, 0.0)
