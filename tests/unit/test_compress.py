"""The trainer <-> group-PS codecs: round-trip error bounds, wire bytes, error feedback."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from recsync.families.hierarchical.compress.bf16 import RELATIVE_ERROR, Bf16
from recsync.families.hierarchical.compress.encoded import Identity
from recsync.families.hierarchical.compress.error_feedback import ErrorFeedback
from recsync.families.hierarchical.compress.int8 import LEVELS, Int8Rows
from recsync.families.hierarchical.compress.spec import CompressionSpec
from recsync.families.hierarchical.compress.topk import TopK
from recsync.protocol.messages import wire_bytes

shapes = st.tuples(st.integers(1, 9), st.integers(1, 17))


def tensor(shape: tuple[int, ...], seed: int, scale: float) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g) * scale


@settings(max_examples=60, deadline=None)
@given(shapes, st.integers(0, 10_000), st.floats(1e-6, 1e4))
def test_int8_error_is_at_most_half_a_step_of_its_row(shape, seed, scale):
    x = tensor(shape, seed, scale)
    x[0] = 0.0  # a row of zeros stays exact
    codec = Int8Rows()
    encoded = codec.encode(x)
    y = codec.decode(encoded)
    step = x.abs().amax(dim=1, keepdim=True) / LEVELS
    assert y.shape == x.shape
    assert torch.all((y - x).abs() <= step / 2 * (1 + 1e-5) + 1e-30)
    assert torch.equal(y[0], torch.zeros(shape[1]))
    assert encoded.values.dtype == torch.int8
    assert wire_bytes(encoded) == x.numel() + 4 * shape[0]  # a byte each, a scale a row


@settings(max_examples=60, deadline=None)
@given(shapes, st.integers(0, 10_000), st.floats(1e-6, 1e4))
def test_bf16_relative_error_and_half_the_bytes(shape, seed, scale):
    x = tensor(shape, seed, scale)
    codec = Bf16()
    encoded = codec.encode(x)
    y = codec.decode(encoded)
    assert y.dtype == torch.float32
    assert torch.all((y - x).abs() <= RELATIVE_ERROR * x.abs())
    assert wire_bytes(encoded) == 2 * x.numel()


@settings(max_examples=60, deadline=None)
@given(shapes, st.integers(0, 10_000), st.floats(0.01, 1.0))
def test_topk_keeps_the_largest_and_zeroes_the_rest(shape, seed, fraction):
    x = tensor(shape, seed, 1.0)
    codec = TopK(fraction)
    encoded = codec.encode(x)
    y = codec.decode(encoded)
    k = codec.kept(x.numel())
    kept = y != 0
    assert int(kept.sum()) == k  # randn has no exact zeros
    assert torch.equal(y[kept], x[kept])
    assert x[kept].abs().min() >= x[~kept].abs().max() if k < x.numel() else True
    assert wire_bytes(encoded) == 8 * k  # float32 value and int32 index each


def test_topk_ties_go_to_the_lower_index():
    encoded = TopK(0.5).encode(torch.tensor([1.0, -1.0, 1.0, 0.5]))
    assert encoded.indices.tolist() == [0, 1]


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10_000), st.integers(2, 12), st.floats(0.05, 0.5))
def test_error_feedback_carries_what_was_left_out(seed, steps, fraction):
    """Sent so far + residual = everything given so far: no gradient mass is lost."""
    codec = ErrorFeedback(TopK(fraction))
    given_sum = torch.zeros(4, 8)
    sent_sum = torch.zeros(4, 8)
    for step in range(steps):
        g = tensor((4, 8), seed + step, 1.0)
        given_sum += g
        sent_sum += codec.decode(codec.encode(g))
        assert codec.residual is not None
        torch.testing.assert_close(sent_sum + codec.residual, given_sum, rtol=0, atol=1e-5)


def test_error_feedback_refuses_a_tensor_of_another_shape():
    codec = ErrorFeedback(TopK(0.5))
    codec.encode(torch.ones(2, 3))
    with pytest.raises(ValueError, match=r"residual of shape \(2, 3\).*\(3, 2\)"):
        codec.encode(torch.ones(3, 2))


def test_identity_is_exact_float32():
    x = tensor((3, 5), 0, 1.0)
    encoded = Identity().encode(x)
    assert torch.equal(Identity().decode(encoded), x)
    assert wire_bytes(encoded) == 4 * x.numel()


def test_spec_builds_the_papers_choice_and_names_bad_fields():
    spec = CompressionSpec(activations="int8", gradients="bf16")
    assert spec.enabled and spec.activation_codec().name == "int8"
    assert spec.gradient_codec().name == "bf16"
    sparse = CompressionSpec(topk_fraction=0.1)
    first, second = sparse.gradient_codec(), sparse.gradient_codec()
    assert first.name == "topk+ef" and first is not second  # one residual per stream
    assert CompressionSpec(topk_fraction=0.1, error_feedback=False).gradient_codec().name == "topk"
    assert not CompressionSpec().enabled
    with pytest.raises(ValueError, match="activations must be one of"):
        CompressionSpec(activations="int4")
    with pytest.raises(ValueError, match="topk_fraction must be in"):
        CompressionSpec(topk_fraction=0.0)
    with pytest.raises(ValueError, match="set gradients = 'none' with topk_fraction"):
        CompressionSpec(gradients="bf16", topk_fraction=0.1)
