"""Gradient strategies in the simulator: the real servers, policies and math."""

from __future__ import annotations

import dataclasses
import types

import pytest
import torch

from recsync.coordinator.spec import ClusterSpec, JobSpec, plan_for
from recsync.data.synthetic import SyntheticSpec, SyntheticTask
from recsync.families import STRATEGIES, strategy_config
from recsync.families.gradient.dense_server import DENSE_SERVER
from recsync.families.gradient.strategy import GradientStrategy
from recsync.model.spec import ModelSpec, TableSpec
from recsync.optim.dense import DenseOptimizerSpec
from recsync.optim.train_spec import TrainSpec
from recsync.protocol.address import Role
from recsync.protocol.effects import SENDS_IN_FLIGHT
from recsync.protocol.messages import WorkerDone
from recsync.runtime.sim.cost import CostModel, Faults, Stragglers
from recsync.runtime.sim.job import SimJob
from recsync.trainer.reference import ReferenceTrainer

SYNTHETIC = SyntheticSpec(num_train=6_144, num_test=2_000, num_dense=4, table_rows=(50,) * 6)
MODEL = ModelSpec(
    num_dense=4,
    tables=tuple(TableSpec(f"C{i}", 50, 8) for i in range(6)),
    bottom_mlp=(16,),
    top_mlp=(16,),
)
TRAIN = TrainSpec(batch_size=64)
CLUSTER = ClusterSpec(2, 2, 2, num_dense_servers=2)


