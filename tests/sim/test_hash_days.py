"""Eviction by days of continual training (`Eviction.ttl_days`, ps/hash_days.py): a new day
on a hash shard's state, and continual runs that evict the rows whose ids stopped coming."""

from __future__ import annotations

import json
from typing import Any

import pytest
import torch
from small_jobs import small_continual

from recsync.app.config.load import load_config
from recsync.app.runs.checkpoints import load_run_checkpoint
from recsync.app.runs.continual import day_dir_name, run_continual
from recsync.app.runs.continual_options import ContinualOptions as Options
from recsync.errors import ConfigError
from recsync.model.hash_spec import Eviction
from recsync.optim.rowwise import RowOptimizerSpec
from recsync.ps.hash_days import new_day
from recsync.ps.hash_delta import apply_shard_delta, shard_delta
from recsync.ps.hash_shard import HashEmbeddingShard, HashTableConfig
from recsync.ps.shard import row_gradients


def _key(table: int, id56: int) -> int:
    return (table << 56) | id56


def _shard() -> HashEmbeddingShard:
    return HashEmbeddingShard(HashTableConfig(dim=4, initial_rows=2), RowOptimizerSpec("adagrad"))


def _see(shard: HashEmbeddingShard, *keys: int) -> None:
    """One training step on `keys` (a lookup and its update: the rows are seen)."""
    rows = torch.tensor(keys, dtype=torch.int64)
    offsets = torch.arange(rows.numel() + 1)
    pooled = shard.lookup(rows, offsets)
    shard.apply_gradients(*row_gradients(rows, offsets, torch.ones_like(pooled)))


def _loaded(state: dict[str, Any]) -> HashEmbeddingShard:
    shard = _shard()
    shard.load_state_dict(state)
    return shard


def test_eviction_by_days_is_validated():
    with pytest.raises(ValueError, match="ttl_days must be >= 1"):
        Eviction(ttl_days=0)
    bad = {"model.table_kind": "hash", "model.hash_tables.eviction.ttl_days": 0}
    with pytest.raises(ConfigError, match="model.hash_tables.eviction"):
        load_config(None, bad).to_specs()
    with pytest.raises(ValueError, match="ttl_days must be >= 1"):
        new_day(_shard().state_dict(), 0)


def test_rows_not_seen_in_the_last_ttl_days_go_at_a_new_day():
    # day 0 sees a (table 1) and b (table 2), day 1 c (table 1), day 2 a again and d
    a, b, c, d = _key(1, 5), _key(2, 5), _key(1, 6), _key(3, 7)
    shard = _shard()
    _see(shard, a, b)
    _see(shard, a, b)
    state = new_day(shard.state_dict(), ttl_days=2)  # day 1: nothing is two days old
    assert state["keys"].tolist() == sorted([a, b]) and state["day_starts"].numel() == 1
    assert state["clock"] == shard.clock + 1  # the day starts past every sighting so far
    shard = _loaded(state)
    _see(shard, c)
    state = new_day(shard.state_dict(), ttl_days=2)  # day 2: day 0's rows are in the window
    assert sorted(state["keys"].tolist()) == sorted([a, b, c])
    shard = _loaded(state)
    _see(shard, a, d)
    before = shard.state_dict()
    state = new_day(before, ttl_days=2)  # day 3: b, last seen 3 days ago (day 0), goes
    assert state["keys"].tolist() == sorted([a, c, d])
    assert state["day_starts"].tolist() == [*before["day_starts"].tolist(), before["clock"] + 1]
    evicted = state["counters"]["evicted"] - before["counters"]["evicted"]
    assert evicted.nonzero().squeeze(1).tolist() == [2] and int(evicted.sum()) == 1
    kept = torch.isin(before["keys"], state["keys"])
    for name in ("weight", "versions", "last_seen"):
        assert torch.equal(state[name], before[name][kept]), name
    for name, value in state["optimizer"].items():
        assert torch.equal(value, before["optimizer"][name][kept]), name
    assert int(state["day_starts"][0]) <= int(state["last_seen"].min())
    # a longer window keeps b; the state given is not changed
    assert sorted(new_day(before, ttl_days=3)["keys"].tolist()) == sorted([a, b, c, d])
    assert before["keys"].numel() == 4
    # the new day's state loads into a shard and comes back whole, its days included
    shard = _loaded(state)
    again = shard.state_dict()
    assert again.keys() == state.keys()
    for name in ("keys", "weight", "versions", "last_seen", "day_starts", "sketch"):
        assert torch.equal(again[name], state[name]), name
    assert again["clock"] == state["clock"]
    stats = shard.stats()
    assert stats["num_rows"] == 3 and stats["totals"]["evicted"] == 1
    assert stats["per_table"][2]["rows"] == 0 and stats["per_table"][1]["rows"] == 2
    # a full checkpoint, then a delta of the next steps, keep the days too
    _see(shard, b)
    applied = apply_shard_delta(state, shard_delta(state, shard.state_dict()))
    assert torch.equal(applied["day_starts"], state["day_starts"])


def test_one_day_ttl_drops_exactly_the_rows_the_last_day_did_not_see():
    shard = _shard()
    keys = [_key(1, i) for i in range(10)]
    _see(shard, *keys)
    state = new_day(shard.state_dict(), ttl_days=1)  # day 1: day 0 is the window
    assert state["keys"].numel() == 10
    shard = _loaded(state)
    _see(shard, *keys[:4])
    state = new_day(shard.state_dict(), ttl_days=1)  # day 2: only day 1's rows stay
    assert state["keys"].tolist() == keys[:4]
    assert int(state["counters"]["evicted"][1]) == 6 == int(state["counters"]["inserted"][1]) - 4


def test_a_continual_run_evicts_the_rows_of_ids_that_stopped_coming(tmp_path):
    # four days (three trained) of 50 ids a feature, 30% of them replaced by new ids every
    # day: day 2 starts without the rows day 1 did not see (ids gone, or rare)
    more = {
        "model.table_kind": "hash",
        "model.hash_tables.eviction.ttl_days": 1,
        "data.synthetic.id_churn": 0.3,
    }
    root = tmp_path / "days"
    config = load_config(None, small_continual(4, **more))
    records = run_continual(config, root, Options("sim"), progress=False)
    assert [r["day"] for r in records] == [0, 1, 2]
    ends = [load_run_checkpoint(root / day_dir_name(day))[0] for day in range(3)]
    rows = [
        json.loads((root / day_dir_name(day) / "summary.json").read_text())["embedding_rows"]
        for day in range(3)
    ]
    assert all("day_starts" not in s for s in ends[0].shards)  # day 0 started no day
    assert [s["day_starts"].numel() for s in ends[1].shards] == [1, 1]  # kept through day 1
    assert [s["day_starts"].numel() for s in ends[2].shards] == [2, 2]
    assert rows[0]["evicted"] == rows[1]["evicted"] == 0  # day 1 kept day 0's rows: its window
    # day 2 began with day 1's end less the rows not seen on day 1, and only those went
    unseen = sum(int((s["last_seen"] < int(s["day_starts"][-1])).sum()) for s in ends[1].shards)
    assert rows[2]["evicted"] == unseen > 0
    for shard in ends[2].shards:
        assert int(shard["last_seen"].min()) >= int(shard["day_starts"][0])  # seen day 1 or 2
    for summary in rows:
        assert summary["live"] == summary["inserted"] - summary["evicted"]
        for table in summary["per_table"].values():
            assert table["live"] == table["inserted"] - table["evicted"]
