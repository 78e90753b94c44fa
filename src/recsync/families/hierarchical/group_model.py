"""The dense part of a DLRM as a hierarchical-training group runs it (Huang et al. 2021,
Sec. 3.2 and 4.1): the MLPs split by an FC plan, then cut into stages a trainer drives one
after the other. A stage is either a run of consecutive unsplit FCs (with the activations
between and after them) that one group PS owns, or one split FC (vertical, horizontal or a
co-partitioned pair) whose parts sit on group PSs, joined on the trainer by concatenation
or sum, the activation after the join on the trainer too. Tables projected to the
interaction's size (per-table dims) add one stage, `embed`: the projections, on the group PS
of the top MLP's first part, take the pooled embeddings (flat) and give the vectors the
interaction multiplies. Everything else (interaction, the FM terms, the loss) runs on the
trainers. Every group PS and trainer builds the same
`GroupDense` from the same seed; each group PS trains only the parts it owns.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum

import torch
from torch import nn

from recsync.families.hierarchical.fc_split import (
    CoPartitioned,
    FcSplit,
    HorizontalLinear,
    VerticalLinear,
    merge_mlp,
    split_mlp,
)
from recsync.model.dlrm import DenseArch, Projections, build_dense
from recsync.model.spec import ModelSpec

MLPS = ("bottom", "top")
EMBED = "embed"  # the projections' stage


class FlatProjections(nn.Module):
    """The projections as a stage's part: B x (F W) pooled embeddings in (flat, as a stage's
    input travels), B x (F D) vectors out."""

    def __init__(self, projections: Projections, spec: ModelSpec):
        super().__init__()
        self.projections = projections
        self.shape = (spec.num_features, spec.pooled_dim)
        D = spec.embedding_dim
        self.flops = 3 * 2.0 * sum(spec.tables[f].dim * D for f in spec.projected)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        vectors: torch.Tensor = self.projections(x.view(x.shape[0], *self.shape))
        return vectors.flatten(1)


class Join(StrEnum):
    """How a stage's part outputs make its output."""

    ONE = "one"  # a single part: its output
    CONCAT = "concat"  # vertical: the parts' output columns side by side
    SUM = "sum"  # horizontal or co-partitioned: the parts' partial outputs summed


@dataclass(frozen=True)
class Stage:
    """One stage of an MLP: entries [start, stop) of its split `nn.Sequential` run
    remotely (the parts), entries [stop, local_stop) on the trainer after the join.
    `servers[j]`: the group PS of part j; `columns[j]`: the input columns part j reads
    (horizontal) or None (all of them)."""

    index: int
    mlp: str
    start: int
    stop: int
    local_stop: int
    join: Join
    servers: tuple[int, ...]
    columns: tuple[tuple[int, int] | None, ...]

    @property
    def per_part(self) -> bool:
        """Outputs and their gradients travel one per part (concatenated outputs); else a
        group PS sends the sum of its parts' outputs and gets one output gradient."""
        return self.join is Join.CONCAT

    @property
    def shares_input(self) -> bool:
        """Every part reads the whole input: a group PS returns the sum of its parts' input
        gradients (else one per part, each its own columns)."""
        return all(columns is None for columns in self.columns)


