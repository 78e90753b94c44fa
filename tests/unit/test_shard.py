"""Embedding shards, layouts and the batch format: pooled lookup and row gradients against
autograd through embedding_bag, multi-shard routing against a single shard, batch re-cutting."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F_

from recsync.data.batch import Batch, collate, concat, rebatch
from recsync.model.priced import PricedTensor, is_priced
from recsync.model.spec import TableSpec
from recsync.optim.rowwise import RowOptimizerSpec, RowSGD
from recsync.ps.layout import EmbeddingLayout, TableSlice
from recsync.ps.local import LocalEmbeddings, build_shards
from recsync.ps.shard import (
    EmbeddingShard,
    init_table,
    row_gradients,
    row_gradients_with_inverse,
)

# ---------------------------------------------------------------------------------------------
# EmbeddingShard.lookup and row_gradients against autograd

# 6 bags over a 9-row shard: duplicates inside a bag (2, 2), across bags (2, 5, 0),
# empty bags at the start, in the middle and at the end.
ROWS = torch.tensor([2, 2, 5, 0, 5, 8, 2, 0, 0, 3], dtype=torch.int64)
OFFSETS = torch.tensor([0, 0, 3, 6, 6, 10, 10], dtype=torch.int64)
NUM_BAGS = 6


def _shard(num_rows: int = 9, dim: int = 3, seed: int = 0) -> EmbeddingShard:
    weight = torch.randn(num_rows, dim, generator=torch.Generator().manual_seed(seed))
    return EmbeddingShard(weight, RowSGD(num_rows, dim, lr=0.1))


def _autograd_reference(weight, rows, offsets, grad_bags, mode, per_sample_weights=None):
    w = weight.clone().requires_grad_()
    pooled = F_.embedding_bag(
        rows,
        w,
        offsets,
        mode=mode,
        per_sample_weights=per_sample_weights,
        include_last_offset=True,
    )
    (pooled * grad_bags).sum().backward()
    return pooled.detach(), w.grad


def _dense(rows, grads, num_rows):
    out = torch.zeros(num_rows, grads.shape[1])
    out.index_add_(0, rows, grads)
    return out


def _mean_weights(offsets, num_ids):
    lengths = offsets[1:] - offsets[:-1]
    inv = 1.0 / lengths.clamp(min=1).to(torch.float32)
    return inv.repeat_interleave(lengths, output_size=num_ids)


@pytest.mark.parametrize("pooling", ["sum", "weighted", "mean"])
def test_lookup_and_row_gradients_match_autograd(pooling):
    shard = _shard()
    grad_bags = torch.randn(NUM_BAGS, 3, generator=torch.Generator().manual_seed(1))
    if pooling == "sum":
        weights, mode, ref_weights = None, "sum", None
    elif pooling == "weighted":
        weights = torch.rand(ROWS.numel(), generator=torch.Generator().manual_seed(2)) + 0.5
        mode, ref_weights = "sum", weights
    else:
        weights = _mean_weights(OFFSETS, ROWS.numel())
        mode, ref_weights = "mean", None
    ref_pooled, ref_grad = _autograd_reference(
        shard.weight, ROWS, OFFSETS, grad_bags, mode, ref_weights
    )

    pooled = shard.lookup(ROWS, OFFSETS, weights)
    assert pooled.shape == (NUM_BAGS, 3)
    torch.testing.assert_close(pooled, ref_pooled, rtol=1e-6, atol=1e-6)
    # empty bags pool to zero
    for b in (0, 3, 5):
        assert torch.equal(pooled[b], torch.zeros(3))

    rows, grads = row_gradients(ROWS, OFFSETS, grad_bags, weights)
    assert torch.equal(rows, torch.tensor([0, 2, 3, 5, 8]))  # unique, sorted
    assert grads.shape == (5, 3)
    torch.testing.assert_close(_dense(rows, grads, 9), ref_grad, rtol=1e-6, atol=1e-6)


def test_row_gradients_hand_values():
    # bags: [1, 1] and [1, 0]; grad_bags g0 = (1, 2), g1 = (10, 20)
    rows = torch.tensor([1, 1, 1, 0])
    offsets = torch.tensor([0, 2, 4])
    grad_bags = torch.tensor([[1.0, 2.0], [10.0, 20.0]])
    unique, grads = row_gradients(rows, offsets, grad_bags)
    assert torch.equal(unique, torch.tensor([0, 1]))
    assert torch.equal(grads, torch.tensor([[10.0, 20.0], [12.0, 24.0]]))
    weights = torch.tensor([0.5, 0.25, 2.0, 3.0])
    unique, grads = row_gradients(rows, offsets, grad_bags, weights)
    # row 0: 3 * g1 ; row 1: 0.75 * g0 + 2 * g1
    assert torch.equal(grads, torch.tensor([[30.0, 60.0], [20.75, 41.5]]))


def test_all_bags_empty():
    shard = _shard()
    rows = torch.empty(0, dtype=torch.int64)
    offsets = torch.zeros(4, dtype=torch.int64)
    assert torch.equal(shard.lookup(rows, offsets), torch.zeros(3, 3))
    unique, grads = row_gradients(rows, offsets, torch.ones(3, 3))
    assert unique.numel() == 0 and grads.shape == (0, 3)


def test_apply_gradients_counts_versions_and_global_step():
    shard = _shard()
    before = shard.weight.clone()
    shard.apply_gradients(torch.tensor([1, 4]), torch.ones(2, 3))
    shard.apply_gradients(torch.tensor([4, 7]), torch.full((2, 3), 2.0))
    assert shard.global_step == 2
    assert shard.versions.tolist() == [0, 1, 0, 0, 2, 0, 0, 1, 0]
    assert torch.equal(shard.versions[torch.tensor([4, 1, 0])], torch.tensor([2, 1, 0]))
    expected = before.clone()
    expected[1] -= 0.1
    expected[4] -= 0.1 + 0.2
    expected[7] -= 0.2
    torch.testing.assert_close(shard.weight, expected)


def test_shard_state_dict_round_trip():
    shard = _shard()
    shard.apply_gradients(torch.tensor([0, 3]), torch.ones(2, 3))
    state = {
        k: (v.clone() if isinstance(v, torch.Tensor) else v) for k, v in shard.state_dict().items()
    }
    other = _shard(seed=5)
    other.load_state_dict(state)
    assert torch.equal(other.weight, shard.weight)
    assert torch.equal(other.versions, shard.versions)
    assert other.global_step == 1


def test_init_table_depends_on_seed_and_row_only():
    a = init_table(10, 4, seed=3)
    assert torch.equal(a, init_table(10, 4, seed=3))
    assert not torch.equal(a, init_table(10, 4, seed=4))
    assert float(a.abs().max()) <= 0.05 / 2 + 1e-7


# ---------------------------------------------------------------------------------------------
# EmbeddingLayout: one table split over two shards, others whole on different shards

TABLES = (
    TableSpec("T0", 10, 3, pooling="mean"),  # split: rows [0, 6) on shard 0, [6, 10) on shard 1
    TableSpec("T1", 5, 3),  # whole on shard 1, before T0's second slice
    TableSpec("T2", 7, 3),  # whole on shard 2
)
SLICES = [
    TableSlice(table=0, row_start=0, row_end=6, shard=0, shard_row=0),
    TableSlice(table=0, row_start=6, row_end=10, shard=1, shard_row=5),
    TableSlice(table=1, row_start=0, row_end=5, shard=1, shard_row=0),
    TableSlice(table=2, row_start=0, row_end=7, shard=2, shard_row=0),
]


def _examples():
    """(dense, bags, label) for 5 examples, 3 features; several ids, duplicates, empty bags."""
    return [
        ([0.1, 0.2], [[0, 7, 7], [4], [6, 0]], 1.0),
        ([0.3, 0.4], [[], [0, 0], [3]], 0.0),
        ([0.5, 0.6], [[9, 5, 6, 2], [], []], 1.0),
        ([0.7, 0.8], [[5], [1, 2, 3], [6, 6, 6]], 0.0),
        ([0.9, 1.0], [[8], [4], []], 1.0),
    ]


def _batch(examples=None) -> Batch:
    examples = _examples() if examples is None else examples
    return collate([e[0] for e in examples], [e[1] for e in examples], [e[2] for e in examples])


def _global_row_maps(layout: EmbeddingLayout):
    """Per shard, a tensor mapping local shard row -> (table, table row) pairs."""
    maps = [dict() for _ in range(layout.num_shards)]
    for s in layout.slices:
        for r in range(s.row_start, s.row_end):
            maps[s.shard][s.shard_row + r - s.row_start] = (s.table, r)
    return maps


def _single_index(table: int, row: int) -> int:
    return sum(t.num_rows for t in TABLES[:table]) + row


def test_layout_rejects_incomplete_cover():
    with pytest.raises(ValueError, match="T0"):
        EmbeddingLayout(TABLES, SLICES[1:], 3)


def test_layout_shard_rows():
    layout = EmbeddingLayout(TABLES, SLICES, 3)
    assert layout.shard_rows == [6, 9, 7]
    single = EmbeddingLayout.single_shard(TABLES)
    assert single.num_shards == 1 and single.shard_rows == [22]


def test_build_shards_same_rows_in_any_layout():
    spec = RowOptimizerSpec(name="sgd", lr=0.1)
    single = build_shards(EmbeddingLayout.single_shard(TABLES), spec, seed=3)
    multi_layout = EmbeddingLayout(TABLES, SLICES, 3)
    multi = build_shards(multi_layout, spec, seed=3)
    for shard, mapping in enumerate(_global_row_maps(multi_layout)):
        for local, (t, r) in mapping.items():
            assert torch.equal(multi[shard].weight[local], single[0].weight[_single_index(t, r)])


def _reference_pooled(single_weight: torch.Tensor, batch: Batch) -> torch.Tensor:
    """B x F x D by hand: per example and feature, the sum (or mean) of the table's rows."""
    B = batch.batch_size
    out = torch.zeros(B, len(TABLES), 3)
    for f, spec in enumerate(TABLES):
        for b in range(B):
            start, stop = int(batch.offsets[f * B + b]), int(batch.offsets[f * B + b + 1])
            ids = batch.ids[start:stop].tolist()
            if not ids:
                continue
            rows = single_weight[[_single_index(f, i) for i in ids]]
            out[b, f] = rows.mean(0) if spec.pooling == "mean" else rows.sum(0)
    return out