@pytest.fixture(autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def simulate(name: str, cost: CostModel = CostModel(), cluster=CLUSTER, **fields):
    spec = JobSpec(MODEL, TRAIN, cluster, strategy_config(name, **fields), SYNTHETIC)
    sim = SimJob(spec, plan_for(spec), cost)
    return sim, sim.run()


def table(sim: SimJob, t: int) -> torch.Tensor:
    layout = sim.plan.embeddings.layout
    parts = [
        sim.nodes_of(Role.EMBEDDING_SERVER)[s.shard].shard.weight[
            s.shard_row : s.shard_row + s.num_rows
        ]
        for s in layout.slices
        if s.table == t
    ]
    return torch.cat(parts)


def reference_at(batch_size: int) -> ReferenceTrainer:
    reference = ReferenceTrainer(MODEL, TrainSpec(batch_size=batch_size))
    for batch in SyntheticTask(SYNTHETIC).train_batches(batch_size):
        reference.train_step(batch)
    return reference


def assert_matches_reference(sim: SimJob, reference: ReferenceTrainer) -> None:
    dense = torch.cat([s.values for s in sim.nodes_of(DENSE_SERVER)])
    torch.testing.assert_close(dense, reference.replica.flat, atol=1e-5, rtol=0)
    base = 0
    for t, spec in enumerate(MODEL.tables):
        ref_rows = reference.embeddings.shards[0].weight[base : base + spec.num_rows]
        torch.testing.assert_close(table(sim, t), ref_rows, atol=1e-5, rtol=0)
        base += spec.num_rows


@pytest.mark.parametrize("name", ["sync", "gba"])
def test_sync_and_gba_without_stragglers_equal_the_reference_at_the_global_batch(name):
    sim, summary = simulate(name)
    assert summary["global_steps"] == SYNTHETIC.num_train // (4 * TRAIN.batch_size)
    assert summary["dense_staleness"]["max"] == 0
    assert_matches_reference(sim, reference_at(4 * TRAIN.batch_size))


@pytest.mark.parametrize(("name", "fields"), [("sync", {}), ("psp", {"linear_scaling": False})])
def test_sync_and_full_psp_equal_the_reference_whatever_the_speeds(name, fields):
    """PSP with c = all workers and b = 100% (and no linear scaling) is synchronous SGD:
    every worker waits, per block and per shard, for the step it pushed to, so unequal and
    noisy workers change nothing."""
    uneven = CostModel(speed_spread=0.5, batch_noise=0.3)
    sim, summary = simulate(name, uneven, **fields)
    assert summary["global_steps"] == SYNTHETIC.num_train // (4 * TRAIN.batch_size)
    assert summary["dense_staleness"]["max"] == summary["sparse_staleness"]["max"] == 0
    assert summary["gradients_dropped"] == summary["sparse_gradients_dropped"] == {}
    assert_matches_reference(sim, reference_at(4 * TRAIN.batch_size))


@pytest.mark.parametrize(
    "name", sorted(n for n, cls in STRATEGIES.items() if issubclass(cls, GradientStrategy))
)
def test_every_gradient_is_applied_or_dropped_on_every_server(name):
    cost = CostModel(stragglers=Stragglers(fraction=0.25, slowdown=4.0))
    sim, summary = simulate(name, cost)
    assert summary["examples_trained"] == SYNTHETIC.num_train
    steps = SYNTHETIC.num_train // TRAIN.batch_size
    for server in [*sim.nodes_of(Role.EMBEDDING_SERVER), *sim.nodes_of(DENSE_SERVER)]:
        stats = server.stats
        assert stats.pushes == steps, server
        assert stats.applied + sum(stats.dropped.values()) == stats.pushes, (name, stats)
        assert not server.pending
    assert summary["test_auc"] > 0.6


def test_async_applies_each_gradient_alone_and_measures_staleness():
    cost = CostModel(worker_flops=2e8)  # compute-bound: workers overlap, staleness > 0
    _, summary = simulate("async", cost)
    steps = SYNTHETIC.num_train // TRAIN.batch_size
    assert summary["global_steps"] == steps == summary["gradients_applied"]
    staleness = summary["dense_staleness"]
    assert sum(staleness["histogram"].values()) == steps
    assert 1.0 < staleness["mean"] <= 4.0  # about n - 1 = 3 with 4 workers
    assert summary["sparse_staleness"]["max"] >= 1


def test_bounded_staleness_blocks_fast_workers_and_backup_workers_drop_late_ones():
    cost = CostModel(worker_flops=2e8, stragglers=Stragglers(fraction=0.25, slowdown=4.0))
    _, hop_bs = simulate("bounded_staleness", cost, staleness=1)
    _, asynchronous = simulate("async", cost)
    assert hop_bs["blocked_seconds"]["AwaitStart"] > 0
    assert "AwaitStart" not in asynchronous["blocked_seconds"]  # async never holds a worker
    _, hop_bw = simulate("backup_workers", cost, num_backup=1)
    assert hop_bw["gradients_dropped"].get("late", 0) > 0


def test_same_seed_same_run_exactly():
    cost = CostModel(worker_flops=2e8, batch_noise=0.3, speed_spread=0.2)
    first, a = simulate("gba", cost)
    second, b = simulate("gba", cost)
    assert a["train_seconds"] == b["train_seconds"] and a["test_auc"] == b["test_auc"]
    assert a["dense_staleness"] == b["dense_staleness"]
    assert torch.equal(
        torch.cat([s.values for s in first.nodes_of(DENSE_SERVER)]),
        torch.cat([s.values for s in second.nodes_of(DENSE_SERVER)]),
    )


@pytest.mark.parametrize("name", ["gba", "sync", "async"])
def test_a_crashed_trainer_loses_only_its_batches_and_the_job_goes_on(name):
    cost = CostModel(worker_flops=2e8, faults=Faults(crash_trainer=1, crash_at_s=0.05))
    sim, summary = simulate(name, cost)
    lost = summary["examples_lost_in_crash"]
    assert sim.crashed == {1}
    # at most two batches per worker thread of trainer 1: a worker whose pushes leave with
    # its next step's requests holds its computed batch while the reader's answer with the
    # next one is on its way
    assert 0 <= lost <= 2 * 2 * TRAIN.batch_size
    if name != "sync":  # sync workers may be waiting for the step, holding no batch
        assert lost > 0
    assert summary["examples_trained"] + lost == SYNTHETIC.num_train
    assert summary["examples_per_trainer"][0] > summary["examples_per_trainer"][1]
    for server in [*sim.nodes_of(Role.EMBEDDING_SERVER), *sim.nodes_of(DENSE_SERVER)]:
        assert not server.pending


def test_crash_of_a_missing_trainer_is_refused():
    with pytest.raises(ValueError, match="crash_trainer 5"):
        simulate("async", CostModel(faults=Faults(crash_trainer=5)))


def resumed(first: str, then: str, split: int, cost: CostModel = CostModel()):
    """Train `first` on the first `split` examples, checkpoint, go on with `then`."""
    base = JobSpec(MODEL, TRAIN, CLUSTER, strategy_config(first), SYNTHETIC)
    head = SimJob(dataclasses.replace(base, stop_after_examples=split), plan_for(base), cost)
    head_summary = head.run()
    state = head.final_state
    tail_spec = dataclasses.replace(
        base, strategy=strategy_config(then), resume=state, stop_after_examples=None
    )
    tail = SimJob(tail_spec, plan_for(tail_spec), cost)
    return head_summary, state, tail, tail.run()


def test_sync_checkpointed_half_way_and_resumed_equals_one_sync_run():
    whole, _ = simulate("sync")
    head, state, tail, tail_summary = resumed("sync", "sync", 3_072)
    assert head["examples_trained"] == state.data_position == 3_072
    assert state.in_flight_examples % TRAIN.batch_size == 0
    assert tail_summary["examples_trained"] == SYNTHETIC.num_train - 3_072
    torch.testing.assert_close(
        torch.cat([s.values for s in tail.nodes_of(DENSE_SERVER)]),
        torch.cat([s.values for s in whole.nodes_of(DENSE_SERVER)]),
        atol=1e-6,
        rtol=0,
    )
    for t in range(len(MODEL.tables)):
        torch.testing.assert_close(table(tail, t), table(whole, t), atol=1e-6, rtol=0)


def test_switching_from_sync_to_gba_continues_from_the_checkpoint():
    cost = CostModel(worker_flops=2e8, stragglers=Stragglers(fraction=0.25, slowdown=4.0))
    head, state, _, tail = resumed("sync", "gba", 2_048, cost)
    assert tail["examples_trained"] == SYNTHETIC.num_train - 2_048
    assert state.global_step == 2_048 // (4 * TRAIN.batch_size)
    assert tail["test_auc"] > head["test_auc"] - 0.01


def test_a_checkpoint_from_another_layout_is_refused():
    _, state, _, _ = resumed("sync", "sync", 1_024)
    spec = JobSpec(
        MODEL,
        TRAIN,
        ClusterSpec(2, 2, 1, num_dense_servers=2),
        strategy_config("async"),
        SYNTHETIC,
        resume=state,
    )
    with pytest.raises(ValueError, match="embedding layout"):
        SimJob(spec, plan_for(spec), CostModel())


def test_allreduce_equals_the_reference_at_the_global_batch():
    spec = JobSpec(MODEL, TRAIN, ClusterSpec(4, 1, 2), strategy_config("allreduce"), SYNTHETIC)
    sim = SimJob(spec, plan_for(spec), CostModel(stragglers=Stragglers(0.25, 3.0)))
    summary = sim.run()
    reference = reference_at(4 * TRAIN.batch_size)
    for trainer in sim.nodes_of(Role.TRAINER):
        torch.testing.assert_close(trainer.replica.flat, reference.replica.flat, atol=1e-5, rtol=0)
    base = 0
    for t, table_spec in enumerate(MODEL.tables):
        ref_rows = reference.embeddings.shards[0].weight[base : base + table_spec.num_rows]
        torch.testing.assert_close(table(sim, t), ref_rows, atol=1e-5, rtol=0)
        base += table_spec.num_rows
    assert summary["global_steps"] == SYNTHETIC.num_train // (4 * TRAIN.batch_size)


def test_allreduce_needs_one_worker_per_trainer():
    with pytest.raises(ValueError, match="workers_per_trainer = 1"):
        simulate("allreduce")


def test_a_diverging_worker_stops_the_run_with_an_error_naming_it():
    train = TrainSpec(batch_size=64, dense_optimizer=DenseOptimizerSpec("sgd", lr=1e38))
    spec = JobSpec(MODEL, train, CLUSTER, strategy_config("async"), SYNTHETIC)
    with pytest.raises(ValueError, match=r"worker \d+: NaN or infinite gradient"):
        SimJob(spec, plan_for(spec), CostModel()).run()


def test_a_gradient_worker_is_not_charged_the_dense_optimizer_step_it_leaves_to_servers():
    """`apply_share` of a step is the dense optimizer's: a worker that pushes its gradient
    (async) is charged the rest, one that applies to its own replica (S-EASGD) all of it."""

    def trainers_cpu(name: str, cluster: ClusterSpec, apply_share: float) -> float:
        cost = CostModel(worker_flops=2e8, shared_cpus=2, apply_share=apply_share)
        return simulate(name, cost, cluster)[1]["cpu_seconds"]["trainers"]

    pushing = [trainers_cpu("async", CLUSTER, share) for share in (0.0, 0.25)]
    assert pushing[1] == pytest.approx(0.75 * pushing[0], rel=1e-9)
    replica = ClusterSpec(2, 2, 2)
    applying = [trainers_cpu("easgd", replica, share) for share in (0.0, 0.25)]
    assert applying[1] == applying[0] > 0
    with pytest.raises(ValueError, match="apply_share"):
        CostModel(apply_share=1.0)


def test_a_sender_is_held_while_more_than_two_sends_of_its_messages_are_in_flight():
    """As the engine's sender is held by its connection (runtime/ray/loops.py): a Send
    returns at once while at most SENDS_IN_FLIGHT sends' worth of its sender's messages are
    unhandled, else once they are no more (a server taking 1 s a message)."""
    spec = JobSpec(MODEL, TRAIN, CLUSTER, strategy_config("async"), SYNTHETIC)
    sim = SimJob(spec, plan_for(spec), CostModel(request_s=1.0))
    transport, clock = sim.transport, sim.transport.clock
    trainer = sim.hosts_of(Role.TRAINER)[0]
    server = next(a for a in sim.hosts if a.role is DENSE_SERVER)
    resumed: list[float] = []

    def step(_: object) -> None:  # a loop sends again once its last send returned
        resumed.append(clock.now)
        if len(resumed) < 3:
            transport.send(runner, 0, [(server, WorkerDone(0))])

    runner = types.SimpleNamespace(host=trainer, resume=step)
    transport.send(runner, 0, [(server, WorkerDone(0))])
    clock.run()
    assert SENDS_IN_FLIGHT == 2
    # the third send waits for the first messages to be handled
    assert resumed == [0.0, 0.0, pytest.approx(1.0, abs=1e-3)]
    assert transport.inflight[0] == 0
