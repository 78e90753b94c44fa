"""Hierarchical training's nodes driven event by event, without a driver: a trainer's batch
through its group PSs computes what the unsplit model computes, the group PSs' updates are
the unsplit model's optimizer step, their sync loop is paced by the batches they train, and
the strategy's config and plan refuse what cannot run."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import pytest
import torch

from recsync.coordinator.spec import ClusterSpec, JobSpec, plan_for
from recsync.coordinator.topology import build_topology
from recsync.data.batch import Batch
from recsync.data.synthetic import SyntheticSpec
from recsync.errors import ConfigError
from recsync.families import strategy_config
from recsync.families.hierarchical.compress.encoded import Identity
from recsync.families.hierarchical.config import HierarchicalConfig
from recsync.families.hierarchical.fc_split import FcSplit, Split
from recsync.families.hierarchical.group_model import Join
from recsync.families.hierarchical.messages import StageForward
from recsync.families.hierarchical.op_graph import part_op
from recsync.families.hierarchical.plan import GroupPlan, group_plan_of
from recsync.families.hierarchical.server import GROUP_SERVER, GroupServerNode, GroupServerStart
from recsync.families.hierarchical.trainer import HierarchicalTrainer
from recsync.families.synced_replicas.messages import Center, Exchange
from recsync.families.synced_replicas.sync_server import SYNC_SERVER
from recsync.model.spec import ModelSpec, TableSpec
from recsync.optim.dense import DenseOptimizerSpec
from recsync.optim.train_spec import TrainSpec
from recsync.protocol.address import READER, Address
from recsync.protocol.effects import AllReduce, Await, Call, CallEach
from recsync.protocol.messages import WorkerDone, wire_bytes
from recsync.trainer.replica import DenseReplica
from recsync.trainer.stats import TrainerSetup, Wiring

# top: 10 -> 16 widens, 16 -> 8 narrows: co-partitioned over 2 or more group PSs
MODEL = ModelSpec(
    num_dense=2,
    tables=tuple(TableSpec(f"C{i}", 20, 4) for i in range(3)),
    bottom_mlp=(4,),
    top_mlp=(16, 8),
)
TRAIN = TrainSpec(batch_size=8)
SYNTHETIC = SyntheticSpec(num_train=64, num_test=16, num_dense=2, table_rows=(20,) * 3)
B, F, D = 8, 3, 4


def batch(seed: int = 0) -> tuple[Batch, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    dense = torch.randn(B, 2, generator=g)
    labels = (torch.rand(B, generator=g) > 0.5).float()
    pooled = torch.randn(B, F, D, generator=g)
    empty = torch.zeros(F * B + 1, dtype=torch.int64)
    return Batch(dense, torch.empty(0, dtype=torch.int64), empty, labels), pooled


def group(
    strategy: HierarchicalConfig,
    plan: GroupPlan | None = None,
    train: TrainSpec = TRAIN,
    p: int = 2,
) -> tuple[HierarchicalTrainer, list[GroupServerNode]]:
    """Group 0's trainer and its `p` group PSs (cluster.num_dense_servers)."""
    plan = plan or group_plan_of(MODEL, strategy, strategy.groups, p, 1, B)
    addresses = tuple(Address(GROUP_SERVER, j) for j in range(p))
    servers = [
        GroupServerNode(
            0,
            j,
            plan.dense(MODEL, TRAIN.seed),
            train.dense_optimizer,
            strategy,
            Address(SYNC_SERVER, j),
            1,
        )
        for j in range(p)
    ]
    setup = TrainerSetup(
        0,
        strategy.groups,
        1,
        MODEL,
        TRAIN,
        None,
        Wiring(READER, (), addresses),  # type: ignore[arg-type]
    )
    return HierarchicalTrainer(setup, strategy, plan.dense(MODEL, TRAIN.seed)), servers