class GroupDense:
    """A DenseArch whose MLPs are split by `plans` (bottom, top; one FcSplit per FC) and
    cut into stages; `place(mlp, fc, split, part)` gives the group PS of each part."""

    def __init__(
        self,
        spec: ModelSpec,
        seed: int,
        plans: tuple[Sequence[FcSplit], Sequence[FcSplit]],
        part_server: Callable[[str, int, FcSplit, int], int],
        initial: torch.Tensor | None = None,
    ):
        """`initial`: the unsplit model's flat vector to start from (None: the seed's)."""
        if spec.data_norm:
            raise ValueError(
                "hierarchical training does not split data-normalization layers: set "
                "model.data_norm = false"
            )
        self.arch: DenseArch = build_dense(spec, seed)
        if initial is not None:
            nn.utils.vector_to_parameters(initial.detach(), self.arch.parameters())
        if self.arch.bottom is not None:
            self.arch.bottom = split_mlp(self.arch.bottom, plans[0])
        self.arch.top = split_mlp(self.arch.top, plans[1])
        self.stages: list[Stage] = []
        self._parts: list[list[nn.Module]] = []
        for mlp, plan in zip(MLPS, plans, strict=True):
            layers = self.mlp(mlp)
            if layers is not None:
                self._cut(mlp, layers, plan, part_server)
        self.embed: Stage | None = None  # the projections' stage (projected tables only)
        if self.arch.projections is not None:
            server = part_server("top", 0, plans[1][0], 0)
            part = FlatProjections(self.arch.projections, spec)
            self._add(EMBED, 0, 0, 0, Join.ONE, [(server, None, part)])
            self.embed = self.stages[-1]

    def mlp(self, name: str) -> nn.Sequential | None:
        return self.arch.bottom if name == "bottom" else self.arch.top

    def _cut(
        self,
        mlp: str,
        layers: nn.Sequential,
        plan: Sequence[FcSplit],
        part_server: Callable[[str, int, FcSplit, int], int],
    ) -> None:
        entries = list(layers)
        fc, i = 0, 0
        while i < len(entries):
            layer = entries[i]
            split = plan[fc]
            if isinstance(layer, nn.Linear):
                server = part_server(mlp, fc, split, 0)
                start = i
                while i < len(entries) and not _is_split(entries[i]):
                    if isinstance(entries[i], nn.Linear):
                        if part_server(mlp, fc, plan[fc], 0) != server:
                            break
                        fc += 1
                    i += 1
                part = nn.Sequential(*entries[start:i])
                self._add(mlp, start, i, i, Join.ONE, [(server, None, part)])
                continue
            assert _is_split(layer), layer
            stop = i + 1
            while stop < len(entries) and not _is_fc(entries[stop]):
                stop += 1
            parts = _parts_of(layer)
            placed = [
                (part_server(mlp, fc, split, j), columns, part)
                for j, (columns, part) in enumerate(parts)
            ]
            join = Join.CONCAT if isinstance(layer, VerticalLinear) else Join.SUM
            self._add(mlp, i, i + 1, stop, join, placed)
            fc += 2 if isinstance(layer, CoPartitioned) else 1
            i = stop

    def _add(
        self,
        mlp: str,
        start: int,
        stop: int,
        local_stop: int,
        join: Join,
        placed: list[tuple[int, tuple[int, int] | None, nn.Module]],
    ) -> None:
        servers = tuple(server for server, _, _ in placed)
        columns = tuple(columns for _, columns, _ in placed)
        self.stages.append(
            Stage(len(self.stages), mlp, start, stop, local_stop, join, servers, columns)
        )
        self._parts.append([part for _, _, part in placed])

    def parts(self, stage: int) -> list[nn.Module]:
        """The modules of a stage's parts (part j on group PS `servers[j]`)."""
        return self._parts[stage]

    def owned(self, server: int) -> list[tuple[int, int]]:
        """(stage, part) of every part group PS `server` owns, in stage order."""
        return [
            (s.index, j)
            for s in self.stages
            for j, owner in enumerate(s.servers)
            if owner == server
        ]

    def parameters_of(self, server: int) -> list[nn.Parameter]:
        """The parameters group PS `server` owns, in a fixed order."""
        return [p for stage, j in self.owned(server) for p in self._parts[stage][j].parameters()]

    def flat_of(self, server: int) -> torch.Tensor:
        """A copy of the parameters group PS `server` owns, as one flat vector."""
        return torch.cat([p.detach().reshape(-1) for p in self.parameters_of(server)])

    def local(self, stage: Stage, x: torch.Tensor) -> torch.Tensor:
        """The trainer's entries after a stage's join (the activation of a split FC)."""
        layers = self.mlp(stage.mlp)
        assert layers is not None
        for layer in list(layers)[stage.stop : stage.local_stop]:
            x = layer(x)
        return x

    def release(self, keep: int | None = None) -> None:
        """Drop the values of every part but those of group PS `keep` (None: all; a
        trainer holds none), so that a node holds only what it owns; shapes stay."""
        for stage, parts in zip(self.stages, self._parts, strict=True):
            for owner, part in zip(stage.servers, parts, strict=True):
                if owner != keep:
                    for p in part.parameters():
                        p.data = torch.empty(0)

    def unsplit_flat(self) -> torch.Tensor:
        """The parameters as the unsplit DenseArch holds them, as one flat vector (the
        model a group stands for: what is evaluated and checkpointed)."""
        values = []
        for mlp in MLPS:
            layers = self.mlp(mlp)
            if layers is not None:
                values += [p.detach().reshape(-1) for p in merge_mlp(layers).parameters()]
        if self.arch.projections is not None:  # after the MLPs, as DenseArch holds them
            values += [p.detach().reshape(-1) for p in self.arch.projections.parameters()]
        return torch.cat(values)

    def flops_per_example(self, stage: int, part: int) -> float:
        """Training FLOPs of one example through one part: forward, input gradient and
        weight gradient, about one matmul each."""
        module = self._parts[stage][part]
        if isinstance(module, FlatProjections):
            return module.flops
        return sum(
            3 * 2.0 * layer.in_features * layer.out_features
            for layer in self._parts[stage][part].modules()
            if isinstance(layer, nn.Linear)
        )


def _is_split(layer: nn.Module) -> bool:
    return isinstance(layer, VerticalLinear | HorizontalLinear | CoPartitioned)


def _is_fc(layer: nn.Module) -> bool:
    return isinstance(layer, nn.Linear) or _is_split(layer)


def _parts_of(layer: nn.Module) -> list[tuple[tuple[int, int] | None, nn.Module]]:
    """(input columns or None, module) of each part of a split FC."""
    if isinstance(layer, VerticalLinear):
        return [(None, part) for part in layer.parts]
    if isinstance(layer, HorizontalLinear):
        return [(bounds, part) for bounds, part in zip(layer.bounds, layer.parts, strict=True)]
    assert isinstance(layer, CoPartitioned)
    return [
        (None, nn.Sequential(first, layer.activation, second))
        for first, second in zip(layer.first, layer.second, strict=True)
    ]


def summed(tensors: Sequence[torch.Tensor]) -> torch.Tensor:
    """The sum of same-shape tensors (partial outputs or gradients)."""
    total = tensors[0]
    for more in tensors[1:]:
        total = total + more
    return total
