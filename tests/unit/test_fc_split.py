"""FC splitting (vertical, horizontal, co-partitioned): the split MLP computes the unsplit
one's forward and backward."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from recsync.families.hierarchical.fc_split import (
    CoPartitioned,
    FcSplit,
    HorizontalLinear,
    Split,
    VerticalLinear,
    copartition_applies,
    merge_mlp,
    split_mlp,
)
from recsync.model.layers import mlp

NONE, V, H, C = (FcSplit(Split.NONE),) + tuple(
    FcSplit(kind, 3) for kind in (Split.VERTICAL, Split.HORIZONTAL, Split.CO_PARTITION)
)
PLANS = {
    "vertical": (V, V, V),
    "horizontal": (H, H, H),
    "co_partition": (C, C, NONE),
    "mixed": (NONE, H, V),
}


def top_mlp() -> nn.Sequential:
    torch.manual_seed(0)
    return mlp([367, 512, 256, 7], last_activation=False, data_norm=False)


def grads_merged(split: nn.Sequential) -> list[torch.Tensor]:
    """The split MLP's parameter gradients, gathered into the unsplit layout."""
    grads: list[torch.Tensor] = []

    def join(parts, dim):
        grads.append(torch.cat([p.weight.grad for p in parts], dim=dim))
        biases = [p.bias.grad for p in parts if p.bias is not None]
        grads.append(torch.cat(biases) if dim == 0 else biases[0])

    for layer in split:
        if isinstance(layer, VerticalLinear):
            join(layer.parts, 0)
        elif isinstance(layer, HorizontalLinear):
            join(layer.parts, 1)
        elif isinstance(layer, CoPartitioned):
            join(layer.first, 0)
            join(layer.second, 1)
        elif isinstance(layer, nn.Linear):
            grads += [layer.weight.grad, layer.bias.grad]
    return grads


def forward_backward(model: nn.Sequential, x: torch.Tensor, dy: torch.Tensor):
    x = x.clone().requires_grad_(True)
    y = model(x)
    y.backward(dy)
    return y.detach(), x.grad


@pytest.mark.parametrize("name", list(PLANS))
def test_split_mlp_matches_the_unsplit_forward_and_backward(name):
    reference = top_mlp()
    split = split_mlp(copy.deepcopy(reference), PLANS[name])
    x, dy = torch.randn(32, 367), torch.randn(32, 7)
    y, dx = forward_backward(reference, x, dy)
    y_split, dx_split = forward_backward(split, x, dy)
    torch.testing.assert_close(y_split, y, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(dx_split, dx, rtol=1e-5, atol=1e-5)
    expected = [g for p in reference.parameters() for g in (p.grad,)]
    for got, want in zip(grads_merged(split), expected, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_identity_plan_is_bit_exact():
    reference = top_mlp()
    split = split_mlp(copy.deepcopy(reference), (NONE, NONE, NONE))
    x, dy = torch.randn(16, 367), torch.randn(16, 7)
    y, dx = forward_backward(reference, x, dy)
    y_split, dx_split = forward_backward(split, x, dy)
    assert torch.equal(y_split, y) and torch.equal(dx_split, dx)
    for got, want in zip(
        grads_merged(split), [p.grad for p in reference.parameters()], strict=True
    ):
        assert torch.equal(got, want)


@pytest.mark.parametrize("name", list(PLANS))
def test_merge_gathers_the_parts_back_exactly(name):
    reference = top_mlp()
    merged = merge_mlp(split_mlp(copy.deepcopy(reference), PLANS[name]))
    assert [type(m) for m in merged] == [type(m) for m in reference]
    for got, want in zip(merged.parameters(), reference.parameters(), strict=True):
        assert torch.equal(got, want)


def test_parts_split_as_evenly_as_they_can():
    split = split_mlp(top_mlp(), (FcSplit(Split.VERTICAL, 5), NONE, NONE))
    assert [p.out_features for p in split[0].parts] == [102, 102, 103, 102, 103]


def test_copartition_condition_and_plan_errors():
    widening, narrowing = nn.Linear(4, 8), nn.Linear(8, 2)
    assert copartition_applies(widening, narrowing)
    assert not copartition_applies(narrowing, widening)
    model = top_mlp()
    with pytest.raises(ValueError, match="one entry per FC"):
        split_mlp(model, (V, V))
    with pytest.raises(ValueError, match="widening FC then a narrowing one"):
        split_mlp(model, (NONE, C, C))  # 512 -> 256 does not widen
    with pytest.raises(ValueError, match="whose plan entry differs"):
        split_mlp(model, (C, V, NONE))
    with pytest.raises(ValueError, match="not followed by a ReLU and another FC"):
        split_mlp(model, (NONE, NONE, C))
    with pytest.raises(ValueError, match="cannot split the 7 outputs into 9 parts"):
        split_mlp(model, (NONE, NONE, FcSplit(Split.VERTICAL, 9)))
    with pytest.raises(ValueError, match="one part"):
        FcSplit(Split.NONE, 2)