def drive(loop: Generator[Any, Any, Any], servers: list[GroupServerNode]) -> Any:
    """Answer each CallEach by the group PSs themselves; the loop's return value."""
    reply: Any = None
    try:
        while True:
            effect = loop.send(reply)
            assert isinstance(effect, CallEach), effect
            reply = [servers[a.index].handle(m) for a, m in effect.calls]
    except StopIteration as stop:
        return stop.value


def counting(loop: Generator[Any, Any, Any], sent: list[int]) -> Generator[Any, Any, Any]:
    """`loop`, its calls' wire bytes appended to `sent`."""
    reply = None
    try:
        while True:
            effect = loop.send(reply)
            sent.extend(wire_bytes(m) for _, m in effect.calls)
            reply = yield effect
    except StopIteration as stop:
        return stop.value


def unsplit(
    strategy: HierarchicalConfig, servers: list[GroupServerNode], plan: GroupPlan | None = None
) -> torch.Tensor:
    plan = plan or group_plan_of(MODEL, strategy, strategy.groups, len(servers), 1, B)
    return plan.unsplit(MODEL, TRAIN.seed, [s.flat for s in servers])


def assert_unsplit_steps(
    strategy: HierarchicalConfig,
    trainer: HierarchicalTrainer,
    servers: list[GroupServerNode],
    reference: DenseReplica,
    plan: GroupPlan | None = None,
) -> None:
    """Three batches through the group PSs: the unsplit `reference`'s loss, embedding
    gradient and optimizer step, each time."""
    for seed in range(3):
        data, pooled = batch(seed)
        loss, grad_pooled, _ = drive(trainer._train(0, data, pooled), servers)
        want_loss, flat_grad, want_pooled = reference.gradients(data, pooled)
        reference.apply(flat_grad)
        assert loss == pytest.approx(float(want_loss), abs=1e-6)
        torch.testing.assert_close(grad_pooled, want_pooled, atol=1e-6, rtol=1e-5)
        got = unsplit(strategy, servers, plan)
        torch.testing.assert_close(got, reference.flat, atol=1e-6, rtol=1e-5)


PLANS = {  # group PSs (p), and the strategy's switches
    "one group PS": (1, {}),
    "co-partitioned": (2, {}),
    "three PSs": (3, {}),
    "no tagging": (1, {"tagging": False}),
    "no FC split": (2, {"fc_split": False}),
}


@pytest.mark.parametrize(("p", "fields"), PLANS.values(), ids=PLANS.keys())
def test_a_batch_through_the_group_pss_is_the_unsplit_models_step(p, fields):
    strategy = HierarchicalConfig(groups=1, **fields)
    trainer, servers = group(strategy, p=p)
    reference = DenseReplica(MODEL, TRAIN.seed, TRAIN.dense_optimizer)
    assert torch.equal(unsplit(strategy, servers), reference.flat)  # same start, bit-exact
    assert_unsplit_steps(strategy, trainer, servers, reference)
    assert all(not s.in_flight for s in servers)  # every batch's state let go


def test_with_adam_each_stage_steps_once_per_batch_as_the_unsplit_model():
    """Adam moves parameters even where a step's gradient is zero (its momentum), so a
    group PS must step only the stage a backward is for, each stage counting its own steps."""
    strategy = HierarchicalConfig(groups=1)
    adam = TrainSpec(batch_size=B, dense_optimizer=DenseOptimizerSpec("adam"))
    trainer, servers = group(strategy, train=adam, p=1)
    reference = DenseReplica(MODEL, TRAIN.seed, adam.dense_optimizer)
    assert_unsplit_steps(strategy, trainer, servers, reference)
    assert servers[0].report().optimizer["steps"] == 3


