"""Hierarchical training's placement within a group: the op graph, the tagging rules, the
greedy refinement (pure, no processes)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from recsync.families.hierarchical.fc_split import FcSplit, Split
from recsync.families.hierarchical.op_graph import OpKind, default_splits, dense_graph
from recsync.families.hierarchical.placement import (
    TRAINER,
    GroupShape,
    fc_parts,
    place,
    refine,
    tag,
    utilisation,
)
from recsync.model.spec import ModelSpec

WIDE = ModelSpec(bottom_mlp=(1024, 256), top_mlp=(2048, 512))


def graph(model: ModelSpec, parts: int, split: bool = True):
    bottom = default_splits([model.num_dense, *model.bottom_mlp, model.embedding_dim], parts, split)
    top = default_splits([model.top_input, *model.top_mlp, 1], parts, split)
    return dense_graph(model, bottom, top)


def test_copartition_applies_where_an_fc_widens_and_the_next_narrows():
    C = FcSplit(Split.CO_PARTITION, 4)
    assert default_splits([13, 512, 256, 64, 16], 4) == (C, C, FcSplit(), FcSplit())
    assert default_splits([367, 512, 256, 1], 4) == (C, C, FcSplit())
    assert default_splits([64, 32, 128, 16], 4) == (FcSplit(), C, C)  # narrowing first
    assert default_splits([367, 512, 256, 1], 4, enabled=False) == (FcSplit(),) * 3
    assert default_splits([367, 512, 256, 1], 1) == (FcSplit(),) * 3


def test_graph_counts_the_models_flops_and_parameters():
    model = ModelSpec()
    ops = graph(model, 1, split=False)
    fcs = [op for op in ops if op.kind is OpKind.FC]
    widths = [
        (13, 512), (512, 256), (256, 64), (64, 16), (367, 512), (512, 256), (256, 1),
    ]  # fmt: skip
    assert [op.param_bytes for op in fcs] == [4 * (i * o + o) for i, o in widths]
    split = graph(model, 4)
    assert sum(op.param_bytes for op in split) == sum(op.param_bytes for op in ops)
    fc_flops = sum(op.flops for op in split if op.kind is OpKind.FC)
    assert fc_flops == sum(op.flops for op in fcs)


def test_tagging_rules_put_parameters_on_group_servers_and_the_rest_on_trainers():
    ops = graph(WIDE, 4)
    device = tag(ops, 4)
    for op in ops:
        if op.kind in (OpKind.INPUT, OpKind.LOOKUP, OpKind.INTERACTION, OpKind.LOSS, OpKind.JOIN):
            assert device[op.name] == TRAINER, op.name
        if op.param_bytes:
            assert device[op.name] != TRAINER, op.name
    # a co-partition part (FC, ReLU, FC) is one connected component: one group PS
    part = [op for op in ops if op.module == "top.fc0+1.p2"]
    assert len(part) == 3 and len({device[op.name] for op in part}) == 1
    # the four parts of the top MLP's co-partition land on four different PSs
    firsts = [device[f"top.fc0+1.p{j}.a"] for j in range(4)]
    assert sorted(firsts) == [1, 2, 3, 4]


def test_components_are_balanced_by_parameter_bytes():
    ops = graph(WIDE, 3)
    device = tag(ops, 3)
    load = [sum(op.param_bytes for op in ops if device[op.name] == s) for s in (1, 2, 3)]
    biggest = max(
        sum(o.param_bytes for o in ops if o.module == op.module) for op in ops if op.param_bytes
    )
    assert max(load) - min(load) <= biggest


@settings(max_examples=15, deadline=None)
@given(
    st.lists(st.sampled_from([64, 256, 1024]), min_size=1, max_size=3),
    st.lists(st.sampled_from([64, 512, 2048]), min_size=1, max_size=3),
    st.integers(1, 5),
    st.integers(1, 8),
    st.booleans(),
)
def test_refinement_never_raises_the_maximum_utilisation(bottom, top, servers, trainers, split):
    model = ModelSpec(bottom_mlp=tuple(bottom), top_mlp=tuple(top))
    ops = graph(model, servers, split)
    shape = GroupShape(trainers=trainers, group_servers=servers, nets=4)
    device = tag(ops, servers)
    before = utilisation(ops, device, shape).maximum
    refined, moves = refine(ops, device, shape, max_moves=30)
    after = utilisation(ops, refined, shape).maximum
    assert after <= before
    assert (after < before) == bool(moves)
    for names in fc_parts(ops).values():  # an FC part moves whole: the unit engines run
        assert len({refined[name] for name in names}) == 1
    for op in ops:
        if op.param_bytes:
            assert refined[op.name] != TRAINER  # one copy of the dense part per group
        if op.kind in (OpKind.INPUT, OpKind.LOOKUP, OpKind.INTERACTION, OpKind.LOSS):
            assert refined[op.name] == TRAINER


def test_refinement_rescues_a_plan_without_tagging_and_the_plan_is_deterministic():
    ops = graph(WIDE, 4)
    shape = GroupShape(trainers=4, group_servers=4)
    untagged = place(ops, shape, tagging=False)
    assert len({untagged.device[op.name] for op in ops if op.param_bytes}) >= 2
    assert untagged.refined.maximum < untagged.tagged.maximum / 2
    assert place(ops, shape) == place(ops, shape)
    plain = place(ops, shape, refinement=False)
    assert plain.moves == () and plain.refined == plain.tagged


def test_compression_lowers_network_and_coding_costs_cpu():
    ops = graph(WIDE, 4)
    device = tag(ops, 4)
    raw = utilisation(ops, device, GroupShape(group_servers=4))
    squeezed = utilisation(
        ops,
        device,
        GroupShape(group_servers=4, activation_ratio=0.25, gradient_ratio=0.5, coding_s=1e-9),
    )
    assert all(s < r for s, r in zip(squeezed.network[1:], raw.network[1:], strict=True))
    assert all(s > r for s, r in zip(squeezed.cpu, raw.cpu, strict=True))
