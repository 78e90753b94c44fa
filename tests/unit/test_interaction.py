"""Dense part of the DLRM: dot interaction, DenseArch shapes, DataNorm, seeded construction."""

from __future__ import annotations

import pytest
import torch

from recsync.model.dlrm import DenseArch, build_dense
from recsync.model.layers import DataNorm, DotInteraction, mlp
from recsync.model.spec import ModelSpec, TableSpec


def test_dot_interaction_matches_hand_computation_and_pair_order():
    # Example 0: v0 = (1, 2), v1 = (3, -1), v2 = (0.5, 4)
    #   (1,0): 1*3 + 2*(-1) = 1;  (2,0): 0.5*1 + 4*2 = 8.5;  (2,1): 0.5*3 + 4*(-1) = -2.5
    # Example 1: v0 = (0, 1), v1 = (2, 2), v2 = (-1, 3)
    #   (1,0): 0*2 + 1*2 = 2;     (2,0): 0*(-1) + 1*3 = 3;   (2,1): 2*(-1) + 2*3 = 4
    vectors = torch.tensor(
        [
            [[1.0, 2.0], [3.0, -1.0], [0.5, 4.0]],
            [[0.0, 1.0], [2.0, 2.0], [-1.0, 3.0]],
        ]
    )
    out = DotInteraction(3)(vectors)
    expected = torch.tensor([[1.0, 8.5, -2.5], [2.0, 3.0, 4.0]])
    assert out.shape == (2, 3)
    torch.testing.assert_close(out, expected, rtol=0, atol=1e-6)