def test_vertical_and_horizontal_splits_spread_over_group_pss_are_the_unsplit_step():
    """Splits the default plan never makes: the bottom FC vertical (outputs concatenated,
    one gradient slice per part), the top's second FC horizontal (each part its columns);
    parts of one FC on different group PSs and on the same one."""
    strategy = HierarchicalConfig(groups=1)
    vertical, horizontal = FcSplit(Split.VERTICAL, 2), FcSplit(Split.HORIZONTAL, 3)
    plans = ((vertical, FcSplit()), (FcSplit(), horizontal, FcSplit()))
    servers = {
        part_op("bottom", 0, vertical, 0): 0,
        part_op("bottom", 0, vertical, 1): 1,
        part_op("bottom", 1, FcSplit(), 0): 1,
        part_op("top", 0, FcSplit(), 0): 0,
        part_op("top", 1, horizontal, 0): 1,
        part_op("top", 1, horizontal, 1): 0,
        part_op("top", 1, horizontal, 2): 1,
        part_op("top", 2, FcSplit(), 0): 0,
    }
    placement = group_plan_of(MODEL, strategy, 1, 2, 1, B).placement  # shown only, not used
    plan = GroupPlan(plans, servers, placement)
    trainer, nodes = group(strategy, plan)
    reference = DenseReplica(MODEL, TRAIN.seed, TRAIN.dense_optimizer)
    joins = [stage.join for stage in trainer.dense.stages]
    assert Join.CONCAT in joins and not all(s.shares_input for s in trainer.dense.stages)
    assert_unsplit_steps(strategy, trainer, nodes, reference, plan)


def test_a_group_ps_sends_one_sum_for_its_parts_of_a_summed_stage():
    strategy = HierarchicalConfig(groups=1)
    plan = group_plan_of(MODEL, strategy, 1, 2, 1, B)
    one_ps = GroupPlan(plan.plans, dict.fromkeys(plan.servers, 0), plan.placement)
    trainer, nodes = group(strategy, one_ps, p=1)  # both co-parts on one PS
    stage = next(s for s in trainer.dense.stages if s.join is Join.SUM)
    assert len(stage.servers) == 2
    x = torch.zeros(B, trainer.dense.parts(stage.index)[0][0].in_features)
    reply = nodes[0].handle(StageForward(1, stage.index, Identity().encode(x), 0.0))
    assert len(reply.values) == 1  # the sum of its two parts' partial outputs


def test_compression_shrinks_the_wire_and_stays_close():
    data, pooled = batch(0)
    sizes, losses = {}, {}
    for codecs in (("none", "none"), ("int8", "bf16")):
        strategy = HierarchicalConfig(groups=1, activations=codecs[0], gradients=codecs[1])
        trainer, servers = group(strategy)
        sent: list[int] = []
        losses[codecs], _, _ = drive(counting(trainer._train(0, data, pooled), sent), servers)
        sizes[codecs] = sum(sent)
    assert sizes[("int8", "bf16")] < 0.6 * sizes[("none", "none")]
    assert losses[("int8", "bf16")] == pytest.approx(losses[("none", "none")], abs=0.02)


def test_the_sync_loop_waits_for_a_batch_per_worker_and_ends_with_its_group():
    strategy = HierarchicalConfig(groups=1)
    trainer, servers = group(strategy, p=1)
    server = servers[0]
    loop = server._shadow()
    call = next(loop)
    assert isinstance(call, Call) and isinstance(call.message, Exchange)
    assert call.target == Address(SYNC_SERVER, 0)
    assert torch.equal(call.message.values, server.flat)
    center = torch.zeros_like(server.flat)
    before = server.flat.clone()
    wait = loop.send(Center(center))
    assert isinstance(wait, Await) and not wait.until()  # type: ignore[misc]
    torch.testing.assert_close(server.flat, (1 - strategy.alpha) * before)  # pulled to 0
    drive(trainer._train(0, *batch(0)), servers)  # one batch: one backward per stage it owns
    assert wait.until()  # type: ignore[misc]
    assert isinstance(loop.send(None), Call)
    server.handle(WorkerDone(0))
    with pytest.raises(StopIteration):  # its group is done: no more rounds
        loop.send(Center(server.flat.clone()))
    assert server.report().syncs == 2