def test_multi_shard_lookup_equals_single_shard():
    spec = RowOptimizerSpec(name="sgd", lr=0.1)
    single_layout = EmbeddingLayout.single_shard(TABLES)
    multi_layout = EmbeddingLayout(TABLES, SLICES, 3)
    single = LocalEmbeddings(single_layout, build_shards(single_layout, spec, seed=1))
    multi = LocalEmbeddings(multi_layout, build_shards(multi_layout, spec, seed=1))
    batch = _batch()

    pooled_single, requests_single = single.lookup(batch)
    pooled_multi, requests_multi = multi.lookup(batch)
    assert len(requests_single) == 1
    assert sorted(r.shard for r in requests_multi) == [0, 1, 2]
    assert pooled_single.shape == pooled_multi.shape == (5, 3, 3)
    expected = _reference_pooled(single.shards[0].weight, batch)
    torch.testing.assert_close(pooled_single, expected, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(pooled_multi, expected, rtol=1e-6, atol=1e-6)


def test_multi_shard_row_gradients_equal_single_shard():
    spec = RowOptimizerSpec(name="sgd", lr=0.1)
    single_layout = EmbeddingLayout.single_shard(TABLES)
    multi_layout = EmbeddingLayout(TABLES, SLICES, 3)
    batch = _batch()
    grad_pooled = torch.randn(5, 3, 3, generator=torch.Generator().manual_seed(9))

    (req,) = single_layout.route(batch)
    rows, grads = row_gradients(
        req.rows, req.offsets, single_layout.bag_gradients(grad_pooled, req), req.weights
    )
    expected = _dense(rows, grads, 22)

    # autograd through the single-shard pooled lookup gives the same row gradients
    weight = build_shards(single_layout, spec, seed=1)[0].weight.clone().requires_grad_()
    pooled = F_.embedding_bag(
        req.rows,
        weight,
        req.offsets,
        mode="sum",
        per_sample_weights=req.weights,
        include_last_offset=True,
    )
    (single_layout.combine(5, [req], [pooled]) * grad_pooled).sum().backward()
    torch.testing.assert_close(expected, weight.grad, rtol=1e-6, atol=1e-6)

    got = torch.zeros(22, 3)
    maps = _global_row_maps(multi_layout)
    for r in multi_layout.route(batch):
        local_rows, local_grads = row_gradients(
            r.rows, r.offsets, multi_layout.bag_gradients(grad_pooled, r), r.weights
        )
        assert int(local_rows.max()) < multi_layout.shard_rows[r.shard]
        for local, g in zip(local_rows.tolist(), local_grads, strict=True):
            table, row = maps[r.shard][local]
            got[_single_index(table, row)] += g
    torch.testing.assert_close(got, expected, rtol=1e-6, atol=1e-6)


def test_multi_shard_update_and_versions_equal_single_shard():
    spec = RowOptimizerSpec(name="adagrad", lr=0.1)
    single_layout = EmbeddingLayout.single_shard(TABLES)
    multi_layout = EmbeddingLayout(TABLES, SLICES, 3)
    single = LocalEmbeddings(single_layout, build_shards(single_layout, spec, seed=1))
    multi = LocalEmbeddings(multi_layout, build_shards(multi_layout, spec, seed=1))
    gen = torch.Generator().manual_seed(4)
    batches = [_batch(), _batch(_examples()[1:3]), _batch(_examples()[4:])]
    for batch in batches:
        grad = torch.randn(batch.batch_size, 3, 3, generator=gen)
        _, requests = single.lookup(batch)
        single.apply(grad, requests)
        _, requests = multi.lookup(batch)
        multi.apply(grad, requests)

    # versions: number of batches whose bags touched the row
    touched = torch.zeros(22, dtype=torch.int64)
    for batch in batches:
        seen = set()
        B = batch.batch_size
        for f in range(3):
            start, stop = int(batch.offsets[f * B]), int(batch.offsets[(f + 1) * B])
            seen |= {_single_index(f, i) for i in batch.ids[start:stop].tolist()}
        touched[list(seen)] += 1
    assert torch.equal(single.shards[0].versions, touched)
    assert single.shards[0].global_step == 3
    for shard, mapping in enumerate(_global_row_maps(multi_layout)):
        for local, (t, r) in mapping.items():
            i = _single_index(t, r)
            assert int(multi.shards[shard].versions[local]) == int(touched[i])
            torch.testing.assert_close(
                multi.shards[shard].weight[local],
                single.shards[0].weight[i],
                rtol=1e-6,
                atol=1e-6,
            )


# ---------------------------------------------------------------------------------------------
# Batch: slice / concat / rebatch / validate


def _as_examples(batch: Batch):
    B, F = batch.batch_size, batch.num_features
    out = []
    for b in range(B):
        bags = []
        for f in range(F):
            start, stop = int(batch.offsets[f * B + b]), int(batch.offsets[f * B + b + 1])
            bags.append(batch.ids[start:stop].tolist())
        out.append((batch.dense[b].tolist(), bags, float(batch.labels[b])))
    return out


def _assert_batch_equal(got: Batch, want: Batch):
    assert torch.equal(got.dense, want.dense)
    assert torch.equal(got.ids, want.ids)
    assert torch.equal(got.offsets, want.offsets)
    assert torch.equal(got.labels, want.labels)


def test_collate_round_trip():
    batch = _batch()
    assert batch.batch_size == 5 and batch.num_features == 3
    assert int(batch.offsets[-1]) == batch.ids.numel()
    assert _as_examples(batch) == [
        (torch.tensor(d).tolist(), bags, label) for d, bags, label in _examples()
    ]


@pytest.mark.parametrize(("start", "stop"), [(0, 5), (0, 1), (1, 3), (2, 5), (4, 5), (3, 3)])
def test_slice_keeps_examples(start, stop):
    batch = _batch()
    part = batch.slice(start, stop)
    assert part.batch_size == stop - start
    assert _as_examples(part) == _as_examples(batch)[start:stop]
    if stop > start:
        _assert_batch_equal(part, _batch(_examples()[start:stop]))


def test_concat_of_slices_is_the_batch():
    batch = _batch()
    parts = [batch.slice(0, 2), batch.slice(2, 3), batch.slice(3, 5)]
    _assert_batch_equal(concat(parts), batch)
    assert concat([batch]) is batch


@pytest.mark.parametrize("batch_size", [1, 2, 3, 4, 7])
def test_rebatch_keeps_every_example_once_in_order(batch_size):
    examples = _examples() * 2  # 10 examples
    chunks = [_batch(examples[i:j]) for i, j in [(0, 3), (3, 4), (4, 8), (8, 10)]]
    out = list(rebatch(iter(chunks), batch_size))
    sizes = [b.batch_size for b in out]
    assert all(s == batch_size for s in sizes[:-1]) and 1 <= sizes[-1] <= batch_size
    assert sum(sizes) == 10
    flat = [e for b in out for e in _as_examples(b)]
    assert flat == _as_examples(_batch(examples))
    start = 0
    for b in out:
        _assert_batch_equal(b, _batch(examples[start : start + b.batch_size]))
        start += b.batch_size


def test_rebatch_rejects_bad_size():
    with pytest.raises(ValueError, match="batch_size"):
        list(rebatch(iter([_batch()]), 0))


def test_validate_names_the_feature():
    batch = _batch()
    batch.validate([10, 5, 7])
    with pytest.raises(ValueError, match="feature 1"):
        batch.validate([10, 4, 7])  # id 4 in feature 1 is out of [0, 4)
    with pytest.raises(ValueError, match="feature 2"):
        batch.validate([10, 5, 6])  # id 6 in feature 2
    with pytest.raises(ValueError, match="feature 0"):
        batch.validate([9, 5, 7])  # id 9 in feature 0
    negative = _batch([([0.0, 0.0], [[1], [-1], [0]], 1.0)])
    with pytest.raises(ValueError, match="feature 1"):
        negative.validate([10, 5, 7])
    with pytest.raises(ValueError, match="3 categorical features"):
        batch.validate([10, 5])
    bad_dense = _batch([([float("nan"), 0.0], [[1], [1], [0]], 1.0)])
    with pytest.raises(ValueError, match="NaN"):
        bad_dense.validate([10, 5, 7])


def test_concat_skips_empty_batches():
    from recsync.data.batch import collate, concat, rebatch

    batch = collate([[1.0], [2.0]], [[[3], []], [[4, 5], [6]]], [1.0, 0.0])
    empty = batch.slice(0, 0)
    merged = concat([empty, batch])
    assert torch.equal(merged.ids, batch.ids) and torch.equal(merged.offsets, batch.offsets)
    again = list(rebatch(iter([empty, batch, empty]), 2))
    assert len(again) == 1 and torch.equal(again[0].ids, batch.ids)


def test_select_keeps_masked_examples_in_order():
    from recsync.data.batch import collate

    batch = collate([[1.0], [2.0], [3.0]], [[[1], [7, 8]], [[2, 3], []], [[4], [9]]], [1, 0, 1])
    picked = batch.select(torch.tensor([True, False, True]))
    assert picked.dense.flatten().tolist() == [1.0, 3.0]
    assert picked.ids.tolist() == [1, 4, 7, 8, 9]
    assert picked.offsets.tolist() == [0, 1, 2, 4, 5]


WHOLE_SLICES = [  # every table whole: T1 then T0 on shard 0, T2 on shard 1, shard 2 empty
    TableSlice(table=0, row_start=0, row_end=10, shard=0, shard_row=5),
    TableSlice(table=1, row_start=0, row_end=5, shard=0, shard_row=0),
    TableSlice(table=2, row_start=0, row_end=7, shard=1, shard_row=0),
]


def test_whole_table_layout_routes_like_the_single_shard():
    spec = RowOptimizerSpec(name="sgd", lr=0.1)
    single_layout = EmbeddingLayout.single_shard(TABLES)
    whole_layout = EmbeddingLayout(TABLES, WHOLE_SLICES, 3)
    single = LocalEmbeddings(single_layout, build_shards(single_layout, spec, seed=1))
    whole = LocalEmbeddings(whole_layout, build_shards(whole_layout, spec, seed=1))
    batch = _batch()
    pooled, requests = whole.lookup(batch)
    assert sorted(r.shard for r in requests) == [0, 1]
    expected = _reference_pooled(single.shards[0].weight, batch)
    torch.testing.assert_close(pooled, expected, rtol=1e-6, atol=1e-6)
    grad = torch.randn_like(pooled)
    single.apply(grad, single.layout.route(batch))
    whole.apply(grad, requests)
    for shard, mapping in enumerate(_global_row_maps(whole_layout)):
        for local, (t, r) in mapping.items():
            torch.testing.assert_close(
                whole.shards[shard].weight[local], single.shards[0].weight[_single_index(t, r)]
            )


def test_priced_row_gradients_have_the_real_ones_rows_and_shapes():
    grad_bags = torch.randn(NUM_BAGS, 3)
    real = row_gradients_with_inverse(ROWS, OFFSETS, grad_bags)
    priced = row_gradients_with_inverse(ROWS, OFFSETS, PricedTensor((NUM_BAGS, 3)))
    assert torch.equal(real[0], priced[0]) and torch.equal(real[2], priced[2])
    assert is_priced(priced[1]) and priced[1].shape == real[1].shape
