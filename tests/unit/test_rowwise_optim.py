"""Row-wise (sparse) optimizers against dense references, over several steps with overlapping
row sets: SGD, Adagrad (exact and row-wise), Adam (as SparseAdam), SWAP's lazy period decay."""

from __future__ import annotations

import copy

import pytest
import torch

from recsync.optim.rowwise import (
    RowAdagrad,
    RowAdam,
    RowOptimizer,
    RowOptimizerSpec,
    RowSGD,
)
from recsync.optim.swap import Swap

NUM_ROWS, DIM = 6, 3
ATOL = 1e-6

# Overlapping row sets; row 5 is touched at step 0, then untouched until step 9 (several
# SWAP periods of 2 pass); row 4 is first touched at step 7.
ROW_SETS = [
    [0, 2, 3, 5],
    [2, 3],
    [0, 1, 2],
    [3],
    [0, 2, 3],
    [1, 3],
    [0],
    [2, 4],
    [1, 2, 3],
    [0, 1, 2, 3, 4, 5],
]


def _steps(seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    for rows in ROW_SETS:
        r = torch.tensor(rows, dtype=torch.int64)
        yield r, torch.randn(len(rows), DIM, generator=gen)


def _initial_weight(seed: int = 42) -> torch.Tensor:
    return torch.randn(NUM_ROWS, DIM, generator=torch.Generator().manual_seed(seed))


def _scatter(rows: torch.Tensor, grads: torch.Tensor) -> torch.Tensor:
    dense = torch.zeros(NUM_ROWS, DIM)
    dense[rows] = grads
    return dense


def test_row_sgd_matches_plain_sgd():
    lr = 0.1
    weight = _initial_weight()
    reference = weight.clone()
    opt = RowSGD(NUM_ROWS, DIM, lr=lr)
    for t, (rows, grads) in enumerate(_steps()):
        opt.apply(weight, rows, grads, t)
        reference -= lr * _scatter(rows, grads)
        torch.testing.assert_close(weight, reference, rtol=0, atol=ATOL)


@pytest.mark.parametrize("initial_accumulator", [0.0, 0.3])
def test_row_adagrad_matches_torch_adagrad(initial_accumulator):
    lr, eps = 0.1, 1e-10
    weight = _initial_weight()
    param = torch.nn.Parameter(weight.clone())
    torch_opt = torch.optim.Adagrad(
        [param], lr=lr, eps=eps, initial_accumulator_value=initial_accumulator, foreach=False
    )
    opt = RowAdagrad(NUM_ROWS, DIM, lr=lr, eps=eps, initial_accumulator=initial_accumulator)
    for t, (rows, grads) in enumerate(_steps()):
        opt.apply(weight, rows, grads, t)
        param.grad = _scatter(rows, grads)
        torch_opt.step()
        torch.testing.assert_close(weight, param.detach(), rtol=0, atol=ATOL)
    torch.testing.assert_close(opt.accumulator, torch_opt.state[param]["sum"], rtol=0, atol=ATOL)


def _rowwise_adagrad_reference(weight, acc, rows, grads, lr, eps):
    for i, r in enumerate(rows.tolist()):
        g = grads[i]
        acc[r] += g.pow(2).mean()
        weight[r] -= lr * g / (acc[r].sqrt() + eps)


def test_rowwise_adagrad_matches_hand_reference():
    lr, eps = 0.1, 1e-8
    weight = _initial_weight()
    reference = weight.clone()
    acc = torch.full((NUM_ROWS,), 0.2)
    opt = RowAdagrad(NUM_ROWS, DIM, lr=lr, eps=eps, initial_accumulator=0.2, rowwise=True)
    assert opt.accumulator.shape == (NUM_ROWS, 1)
    for t, (rows, grads) in enumerate(_steps()):
        untouched_before = weight[[r for r in range(NUM_ROWS) if r not in rows.tolist()]]
        opt.apply(weight, rows, grads, t)
        _rowwise_adagrad_reference(reference, acc, rows, grads, lr, eps)
        torch.testing.assert_close(weight, reference, rtol=0, atol=ATOL)
        torch.testing.assert_close(opt.accumulator.squeeze(1), acc, rtol=0, atol=ATOL)
        untouched_after = weight[[r for r in range(NUM_ROWS) if r not in rows.tolist()]]
        assert torch.equal(untouched_before, untouched_after)


@pytest.mark.parametrize("betas", [(0.9, 0.999), (0.5, 0.8)])
def test_row_adam_matches_sparse_adam(betas):
    lr, eps = 0.01, 1e-8
    weight = _initial_weight()
    param = torch.nn.Parameter(weight.clone())
    torch_opt = torch.optim.SparseAdam([param], lr=lr, betas=betas, eps=eps)
    opt = RowAdam(NUM_ROWS, DIM, lr=lr, betas=betas, eps=eps)
    for t, (rows, grads) in enumerate(_steps()):
        opt.apply(weight, rows, grads, t)
        param.grad = torch.sparse_coo_tensor(
            rows.unsqueeze(0), grads, (NUM_ROWS, DIM), check_invariants=True
        )
        torch_opt.step()
        torch.testing.assert_close(weight, param.detach(), rtol=0, atol=ATOL)
    state = torch_opt.state[param]
    torch.testing.assert_close(opt.exp_avg, state["exp_avg"], rtol=0, atol=ATOL)
    torch.testing.assert_close(opt.exp_avg_sq, state["exp_avg_sq"], rtol=0, atol=ATOL)


# ---------------------------------------------------------------------------------------------
# SWAP: lazy per-row catch-up == decaying every row at every period boundary


def _swap_decays(t: int, swap: Swap) -> bool:
    return t > 0 and t % swap.period == 0


@pytest.mark.parametrize("rowwise", [False, True])
@pytest.mark.parametrize("period", [1, 2, 3])
def test_swap_adagrad_matches_dense_decay(rowwise, period):
    lr, eps, decay, init = 0.1, 1e-8, 0.5, 0.4
    swap = Swap(decay=decay, period=period)
    weight = _initial_weight()
    reference = weight.clone()
    acc = torch.full((NUM_ROWS, 1 if rowwise else DIM), init)
    opt = RowAdagrad(
        NUM_ROWS, DIM, lr=lr, eps=eps, initial_accumulator=init, rowwise=rowwise, swap=swap
    )
    for t, (rows, grads) in enumerate(_steps()):
        opt.apply(weight, rows, grads, t)
        if _swap_decays(t, swap):
            acc *= decay  # every row, touched or not
        g2 = grads.pow(2).mean(1, keepdim=True) if rowwise else grads.pow(2)
        acc[rows] += g2
        reference[rows] -= lr * grads / (acc[rows].sqrt() + eps)
        torch.testing.assert_close(weight, reference, rtol=0, atol=ATOL)
    # the last step touched every row, so every lazy accumulator has caught up
    assert ROW_SETS[-1] == list(range(NUM_ROWS))
    torch.testing.assert_close(opt.accumulator, acc, rtol=0, atol=ATOL)


def test_swap_row_untouched_for_several_periods_catches_up():
    """Row 5: touched at step 0, then at step 9; with period 2 it misses boundaries 2,4,6,8."""
    decay, init = 0.5, 1.0
    opt = RowAdagrad(NUM_ROWS, 1, lr=0.1, initial_accumulator=init, swap=Swap(decay, 2))
    weight = torch.zeros(NUM_ROWS, 1)
    five = torch.tensor([5])
    opt.apply(weight, five, torch.tensor([[2.0]]), 0)
    assert float(opt.accumulator[5]) == pytest.approx(init + 4.0)
    for t in range(1, 9):
        opt.apply(weight, torch.tensor([0]), torch.tensor([[1.0]]), t)
    assert float(opt.accumulator[5]) == pytest.approx(init + 4.0)  # lazily not decayed yet
    opt.apply(weight, five, torch.tensor([[1.0]]), 9)
    assert float(opt.accumulator[5]) == pytest.approx((init + 4.0) * decay**4 + 1.0, abs=1e-6)
    # row 1, never touched: its initial accumulator decays by every boundary up to step 9
    opt.apply(weight, torch.tensor([1]), torch.tensor([[1.0]]), 9)
    assert float(opt.accumulator[1]) == pytest.approx(init * decay**4 + 1.0, abs=1e-6)


@pytest.mark.parametrize("period", [1, 2, 3])
def test_swap_adam_matches_dense_decay(period):
    lr, eps, decay = 0.01, 1e-8, 0.5
    beta1, beta2 = 0.9, 0.99
    swap = Swap(decay=decay, period=period)
    weight = _initial_weight()
    reference = weight.clone()
    m = torch.zeros(NUM_ROWS, DIM)
    v = torch.zeros(NUM_ROWS, DIM)
    opt = RowAdam(NUM_ROWS, DIM, lr=lr, betas=(beta1, beta2), eps=eps, swap=swap)
    for t, (rows, grads) in enumerate(_steps()):
        opt.apply(weight, rows, grads, t)
        if _swap_decays(t, swap):
            v *= decay  # every row, touched or not
        m[rows] = beta1 * m[rows] + (1 - beta1) * grads
        v[rows] = beta2 * v[rows] + (1 - beta2) * grads.pow(2)
        step = t + 1
        step_size = lr * (1 - beta2**step) ** 0.5 / (1 - beta1**step)
        reference[rows] -= step_size * m[rows] / (v[rows].sqrt() + eps)
        torch.testing.assert_close(weight, reference, rtol=0, atol=ATOL)
    torch.testing.assert_close(opt.exp_avg, m, rtol=0, atol=ATOL)
    torch.testing.assert_close(opt.exp_avg_sq, v, rtol=0, atol=ATOL)


def test_swap_with_decay_one_is_plain_adagrad():
    weight_a, weight_b = _initial_weight(), _initial_weight()
    plain = RowAdagrad(NUM_ROWS, DIM, lr=0.1)
    swapped = RowAdagrad(NUM_ROWS, DIM, lr=0.1, swap=Swap(decay=1.0, period=1))
    for t, (rows, grads) in enumerate(_steps()):
        plain.apply(weight_a, rows, grads, t)
        swapped.apply(weight_b, rows, grads, t)
    torch.testing.assert_close(weight_a, weight_b, rtol=0, atol=ATOL)


def test_swap_on_sgd_raises():
    with pytest.raises(ValueError, match="swap"):
        RowSGD(NUM_ROWS, DIM, lr=0.1, swap=Swap(0.5, 2))
    with pytest.raises(ValueError, match="swap"):
        RowOptimizerSpec(name="sgd", swap=Swap(0.5, 2)).build(NUM_ROWS, DIM)


@pytest.mark.parametrize(("decay", "period"), [(0.0, 2), (1.5, 2), (-0.1, 2), (0.5, 0)])
def test_swap_validates(decay, period):
    with pytest.raises(ValueError, match="swap"):
        Swap(decay, period)


def test_spec_builds_the_named_optimizer():
    sgd = RowOptimizerSpec(name="sgd", lr=0.2).build(NUM_ROWS, DIM)
    assert isinstance(sgd, RowSGD) and sgd.lr == 0.2
    exact = RowOptimizerSpec(name="adagrad").build(NUM_ROWS, DIM)
    assert isinstance(exact, RowAdagrad) and not exact.rowwise
    rowwise = RowOptimizerSpec(name="rowwise_adagrad").build(NUM_ROWS, DIM)
    assert isinstance(rowwise, RowAdagrad) and rowwise.rowwise
    assert rowwise.accumulator.shape == (NUM_ROWS, 1)
    adam = RowOptimizerSpec(name="adam", betas=(0.8, 0.9), swap=Swap(0.5, 3)).build(NUM_ROWS, DIM)
    assert isinstance(adam, RowAdam) and (adam.beta1, adam.beta2) == (0.8, 0.9)
    assert adam.swap == Swap(0.5, 3)
    with pytest.raises(ValueError, match="unknown sparse optimizer"):
        RowOptimizerSpec(name="lamb")
    with pytest.raises(ValueError, match="lr"):
        RowOptimizerSpec(lr=0.0)


# ---------------------------------------------------------------------------------------------
# state_dict / load_state_dict


def _make(kind: str) -> RowOptimizer:
    if kind == "sgd":
        return RowSGD(NUM_ROWS, DIM, lr=0.1)
    if kind == "adagrad":
        return RowAdagrad(NUM_ROWS, DIM, lr=0.1, initial_accumulator=0.1)
    if kind == "rowwise_adagrad":
        return RowAdagrad(NUM_ROWS, DIM, lr=0.1, rowwise=True, swap=Swap(0.5, 2))
    if kind == "adam":
        return RowAdam(NUM_ROWS, DIM, lr=0.01)
    return RowAdam(NUM_ROWS, DIM, lr=0.01, swap=Swap(0.7, 3))


@pytest.mark.parametrize("kind", ["sgd", "adagrad", "rowwise_adagrad", "adam", "adam_swap"])
def test_state_dict_round_trip(kind):
    steps = list(_steps(seed=3))
    split = 5
    weight = _initial_weight()
    opt = _make(kind)
    for t, (rows, grads) in enumerate(steps[:split]):
        opt.apply(weight, rows, grads, t)
    state = copy.deepcopy(opt.state_dict())
    saved_weight = weight.clone()
    expected_keys = {
        "sgd": set(),
        "adagrad": {"accumulator"},
        "rowwise_adagrad": {"accumulator", "last_period"},
        "adam": {"exp_avg", "exp_avg_sq"},
        "adam_swap": {"exp_avg", "exp_avg_sq", "last_period"},
    }[kind]
    assert set(state) == expected_keys

    for t, (rows, grads) in enumerate(steps[split:], start=split):
        opt.apply(weight, rows, grads, t)

    restored = _make(kind)
    restored.load_state_dict(state)
    for name, value in state.items():
        assert torch.equal(getattr(restored, name), value)
    for t, (rows, grads) in enumerate(steps[split:], start=split):
        restored.apply(saved_weight, rows, grads, t)
    assert torch.equal(saved_weight, weight)
    for name, value in opt.state_dict().items():
        assert torch.equal(restored.state_dict()[name], value)


@pytest.mark.parametrize("name", ["sgd", "adagrad", "adam"])
def test_lr_scale_multiplies_the_learning_rate(name):
    rows, grads = torch.tensor([1, 3]), torch.tensor([[0.5, -1.0], [2.0, 0.25]])
    scaled, doubled = torch.ones(4, 2), torch.ones(4, 2)
    RowOptimizerSpec(name, lr=0.1).build(4, 2).apply(scaled, rows, grads, 0, lr_scale=2.0)
    RowOptimizerSpec(name, lr=0.2).build(4, 2).apply(doubled, rows, grads, 0)
    torch.testing.assert_close(scaled, doubled)