@pytest.mark.parametrize("cross_group", ["ma", "bmuf"])
def test_ma_and_bmuf_across_groups_all_reduce_until_every_group_is_done(cross_group):
    """No sync server: each round all-reduces the group PS's parameters with its peers of
    the other groups and pulls them toward the average (BMUF with block_lr 1 and no
    momentum: its global model is the average); a group done keeps joining the rounds
    (without waiting for batches) until every group is."""
    strategy = HierarchicalConfig(groups=2, cross_group=cross_group)
    trainer, servers = group(strategy, p=1)
    server = servers[0]
    loop = server._shadow()
    round_ = next(loop)
    assert isinstance(round_, AllReduce) and not round_.done
    assert torch.equal(round_.values, server.flat)
    before = server.flat.clone()
    wait = loop.send((torch.zeros_like(before), 0))
    assert isinstance(wait, Await) and not wait.until()  # type: ignore[misc]
    torch.testing.assert_close(server.flat, (1 - strategy.alpha) * before)  # pulled to 0
    server.handle(WorkerDone(0))
    assert wait.until()  # type: ignore[misc]
    done = loop.send(None)
    assert isinstance(done, AllReduce) and done.done
    again = loop.send((server.flat.clone(), 1))  # the other group still trains
    assert isinstance(again, AllReduce) and again.done  # at once, no wait
    with pytest.raises(StopIteration):
        loop.send((server.flat.clone(), 2))
    assert server.report().syncs == 3


def test_topk_gradients_keep_a_residual_per_stream():
    """Top-k with error feedback: what a gradient left out is carried to the next of its
    stream (one worker's gradient of one stage part, of one shape), on the trainer and on
    the group PS; a smaller batch is a stream of its own; forward is not coded."""
    data, pooled = batch(0)
    sizes, losses = {}, {}
    for fraction in (None, 0.25):
        strategy = HierarchicalConfig(groups=1, topk_fraction=fraction)
        trainer, servers = group(strategy)
        sent: list[int] = []
        losses[fraction], _, _ = drive(counting(trainer._train(0, data, pooled), sent), servers)
        sizes[fraction] = sum(sent)
    assert losses[0.25] == losses[None]
    assert sizes[0.25] < sizes[None]
    streams = trainer.gradients.streams
    assert streams and all(c.residual is not None for c in streams.values())  # type: ignore[attr-defined]
    assert {key[0] for key in streams} == {0}
    assert any(s.gradients.streams for s in servers)  # input gradients returned, coded
    small = Batch(data.dense[:3], data.ids, data.offsets[: F * 3 + 1], data.labels[:3])
    before = set(streams)
    drive(trainer._train(0, small, pooled[:3]), servers)
    assert {k[3][0] for k in set(streams) - before} == {3}


def test_forward_state_is_kept_per_worker_and_stage():
    strategy = HierarchicalConfig(groups=1)
    _, servers = group(strategy, p=1)
    x = torch.randn(B, 2)
    for worker in (0, 1):
        servers[0].handle(StageForward(worker, 0, Identity().encode(x), 0.0))
    assert set(servers[0].in_flight) == {(0, 0), (1, 0)}