def test_dot_interaction_has_no_self_pairs_and_is_differentiable():
    torch.manual_seed(0)
    vectors = torch.randn(5, 4, 3, requires_grad=True)
    out = DotInteraction(4)(vectors)
    assert out.shape == (5, 4 * 3 // 2)
    pairs = [(1, 0), (2, 0), (2, 1), (3, 0), (3, 1), (3, 2)]
    expected = torch.stack([(vectors[:, i] * vectors[:, j]).sum(1) for i, j in pairs], dim=1)
    torch.testing.assert_close(out, expected)
    out.sum().backward()
    assert vectors.grad is not None and torch.isfinite(vectors.grad).all()


def test_default_spec_top_input_is_367():
    spec = ModelSpec()
    assert spec.num_interactions == 27 * 26 // 2
    assert spec.top_input == 27 * 26 // 2 + 16 == 367


def test_dense_arch_output_shape_default_spec():
    spec = ModelSpec()
    arch = build_dense(spec, seed=0)
    first_top = arch.top[0]
    assert isinstance(first_top, torch.nn.Linear)
    assert first_top.in_features == 367
    assert arch.bottom[0].in_features == 13
    B = 4
    gen = torch.Generator().manual_seed(1)
    dense = torch.randn(B, 13, generator=gen)
    pooled = torch.randn(B, 26, 16, generator=gen)
    logits = arch(dense, pooled)
    assert logits.shape == (B,)
    assert torch.isfinite(logits).all()


def test_dense_arch_without_dense_features():
    tables = tuple(TableSpec(f"C{i}", 10, 4) for i in range(3))
    spec = ModelSpec(num_dense=0, tables=tables, bottom_mlp=(8,), top_mlp=(8,))
    assert spec.top_input == 3 + 3 * 4  # 3 dot products and the 3 pooled bags
    arch = build_dense(spec, seed=0)
    assert arch.bottom is None
    out = arch(torch.empty(2, 0), torch.randn(2, 3, 4))
    assert out.shape == (2,)


def test_one_categorical_feature_alone_has_a_first_order_input():
    spec = ModelSpec(num_dense=0, tables=(TableSpec("bag", 10, 4),), bottom_mlp=(8,), top_mlp=(8,))
    assert spec.num_interactions == 0 and spec.top_input == 4
    arch = build_dense(spec, seed=0)
    pooled = torch.randn(5, 1, 4, generator=torch.Generator().manual_seed(2))
    logits = arch(torch.empty(5, 0), pooled)
    assert logits.std() > 0  # not a constant model


def test_data_norm_formula():
    x = torch.tensor([[1.0, -2.0, 4.0], [3.0, -6.0, 0.0], [2.0, -1.0, 2.0]])
    # column means 2, -3, 2; mean absolute values 2, 3, 2
    norm = DataNorm(3)
    with torch.no_grad():
        norm.alpha.copy_(torch.tensor([2.0, 0.5, 1.0]))
        norm.beta.copy_(torch.tensor([1.0, 0.0, -1.0]))
    out = norm(x)
    expected = torch.tensor(
        [
            [2.0 * -1 / 2 - 1, 0.5 * 1 / 3 - 0, 1.0 * 2 / 2 + 1],
            [2.0 * 1 / 2 - 1, 0.5 * -3 / 3 - 0, 1.0 * -2 / 2 + 1],
            [2.0 * 0 / 2 - 1, 0.5 * 2 / 3 - 0, 1.0 * 0 / 2 + 1],
        ]
    )
    torch.testing.assert_close(out, expected, rtol=0, atol=1e-6)


def test_data_norm_is_the_papers_formula_on_positive_inputs():
    """alpha (x - E x) / E|x| - beta = alpha x / E x - (alpha + beta) when x > 0: the paper's
    eq. 10 with beta' = alpha + beta (eq. 9 at the initial values)."""
    x = torch.rand(16, 5) + 0.1
    norm = DataNorm(5)
    torch.testing.assert_close(norm(x), x / x.mean(dim=0) - 1.0)


def test_data_norm_gradients_reach_alpha_and_beta():
    x = torch.tensor([[1.0, -2.0], [3.0, -6.0], [2.0, -1.0], [6.0, 1.0]], requires_grad=True)
    norm = DataNorm(2)
    (norm(x) * torch.tensor([[1.0, 0.0], [0.0, 1.0], [2.0, 0.0], [0.0, 3.0]])).sum().backward()
    # column 0: mean 3, E|x| 3; d/d alpha = (1 * (1 - 3) + 2 * (2 - 3)) / 3 = -4/3
    # column 1: mean -2, E|x| 2.5; d/d alpha = (1 * (-6 + 2) + 3 * (1 + 2)) / 2.5 = 2
    torch.testing.assert_close(norm.alpha.grad, torch.tensor([-4.0 / 3.0, 2.0]))
    torch.testing.assert_close(norm.beta.grad, torch.tensor([-3.0, -4.0]))
    assert x.grad is not None


def test_data_norm_a_zero_scale_is_taken_as_eps():
    norm = DataNorm(2, eps=0.5)
    x = torch.tensor([[0.2, 0.0], [-0.2, 0.0]])  # E|x| 0.2 (below eps) and 0
    torch.testing.assert_close(norm(x), torch.tensor([[0.4, 0.0], [-0.4, 0.0]]))


def test_mlp_with_data_norm_places_layers():
    seq = mlp([3, 4, 1], last_activation=False, data_norm=True)
    kinds = [type(m).__name__ for m in seq]
    assert kinds == ["Linear", "DataNorm", "ReLU", "Linear"]
    seq = mlp([3, 4, 2], last_activation=True, data_norm=True)
    kinds = [type(m).__name__ for m in seq]
    assert kinds == ["Linear", "DataNorm", "ReLU", "Linear", "DataNorm", "ReLU"]


def _small_spec(data_norm: bool = False) -> ModelSpec:
    tables = tuple(TableSpec(f"C{i}", 20, 4) for i in range(3))
    return ModelSpec(num_dense=5, tables=tables, bottom_mlp=(8,), top_mlp=(8,), data_norm=data_norm)


@pytest.mark.parametrize("data_norm", [False, True])
def test_build_dense_is_deterministic_per_seed(data_norm):
    spec = _small_spec(data_norm)
    a = build_dense(spec, seed=7)
    b = build_dense(spec, seed=7)
    c = build_dense(spec, seed=8)
    sa, sb, sc = a.state_dict(), b.state_dict(), c.state_dict()
    assert sa.keys() == sb.keys() == sc.keys()
    for name in sa:
        assert torch.equal(sa[name], sb[name]), name
    linear_weights = [n for n in sa if n.endswith("weight") and sa[n].dim() == 2]
    assert linear_weights
    for name in linear_weights:
        assert not torch.equal(sa[name], sc[name]), name


def test_build_dense_leaves_global_rng_untouched():
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    build_dense(_small_spec(), seed=5)
    assert torch.equal(torch.rand(3), expected)


def test_dense_arch_is_a_module_of_the_spec():
    spec = _small_spec()
    arch = DenseArch(spec)
    out = arch(torch.randn(6, 5), torch.randn(6, 3, 4))
    assert out.shape == (6,)
    assert arch.top[0].in_features == spec.top_input == 4 * 3 // 2 + 4
