"""Fully-connected layers split over group parameter servers (Huang et al. 2021, Sec. 4.1).

With torch's y = x W^T + b (W: out x in):
- vertical: W split by output rows; each part computes its slice of y; y is their
  concatenation, and dx = sum_j dy_j W_j.
- horizontal: W split by input columns (x with it); each part computes a partial y; y is
  their sum, the bias added once (by part 0).
- co-partitioning of a widening FC followed by a narrowing one (FC1: out > in; FC2: in >
  out): FC1 vertical and FC2 horizontal on the same partition, the activation between them
  applied per slice, so the wide activation never leaves its part.

The split layers are `nn.Module`s whose parts hold their own parameters (a part is what one
group PS owns); `split_mlp` rebuilds an MLP by a plan, and `merge_mlp` gathers the parts
back into the unsplit layout (the model a group's replica stands for).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

import torch
from torch import nn


class Split(StrEnum):
    """How one FC is split; `co_partition` takes the FC and the next one together."""

    NONE = "none"
    VERTICAL = "vertical"
    HORIZONTAL = "horizontal"
    CO_PARTITION = "co_partition"


@dataclass(frozen=True)
class FcSplit:
    """The split of one FC of an MLP over `parts` group PSs."""

    kind: Split = Split.NONE
    parts: int = 1

    def __post_init__(self) -> None:
        if self.parts < 1:
            raise ValueError(f"an FC split needs parts >= 1, got {self.parts}")
        if self.kind is Split.NONE and self.parts != 1:
            raise ValueError(f"an unsplit FC has one part, got {self.parts}")


def copartition_applies(first: nn.Linear, second: nn.Linear) -> bool:
    """The paper's condition: the first FC widens, the second narrows."""
    return first.out_features > first.in_features and second.in_features > second.out_features