def test_config_errors_name_the_field():
    with pytest.raises(ValueError, match="groups must be an integer"):
        HierarchicalConfig(groups=0)
    with pytest.raises(ValueError, match="activations"):
        HierarchicalConfig(activations="int4")
    with pytest.raises(ValueError, match="does not divide"):
        HierarchicalConfig(groups=3).trainers_per_group(4)
    with pytest.raises(ValueError, match="shadow_min_gap"):
        HierarchicalConfig(shadow_min_gap=-1)
    with pytest.raises(ConfigError, match=r"group PS\(s\) \[2, 3\] would hold no FC part"):
        group_plan_of(MODEL, HierarchicalConfig(fc_split=False), 2, 4, 1, B)
    with pytest.raises(ValueError, match="cross_group must be one of"):
        HierarchicalConfig(cross_group="allreduce")
    with pytest.raises(ValueError, match="block_momentum is BMUF's"):
        HierarchicalConfig(cross_group="ma", block_momentum=0.5)
    with pytest.raises(ValueError, match="block_momentum must be"):
        HierarchicalConfig(cross_group="bmuf", block_momentum=1.5)
    with pytest.raises(ValueError, match="topk_fraction"):
        HierarchicalConfig(topk_fraction=0.0)
    with pytest.raises(ValueError, match="gradients = 'none' with topk_fraction"):
        HierarchicalConfig(topk_fraction=0.1, gradients="bf16")
    assert strategy_config("hierarchical", groups=4).describe() == "HT g=4 EASGD alpha=0.1"
    bmuf = strategy_config("hierarchical", cross_group="bmuf", topk_fraction=0.1)
    assert bmuf.describe() == (
        "HT g=2 BMUF alpha=0.1 block_lr=1 block_momentum=0 act=none grad=none topk=0.1+ef"
    )
    assert HierarchicalConfig().cut_refusal() is None  # cuts: families/hierarchical/resume.py


@pytest.mark.parametrize("optimizer", ["adagrad", "adam"])
def test_a_group_ps_resumes_its_parameters_optimizer_steps_and_bmuf_state(optimizer):
    strategy = HierarchicalConfig(groups=1, cross_group="bmuf", block_momentum=0.5)
    train = TrainSpec(batch_size=B, dense_optimizer=DenseOptimizerSpec(optimizer))
    trainer, servers = group(strategy, train=train)
    data, pooled = batch()
    for _ in range(3):
        drive(trainer._train(0, data, pooled), servers)
    server = servers[0]
    server.sync_policy.apply(server.writer, server.flat + 0.5)  # BMUF state moves
    held = server.report()
    plan = group_plan_of(MODEL, strategy, strategy.groups, 2, 1, B)
    start = GroupServerStart(held.values, held.optimizer, held.sync)
    again = GroupServerNode(
        0, 0, plan.dense(MODEL, TRAIN.seed), train.dense_optimizer, strategy, None, 1, start
    )
    resumed = again.report()
    assert torch.equal(resumed.values, held.values)
    assert resumed.optimizer["steps"] == held.optimizer["steps"] == 3
    tensors = [k for k in held.optimizer if k != "steps"]
    assert tensors and all(torch.equal(resumed.optimizer[k], held.optimizer[k]) for k in tensors)
    assert held.sync and resumed.sync.keys() == held.sync.keys()
    assert all(torch.equal(resumed.sync[k], held.sync[k]) for k in held.sync)
    assert all(o.steps == 3 for o in again.stage_optimizers.values())


def test_data_norm_is_refused_by_name():
    spec = ModelSpec(num_dense=2, tables=MODEL.tables, bottom_mlp=(4,), data_norm=True)
    with pytest.raises(ValueError, match="data_norm"):
        group_plan_of(spec, HierarchicalConfig(groups=1), 1, 2, 1, B).dense(spec, 0)


@pytest.mark.parametrize("cross_group", ["easgd", "ma", "bmuf"])
def test_the_job_has_sync_servers_for_easgd_and_a_collective_per_part_owner_otherwise(
    cross_group,
):
    strategy = HierarchicalConfig(groups=3, cross_group=cross_group)
    spec = JobSpec(MODEL, TRAIN, ClusterSpec(6, 1, 1, num_dense_servers=2), strategy, SYNTHETIC)
    topology = build_topology(spec, plan_for(spec))
    sync_servers = topology.of_role(SYNC_SERVER)
    group_servers = topology.of_role(GROUP_SERVER)
    if cross_group == "easgd":
        assert len(sync_servers) == 2 and topology.collectives == ()
        return
    assert sync_servers == []
    assert all(node.sync_server is None for node in group_servers)  # type: ignore[attr-defined]
    ps = [Address(GROUP_SERVER, i) for i in range(6)]
    assert topology.collectives == ((ps[0], ps[2], ps[4]), (ps[1], ps[3], ps[5]))
