"""The dense part of a DLRM as a graph of operators, for placing it in a hierarchical-
training group (Huang et al. 2021, Sec. 3.2.1): what each operator computes, holds and
outputs per example, after the FC splits of a plan are applied."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from itertools import pairwise

from recsync.families.hierarchical.fc_split import FcSplit, Split
from recsync.model.spec import ModelSpec

FLOAT = 4  # bytes of a float32
TRAIN_PASSES = 3  # forward, input gradient, weight gradient: each about one matmul


class OpKind(StrEnum):
    """What an operator does; the tagging rules read it."""

    INPUT = "input"  # the dense features a trainer read
    LOOKUP = "lookup"  # embedding lookups and pooling (with the embedding servers)
    FC = "fc"  # a fully-connected layer or one slice of one
    ACTIVATION = "activation"  # elementwise, after an FC (or a slice)
    JOIN = "join"  # concatenation or sum of an FC's slices
    INTERACTION = "interaction"
    LOSS = "loss"


@dataclass(frozen=True)
class Op:
    """One operator: per example its training FLOPs (forward and backward) and the bytes of
    its output activation (its input gradient, the same size, comes back); `param_bytes`:
    its parameters; `module`: the FC (or co-partition part) it belongs to, tagged together."""

    name: str
    kind: OpKind
    inputs: tuple[str, ...]
    flops: float = 0.0
    out_bytes: int = 0
    param_bytes: int = 0
    module: str = ""


def _fc(
    name: str, fan_in: int, fan_out: int, inputs: tuple[str, ...], module: str, bias: bool = True
) -> Op:
    params = (fan_in * fan_out + (fan_out if bias else 0)) * FLOAT
    return Op(
        name,
        OpKind.FC,
        inputs,
        TRAIN_PASSES * 2.0 * fan_in * fan_out,
        fan_out * FLOAT,
        params,
        module,
    )


def _relu(name: str, width: int, source: str, module: str) -> Op:
    return Op(name, OpKind.ACTIVATION, (source,), 2.0 * width, width * FLOAT, 0, module)


def part_op(prefix: str, fc: int, split: FcSplit, part: int) -> str:
    """The name of the (first) FC op of part `part` of FC `fc` of MLP `prefix`."""
    if split.kind is Split.NONE:
        return f"{prefix}.fc{fc}"
    if split.kind is Split.CO_PARTITION:
        return f"{prefix}.fc{fc}+{fc + 1}.p{part}.a"
    return f"{prefix}.fc{fc}.p{part}"


def _slices(size: int, parts: int) -> list[int]:
    edges = [size * j // parts for j in range(parts + 1)]
    return [b - a for a, b in pairwise(edges)]


def _mlp_ops(
    prefix: str, sizes: list[int], source: str, relu_last: bool, plan: Sequence[FcSplit]
) -> tuple[list[Op], str]:
    """The ops of one MLP, split by `plan` (one entry per FC); returns them and the name of
    the op whose output is the MLP's."""
    ops: list[Op] = []
    layers = list(pairwise(sizes))
    i = 0
    while i < len(layers):
        fan_in, fan_out = layers[i]
        split, name = plan[i], f"{prefix}.fc{i}"
        relu = i < len(layers) - 1 or relu_last
        if split.kind is Split.CO_PARTITION:
            _, out2 = layers[i + 1]
            relu2 = i + 1 < len(layers) - 1 or relu_last
            partials = []
            for j, width in enumerate(_slices(fan_out, split.parts)):
                first = part_op(prefix, i, split, j)
                module = first.removesuffix(".a")
                ops.append(_fc(first, fan_in, width, (source,), module))
                ops.append(_relu(f"{module}.relu", width, f"{module}.a", module))
                ops.append(
                    _fc(f"{module}.b", width, out2, (f"{module}.relu",), module, bias=j == 0)
                )
                partials.append(f"{module}.b")
            source = f"{name}+{i + 1}.sum"
            ops.append(Op(source, OpKind.JOIN, tuple(partials), out2 * split.parts, out2 * FLOAT))
            if relu2:
                ops.append(_relu(f"{source}.relu", out2, source, source))
                source = f"{source}.relu"
            i += 2
            continue
        if split.kind is Split.NONE:
            ops.append(_fc(part_op(prefix, i, split, 0), fan_in, fan_out, (source,), name))
            source = name
        else:
            vertical = split.kind is Split.VERTICAL
            widths = _slices(fan_out if vertical else fan_in, split.parts)
            parts = []
            for j, width in enumerate(widths):
                shape = (fan_in, width) if vertical else (width, fan_out)
                part = part_op(prefix, i, split, j)
                ops.append(_fc(part, *shape, (source,), part, bias=vertical or j == 0))
                parts.append(part)
            join_flops = 0.0 if vertical else float(fan_out * split.parts)
            ops.append(Op(f"{name}.join", OpKind.JOIN, tuple(parts), join_flops, fan_out * FLOAT))
            source = f"{name}.join"
        if relu:
            ops.append(_relu(f"{name}.relu", fan_out, source, name))
            source = f"{name}.relu"
        i += 1
    return ops, source


def dense_graph(model: ModelSpec, bottom: Sequence[FcSplit], top: Sequence[FcSplit]) -> list[Op]:
    """The ops of the model's dense part in execution order, its FCs split by `bottom`
    and `top` (one entry per FC of each MLP)."""
    D, F = model.embedding_dim, model.num_features
    ops = [
        Op("input", OpKind.INPUT, (), 0.0, model.num_dense * FLOAT),
        Op("lookup", OpKind.LOOKUP, (), 0.0, F * D * FLOAT),
    ]
    first_order = "lookup"
    if model.num_dense:
        sizes = [model.num_dense, *model.bottom_mlp, D]
        bottom_ops, first_order = _mlp_ops("bottom", sizes, "input", True, bottom)
        ops += bottom_ops
    vectors = F + (1 if model.num_dense else 0)
    pairs = vectors * (vectors - 1) // 2
    interaction_flops = TRAIN_PASSES * 2.0 * vectors * vectors * D
    ops.append(
        Op(
            "interaction",
            OpKind.INTERACTION,
            (first_order, "lookup"),
            interaction_flops,
            model.top_input * FLOAT,
        )
    )
    top_ops, logits = _mlp_ops(
        "top", [model.top_input, *model.top_mlp, 1], "interaction", False, top
    )
    ops += top_ops
    ops.append(Op("loss", OpKind.LOSS, (logits,), 10.0, FLOAT))
    assert pairs + (D if model.num_dense else F * D) == model.top_input
    return ops


def default_splits(sizes: Sequence[int], parts: int, enabled: bool = True) -> tuple[FcSplit, ...]:
    """The plan for one MLP of FC widths `sizes`: co-partition each widening FC with the
    narrowing one after it (the paper's condition) over `parts`; the rest unsplit."""
    layers = list(pairwise(sizes))
    plan = [FcSplit()] * len(layers)
    i = 0
    while enabled and parts > 1 and i < len(layers) - 1:
        (in1, out1), (_, out2) = layers[i], layers[i + 1]
        if out1 > in1 and out1 > out2 and out1 >= parts:
            plan[i] = plan[i + 1] = FcSplit(Split.CO_PARTITION, parts)
            i += 2
        else:
            i += 1
    return tuple(plan)
