"""The hash index against a dict, and the hash shard: admission, eviction, the memory bound,
determinism, checkpoints (full and incremental, bit-identical) and the fixed shard's math."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from recsync.model.hash_spec import Admission, Eviction
from recsync.optim.rowwise import RowOptimizerSpec
from recsync.optim.swap import Swap
from recsync.ps.hash_delta import apply_shard_delta, shard_delta
from recsync.ps.hash_index import HashIndex
from recsync.ps.hash_shard import HashEmbeddingShard, HashTableConfig, TableFullError
from recsync.ps.shard import EmbeddingShard, row_gradients

ADAGRAD = RowOptimizerSpec("adagrad", lr=0.1)


def _key(table: int, id56: int) -> int:
    """A key as the data layer builds it, as a signed int64."""
    return ((table << 56) | id56) - (1 << 64) * (table >= 128)


def _keys(*ids: int) -> torch.Tensor:
    return torch.tensor(ids, dtype=torch.int64)


def _shard(opt: RowOptimizerSpec = ADAGRAD, **config: Any) -> HashEmbeddingShard:
    config = {"dim": 4, "initial_rows": 2} | config
    return HashEmbeddingShard(HashTableConfig(**config), opt, name="s7")


def _step(shard: HashEmbeddingShard, keys: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    offsets = torch.arange(keys.numel() + 1)
    pooled = shard.lookup(keys, offsets)
    rows, grads = row_gradients(keys, offsets, torch.randn(pooled.shape, generator=gen))
    shard.apply_gradients(rows, grads)
    return pooled


def _train(shard: HashEmbeddingShard, steps: int, seed: int, domain: int = 40) -> None:
    gen = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        ids = torch.randint(0, domain, (12,), generator=gen)
        _step(shard, ids * 7919 + (ids % 3) * (1 << 62), gen)


def _assert_same(a: Any, b: Any) -> None:
    if isinstance(a, dict):
        assert a.keys() == b.keys()
        for k in a:
            _assert_same(a[k], b[k])
    elif isinstance(a, torch.Tensor):
        assert a.dtype == b.dtype and torch.equal(a, b)
    else:
        assert a == b


# ---------------------------------------------------------------------------------------------
# HashIndex against a dict

KEY = st.sampled_from([_key(t, i) for t in (0, 1, 130, 255) for i in (0, 1, 2, 1 << 40, 77)])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.lists(KEY, max_size=12)), max_size=25))
def test_index_matches_a_dict(ops: list[tuple[bool, list[int]]]) -> None:
    index, model = HashIndex(2, first_slot=1), {}
    for delete, batch in ops:
        query = np.array(batch, dtype=np.int64)
        if delete:
            assert index.delete(query) == len(set(batch) & model.keys())
            for key in batch:
                model.pop(key, None)
        else:
            slots, inserted = index.find_or_insert(query)
            for key, slot, new in zip(batch, slots.tolist(), inserted.tolist(), strict=True):
                assert new == (key not in model) and model.setdefault(key, slot) == slot
        assert index.find(query).tolist() == [model.get(k, -1) for k in batch]
        assert len(index) == len(model) and 0 not in model.values()
        assert sorted(index.live_slots().tolist()) == sorted(model.values())
    assert index.table.size & (index.table.size - 1) == 0 and len(index) <= 0.75 * index.table.size


# ---------------------------------------------------------------------------------------------
# lookup, peek, admission


@settings(max_examples=20, deadline=None)
@given(st.lists(st.lists(KEY, min_size=1, max_size=8), min_size=1, max_size=6))
def test_rows_start_from_seed_and_key_only(batches: list[list[int]]) -> None:
    shard, other = _shard(seed=3), _shard(seed=3)
    for batch in batches:
        keys = torch.tensor(batch)
        expected = other.initial_rows(keys.numpy())
        assert torch.equal(shard.peek(keys, torch.arange(len(batch) + 1)), expected)
        assert torch.equal(shard.lookup(keys, torch.arange(len(batch) + 1)), expected)
    assert shard.num_rows == len({k for b in batches for k in b})
    everything = torch.tensor(sorted({k for b in batches for k in b}))
    assert torch.equal(shard.state_dict()["weight"], other.initial_rows(everything.numpy()))
    assert not torch.equal(other.initial_rows(everything.numpy()), _shard(seed=4).initial_rows(
        everything.numpy()
    ))  # fmt: skip


def test_lookup_pools_weighted_bags_and_peek_changes_nothing() -> None:
    shard = _shard()
    keys, offsets = _keys(5, 6, 5, 9), torch.tensor([0, 0, 3, 4])
    weights = torch.tensor([0.5, 1.0, 2.0, -1.0])
    rows = shard.initial_rows(keys.numpy())
    expected = torch.stack([torch.zeros(4), 0.5 * rows[0] + rows[1] + 2 * rows[2], -rows[3]])
    before = shard.state_dict()
    assert torch.allclose(shard.peek(keys, offsets, weights), expected)
    _assert_same(shard.state_dict(), before)
    assert torch.allclose(shard.lookup(keys, offsets, weights), expected)
    assert shard.num_rows == 3 and shard.stats()["totals"]["admitted_lookups"] == 4


def test_admission_min_count_two() -> None:
    shard, gen = _shard(admission=Admission(min_count=2)), torch.Generator().manual_seed(0)
    assert torch.equal(_step(shard, _keys(11, 12), gen), torch.zeros(2, 4))
    assert shard.num_rows == 0 and shard.skipped_updates == 2
    assert torch.equal(shard.peek(_keys(11), torch.tensor([0, 1])), torch.zeros(1, 4))
    assert torch.equal(shard.versions_of(_keys(11)), _keys(0))
    pooled = _step(shard, _keys(11), gen)
    assert torch.equal(pooled, shard.initial_rows(np.array([11])))
    assert shard.num_rows == 1 and torch.equal(shard.versions_of(_keys(11, 12)), _keys(1, 0))
    totals = shard.stats()["totals"]
    assert (totals["admitted_lookups"], totals["refused_lookups"]) == (1, 2)
    assert shard.weight[0].abs().sum() == 0  # the default vector is never trained


def test_admission_probability_is_a_deterministic_coin() -> None:
    def admitted(seed: int) -> torch.Tensor:
        shard = _shard(admission=Admission(probability=0.3), seed=seed)
        shard.lookup(torch.arange(2000), torch.arange(2001))
        return shard.state_dict()["keys"]

    assert torch.equal(admitted(1), admitted(1)) and not torch.equal(admitted(1), admitted(2))
    assert 450 < admitted(1).numel() < 750


# ---------------------------------------------------------------------------------------------
# eviction and the memory bound


def test_ttl_and_norm_eviction_free_slots_for_reuse() -> None:
    shard, gen = _shard(eviction=Eviction(ttl_steps=2)), torch.Generator().manual_seed(0)
    _step(shard, _keys(1, 2, 3), gen)
    for _ in range(3):
        _step(shard, _keys(3), gen)
    assert shard.evict() == 2 and shard.state_dict()["keys"].tolist() == [3]
    capacity = shard.capacity
    _step(shard, _keys(_key(200, 8), _key(200, 9)), gen)  # reuse the freed slots
    assert shard.capacity == capacity and torch.equal(shard.versions_of(_keys(1)), _keys(0))
    assert shard.stats()["per_table"][200] == {
        "rows": 2, "inserted": 2, "evicted": 0, "admitted_lookups": 2, "refused_lookups": 0
    }  # fmt: skip
    assert shard.evict(day_start_clock=shard.clock - 1) == 1  # key 3, last seen before
    small = _shard(eviction=Eviction(min_l2=0.04))
    small.lookup(torch.arange(50), torch.arange(51))
    norms = small.initial_rows(np.arange(50)).norm(dim=1)
    assert small.evict() == int((norms < 0.04).sum()) > 0


def test_max_rows_evicts_least_recently_seen() -> None:
    shard, gen = _shard(max_rows=64), torch.Generator().manual_seed(0)
    for key in range(64):
        _step(shard, _keys(key), gen)
    _step(shard, _keys(5), gen)
    _step(shard, _keys(100, 101), gen)  # evicts max(2, 64 // 64) = 2: keys 0 and 1
    kept = set(shard.state_dict()["keys"].tolist())
    assert shard.num_rows == 64 and shard.capacity == 65
    assert kept == set(range(2, 64)) | {100, 101}
    shard.lookup(torch.arange(1000, 1100), torch.arange(101))  # more new keys than rows
    assert shard.num_rows == 64 and shard.stats()["totals"]["refused_lookups"] == 36


def test_on_full_error_names_shard_table_and_bound() -> None:
    shard = _shard(max_rows=3, eviction=Eviction(on_full="error"))
    shard.lookup(_keys(1, 2), torch.tensor([0, 2]))
    with pytest.raises(
        TableFullError, match=r"'s7'.*max_rows = 3.*table 131 met a new id \(9\)"
    ) as err:
        shard.lookup(_keys(_key(131, 8), _key(131, 9), 1), torch.tensor([0, 3]))
    assert isinstance(err.value, ValueError) and shard.num_rows == 2


def test_config_errors_name_the_key() -> None:
    for bad, name in [
        (lambda: Admission(min_count=0), "min_count"),
        (lambda: HashTableConfig(dim=4, sketch_width=100), "sketch_width"),
        (lambda: HashTableConfig(dim=4, admission=Admission(min_count=70_000)), "min_count"),
        (lambda: Eviction(ttl_steps=-1), "ttl_steps"),
        (lambda: Eviction(on_full="drop"), "on_full"),  # type: ignore[arg-type]
        (lambda: HashTableConfig(dim=4, max_rows=0), "max_rows"),
    ]:
        with pytest.raises(ValueError, match=name):
            bad()


# ---------------------------------------------------------------------------------------------
# determinism, checkpoints


def test_same_seed_same_calls_same_tensors() -> None:
    config = {"admission": Admission(min_count=2), "max_rows": 30, "seed": 5}
    a, b = _shard(**config), _shard(**config)
    _train(a, 30, seed=1)
    _train(b, 30, seed=1)
    _assert_same(a.state_dict(), b.state_dict())


@pytest.mark.parametrize(
    "opt", [ADAGRAD, RowOptimizerSpec("adam", lr=0.01, swap=Swap(decay=0.9, period=3))]
)
def test_checkpoint_round_trip_and_deltas_are_bit_identical(opt: RowOptimizerSpec) -> None:
    config = {"admission": Admission(min_count=2), "max_rows": 30, "opt": opt}
    config |= {"eviction": Eviction(ttl_steps=20)}
    shard = _shard(**config)
    _train(shard, 15, seed=1)  # 40 keys through 30 rows: evictions
    base = previous = shard.state_dict()
    deltas, evicted = [], 0
    for day in range(3):
        _train(shard, 8, seed=10 + day, domain=12)  # the other rows age, then go
        evicted += shard.evict()
        state = shard.state_dict()
        deltas.append(shard_delta(previous, state))
        previous = state
    assert evicted > 0 and deltas[0]["keys"].numel() < 30 and deltas[0]["evicted"].numel() > 0
    for delta in deltas:
        base = apply_shard_delta(base, delta)
    restored, loaded = _shard(**config), _shard(**config)
    restored.load_state_dict(base)
    loaded.load_state_dict(shard.state_dict())
    for other in (restored, loaded):
        _assert_same(other.state_dict(), shard.state_dict())
        _train(other, 10, seed=99)
    _train(shard, 10, seed=99)
    probe = torch.arange(0, 40 * 7919, 7919)
    for other in (restored, loaded):
        _assert_same(other.state_dict(), shard.state_dict())
        assert torch.equal(other.peek(probe, torch.tensor([0, 20, 40])), shard.peek(
            probe, torch.tensor([0, 20, 40])
        ))  # fmt: skip


# ---------------------------------------------------------------------------------------------
# the fixed shard's optimizer math


@pytest.mark.parametrize(
    "opt",
    [
        RowOptimizerSpec("sgd", lr=0.1),
        ADAGRAD,
        RowOptimizerSpec("rowwise_adagrad", lr=0.1, initial_accumulator=0.1),
        RowOptimizerSpec("adam", lr=0.01),
        RowOptimizerSpec("adagrad", lr=0.1, swap=Swap(decay=0.5, period=2)),
    ],
)
def test_trains_like_the_fixed_shard(opt: RowOptimizerSpec) -> None:
    num_rows, gen = 10, torch.Generator().manual_seed(0)
    fixed = EmbeddingShard(torch.randn(num_rows, 4, generator=gen), opt.build(num_rows, 4))
    hashed = _shard(opt=opt)
    hashed.lookup(torch.arange(num_rows), torch.arange(num_rows + 1))
    state = hashed.state_dict()
    hashed.load_state_dict(state | {"weight": fixed.weight.clone()})
    for _ in range(8):
        ids = torch.randint(0, num_rows, (6,), generator=gen)
        offsets = torch.tensor([0, 2, 6])
        assert torch.equal(hashed.lookup(ids, offsets), fixed.lookup(ids, offsets))
        rows, grads = row_gradients(ids, offsets, torch.randn(2, 4, generator=gen))
        fixed.apply_gradients(rows, grads, lr_scale=0.5)
        hashed.apply_gradients(rows, grads, lr_scale=0.5)
    state = hashed.state_dict()
    assert torch.equal(state["weight"], fixed.weight) and torch.equal(
        state["versions"], fixed.versions
    )
    for name, tensor in fixed.optimizer.state_dict().items():
        assert torch.equal(state["optimizer"][name], tensor)