def _bounds(size: int, parts: int, what: str) -> list[tuple[int, int]]:
    if parts > size:
        raise ValueError(f"cannot split {what} into {parts} parts")
    edges = [size * j // parts for j in range(parts + 1)]
    return list(zip(edges, edges[1:], strict=False))


def _slice(
    fc: nn.Linear, rows: tuple[int, int] | None, cols: tuple[int, int] | None, bias: bool
) -> nn.Linear:
    """A new FC holding W[rows, cols] (and b[rows] if `bias`)."""
    weight = fc.weight.detach()
    if rows is not None:
        weight = weight[rows[0] : rows[1]]
    if cols is not None:
        weight = weight[:, cols[0] : cols[1]]
    part = nn.Linear(weight.shape[1], weight.shape[0], bias=bias and fc.bias is not None)
    with torch.no_grad():
        part.weight.copy_(weight)
        if part.bias is not None:
            b = fc.bias.detach()
            part.bias.copy_(b if rows is None else b[rows[0] : rows[1]])
    return part


class VerticalLinear(nn.Module):
    """An FC split by output rows into `parts`: y = cat_j(x W_j^T + b_j)."""

    def __init__(self, fc: nn.Linear, parts: int):
        super().__init__()
        self.bounds = _bounds(fc.out_features, parts, f"the {fc.out_features} outputs")
        self.parts = nn.ModuleList(_slice(fc, rows, None, True) for rows in self.bounds)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([part(x) for part in self.parts], dim=1)


class HorizontalLinear(nn.Module):
    """An FC split by input columns into `parts`: y = sum_j x_j W_j^T + b (b in part 0)."""

    def __init__(self, fc: nn.Linear, parts: int):
        super().__init__()
        self.bounds = _bounds(fc.in_features, parts, f"the {fc.in_features} inputs")
        self.parts = nn.ModuleList(
            _slice(fc, None, cols, j == 0) for j, cols in enumerate(self.bounds)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        total: torch.Tensor = self.parts[0](x[:, self.bounds[0][0] : self.bounds[0][1]])
        for (lo, hi), part in zip(self.bounds[1:], self.parts[1:], strict=True):
            total = total + part(x[:, lo:hi])
        return total


class CoPartitioned(nn.Module):
    """FC1 (vertical), an elementwise `activation`, FC2 (horizontal) on one partition:
    part j computes act(x W1_j^T + b1_j) W2_j^T; y = sum_j of that + b2 (in part 0)."""

    def __init__(self, first: nn.Linear, activation: nn.Module, second: nn.Linear, parts: int):
        super().__init__()
        if first.out_features != second.in_features:
            raise ValueError(f"co-partitioned FCs do not chain: {first} then {second}")
        self.bounds = _bounds(first.out_features, parts, f"the {first.out_features} hidden units")
        self.first = nn.ModuleList(_slice(first, rows, None, True) for rows in self.bounds)
        self.activation = activation
        self.second = nn.ModuleList(
            _slice(second, None, cols, j == 0) for j, cols in enumerate(self.bounds)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        parts = zip(self.first, self.second, strict=True)
        partial = [second(self.activation(first(x))) for first, second in parts]
        total: torch.Tensor = partial[0]
        for more in partial[1:]:
            total = total + more
        return total


def split_mlp(mlp: nn.Sequential, plan: Sequence[FcSplit]) -> nn.Sequential:
    """The MLP with its FCs (in order) split by `plan`, one entry per FC; a co-partition
    entry takes the next FC too (whose entry must be the same co-partition). The parts
    start from the MLP's weights, so the split MLP computes the same function."""
    layers = list(mlp)
    fcs = [i for i, layer in enumerate(layers) if isinstance(layer, nn.Linear)]
    if len(plan) != len(fcs):
        raise ValueError(f"a split plan needs one entry per FC ({len(fcs)}), got {len(plan)}")
    out: list[nn.Module] = []
    i = 0
    fc_index = {layer: n for n, layer in enumerate(fcs)}
    while i < len(layers):
        layer = layers[i]
        if not isinstance(layer, nn.Linear):
            out.append(layer)
            i += 1
            continue
        split = plan[fc_index[i]]
        if split.kind is Split.NONE:
            out.append(layer)
        elif split.kind is Split.VERTICAL:
            out.append(VerticalLinear(layer, split.parts))
        elif split.kind is Split.HORIZONTAL:
            out.append(HorizontalLinear(layer, split.parts))
        else:
            out.append(_copartition(layers, i, plan, fc_index, split))
            i += 3
            continue
        i += 1
    return nn.Sequential(*out)


def _copartition(
    layers: list[nn.Module],
    i: int,
    plan: Sequence[FcSplit],
    fc_index: dict[int, int],
    split: FcSplit,
) -> CoPartitioned:
    n = fc_index[i]
    if i + 2 >= len(layers) or i + 2 not in fc_index or not isinstance(layers[i + 1], nn.ReLU):
        raise ValueError(
            f"FC {n} is co-partitioned, but it is not followed by a ReLU and another FC"
        )
    if plan[n + 1] != split:
        raise ValueError(f"FC {n} is co-partitioned with FC {n + 1}, whose plan entry differs")
    first, second = layers[i], layers[i + 2]
    assert isinstance(first, nn.Linear) and isinstance(second, nn.Linear)
    if not copartition_applies(first, second):
        raise ValueError(
            f"FC {n} ({first.in_features}->{first.out_features}) and FC {n + 1} "
            f"({second.in_features}->{second.out_features}): co-partitioning needs a "
            "widening FC then a narrowing one"
        )
    return CoPartitioned(first, layers[i + 1], second, split.parts)


def _join(parts: Sequence[nn.Linear], dim: int) -> nn.Linear:
    """One FC from parts that split it along `dim` of W (0: rows, 1: columns)."""
    weight = torch.cat([p.weight.detach() for p in parts], dim=dim)
    biases = [p.bias.detach() for p in parts if p.bias is not None]
    fc = nn.Linear(weight.shape[1], weight.shape[0], bias=bool(biases))
    with torch.no_grad():
        fc.weight.copy_(weight)
        if fc.bias is not None:
            fc.bias.copy_(torch.cat(biases) if dim == 0 else biases[0])
    return fc


def merge_mlp(split: nn.Sequential) -> nn.Sequential:
    """The unsplit MLP a `split_mlp` result stands for, its parts' current weights gathered."""
    out: list[nn.Module] = []
    for layer in split:
        if isinstance(layer, VerticalLinear):
            out.append(_join(list(layer.parts), 0))  # type: ignore[arg-type]
        elif isinstance(layer, HorizontalLinear):
            out.append(_join(list(layer.parts), 1))  # type: ignore[arg-type]
        elif isinstance(layer, CoPartitioned):
            out += [
                _join(list(layer.first), 0),  # type: ignore[arg-type]
                layer.activation,
                _join(list(layer.second), 1),  # type: ignore[arg-type]
            ]
        else:
            out.append(layer)
    return nn.Sequential(*out)
