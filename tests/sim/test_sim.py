"""The simulator runs the same nodes and policies as the Ray engine, in virtual time."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from recsync.coordinator.spec import ClusterSpec, JobSpec, plan_for
from recsync.data.synthetic import SyntheticSpec, SyntheticTask
from recsync.families import strategy_config
from recsync.model.spec import ModelSpec, TableSpec
from recsync.optim.train_spec import TrainSpec
from recsync.protocol.address import Role
from recsync.runtime.sim.cost import CostModel, Stragglers
from recsync.runtime.sim.job import SimJob
from recsync.strategy.timing import Timing
from recsync.trainer.reference import ReferenceTrainer

SYNTHETIC = SyntheticSpec(num_train=12_000, num_test=4_000, num_dense=4, table_rows=(50,) * 6)
MODEL = ModelSpec(
    num_dense=4,
    tables=tuple(TableSpec(f"C{i}", 50, 8) for i in range(6)),
    bottom_mlp=(16,),
    top_mlp=(16,),
)
TRAIN = TrainSpec(batch_size=64)


@pytest.fixture(autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def job(strategy="independent", cluster=ClusterSpec(1, 1, 1), cost=CostModel(), **fields):
    spec = JobSpec(MODEL, TRAIN, cluster, strategy_config(strategy, **fields), SYNTHETIC)
    return SimJob(spec, plan_for(spec), cost)


def table_rows(sim: SimJob, table: int) -> torch.Tensor:
    """A table's rows gathered from the simulated shards, in table order."""
    layout = sim.plan.embeddings.layout
    parts = [
        sim.nodes_of(Role.EMBEDDING_SERVER)[s.shard].shard.weight[
            s.shard_row : s.shard_row + s.num_rows
        ]
        for s in layout.slices
        if s.table == table
    ]
    return torch.cat(parts)


def test_one_worker_independent_is_bit_identical_to_the_reference_trainer():
    sim = job()
    summary = sim.run()
    reference = ReferenceTrainer(MODEL, TRAIN)
    for batch in SyntheticTask(SYNTHETIC).train_batches(TRAIN.batch_size):
        reference.train_step(batch)
    assert torch.equal(sim.nodes_of(Role.TRAINER)[0].replica.flat, reference.replica.flat)
    base = 0
    for t, spec in enumerate(MODEL.tables):
        ref_rows = reference.embeddings.shards[0].weight[base : base + spec.num_rows]
        assert torch.equal(table_rows(sim, t), ref_rows), f"table {t}"
        base += spec.num_rows
    assert summary["examples_trained"] == SYNTHETIC.num_train


def test_the_summary_has_the_cpu_the_cost_model_charged_each_role():
    """Virtual CPU: the seconds of work the cost model charged each role's machines (the
    engine's `cpu_seconds` are measured), here the workers' math and the reader's requests."""
    cost = CostModel(worker_flops=1e7, request_s=0.0, row_s=0.0, element_s=0.0, reader_batch_s=0.01)
    cpu = job("independent", ClusterSpec(1, 2, 2), cost).run()["cpu_seconds"]
    flops = MODEL.dense_flops_per_example() * SYNTHETIC.num_train
    assert cpu["trainers"] == pytest.approx(flops / 1e7, abs=0.01)
    requests = -(-SYNTHETIC.num_train // TRAIN.batch_size) + 2  # each worker's last finds none
    assert cpu["reader"] == pytest.approx(requests * 0.01)
    assert cpu["embedding_servers"] == 0.0


def test_a_runs_cpu_per_example_by_role():
    from recsync.app.runs.calibrate import cpu_per_example

    summary = {"examples_trained": 4_000, "cpu_seconds": {"trainers": 0.4, "reader": 0.02}}
    assert cpu_per_example(summary) == {"trainers": 100.0, "reader": 5.0}
    assert cpu_per_example({"examples_trained": 10}) == {}


def test_the_same_seed_gives_the_same_run_twice():
    cost = CostModel(speed_spread=0.3, batch_noise=0.2)
    cluster = ClusterSpec(3, 2, 2)
    first, second = job("easgd", cluster, cost), job("easgd", cluster, cost)
    a, b = first.run(), second.run()
    assert a == b
    for x, y in zip(first.nodes_of(Role.TRAINER), second.nodes_of(Role.TRAINER), strict=True):
        assert torch.equal(x.replica.flat, y.replica.flat)


@pytest.mark.parametrize(
    ("strategy", "fields"),
    [
        ("easgd", {}),
        ("easgd", {"timing": Timing("fixed", every_iterations=2)}),
        ("ma", {}),
        ("ma", {"timing": Timing("fixed", every_iterations=3)}),
        ("bmuf", {"block_momentum": 0.5}),
        ("bmuf", {"timing": Timing("fixed", every_seconds=0.05)}),
    ],
)
def test_every_replica_strategy_trains_one_pass_in_virtual_time(strategy, fields):
    summary = job(strategy, ClusterSpec(2, 2, 2), **fields).run()
    assert summary["examples_trained"] == SYNTHETIC.num_train
    assert summary["syncs"] > 0 and summary["test_auc"] > 0.6
    assert summary["engine"] == "sim" and summary["eps"] > 0


def test_stragglers_get_fewer_examples_and_fixed_sync_gap_is_k():
    cost = CostModel(worker_flops=1e7, stragglers=Stragglers(fraction=0.5, slowdown=4.0))
    timing = Timing("fixed", every_iterations=4)
    summary = job("easgd", ClusterSpec(2, 1, 1), cost, timing=timing).run()
    fast, slow = sorted(summary["examples_per_trainer"], reverse=True)
    assert fast > 2 * slow and fast + slow == SYNTHETIC.num_train
    assert summary["average_sync_gap"] == pytest.approx(4.0, rel=0.1)


def test_a_sent_message_holds_its_sender_while_its_end_is_spent():
    """A Ray caller serializes what it sends on its own thread: an async worker's dense push
    (sent alone at the next step's start; the last step's row push with it, at the end), on
    its machine's one slot, holds it for its sending CPU."""
    cluster = ClusterSpec(1, 1, 1, num_dense_servers=1)
    free = job("async", cluster).run()
    costly = job("async", cluster, CostModel(message_cpu_s=2e-3)).run()
    steps = -(-SYNTHETIC.num_train // TRAIN.batch_size)
    assert free["blocked_seconds"]["PushDense"] == 0.0
    assert costly["blocked_seconds"]["PushDense"] == pytest.approx((steps + 1) * 2e-3)
    assert costly["examples_trained"] == SYNTHETIC.num_train


def _fit_jobs(num_train: int) -> tuple[JobSpec, JobSpec]:
    from recsync.app.runs.fit_jobs import fit_configs

    synthetic = SyntheticSpec(num_train=num_train, num_test=500, num_dense=4, table_rows=(50,) * 6)
    few, many = fit_configs(synthetic)
    return tuple(dataclasses.replace(s, model=MODEL, train=TRAIN) for s in (few, many))


FIT_TRUTH = CostModel(
    worker_flops=1e8, message_cpu_s=2e-3, server_message_cpu_s=3e-3, shared_cpus=2
)


def test_calibration_measures_a_message_ends_cpu_on_each_side_and_the_worker_speed():
    """The fit jobs simulated with a known profile stand for the engine's runs: what a
    message end costs a trainer's process and a server's comes out of their CPU by role,
    and the worker speed out of the first's trainers' CPU, from a profile that had all
    three wrong."""
    from recsync.app.runs.calibrate import simulated
    from recsync.app.runs.fit_jobs import message_end_cpu, worker_speed

    few, many = _fit_jobs(1_200)
    few_run, many_run = simulated(few, FIT_TRUTH), simulated(many, FIT_TRUTH)
    assert (
        many_run["calls_per_batch"]["trainers"]["total"]
        > 4 * (few_run["calls_per_batch"]["trainers"]["total"])
    )
    guess = dataclasses.replace(
        FIT_TRUTH, worker_flops=1e9, message_cpu_s=1e-4, server_message_cpu_s=1e-4
    )
    trainer_s, server_s = message_end_cpu(few, many, few_run, many_run, guess)
    assert trainer_s == pytest.approx(2e-3, rel=0.02)  # the summary rounds CPU to 10 ms
    assert server_s == pytest.approx(3e-3, rel=0.02)
    measured = dataclasses.replace(guess, message_cpu_s=trainer_s, server_message_cpu_s=server_s)
    speed = worker_speed(few, few_run, measured)
    assert guess.worker_flops * speed == pytest.approx(1e8, rel=0.02)


def test_calibration_prices_a_servers_message_end_apart_from_the_readers_cpu():
    """The reader makes both fit jobs the same calls, and its CPU swings from run to run
    (its producer, a loaded machine): a first run whose reader spent as much more as the
    second's servers spent in all leaves a server's message end at its price (with the
    reader counted among the servers, 20 us an example of its noise made a server's end a
    third of its price on a loaded machine, 2026-11-29)."""
    from recsync.app.runs.calibrate import simulated
    from recsync.app.runs.fit_jobs import message_end_cpu

    few, many = _fit_jobs(1_200)
    few_run, many_run = simulated(few, FIT_TRUTH), simulated(many, FIT_TRUTH)
    cpu = dict(few_run["cpu_seconds"])
    cpu["reader"] += many_run["cpu_seconds"]["embedding_servers"]
    noisy = {**few_run, "cpu_seconds": cpu}
    trainer_s, server_s = message_end_cpu(few, many, noisy, many_run, FIT_TRUTH)
    assert trainer_s == pytest.approx(2e-3, rel=0.02)
    assert server_s == pytest.approx(3e-3, rel=0.02)


def test_calibration_measures_a_bytes_cpu_on_each_side_beyond_what_is_charged():
    """The bytes job (async: the dense gradient and model each step) simulated with a
    known profile stands for the engine's run: a byte's price on either side comes out of
    the CPU the run spent beyond what the profile charges with bytes free; a side whose run
    spent less than that is charged nothing for its bytes."""
    from recsync.app.runs.calibrate import simulated
    from recsync.app.runs.fit_jobs import byte_cpu, bytes_config

    synthetic = SyntheticSpec(num_train=1_200, num_test=500, num_dense=4, table_rows=(50,) * 6)
    spec = dataclasses.replace(bytes_config(synthetic), model=MODEL, train=TRAIN)
    truth = dataclasses.replace(FIT_TRUTH, byte_cpu_s=4e-6, server_byte_cpu_s=6e-6)
    run = simulated(spec, truth)
    trainer_s, server_s = byte_cpu(spec, run, dataclasses.replace(truth, byte_cpu_s=1e-9))
    assert trainer_s == pytest.approx(4e-6, rel=0.03)  # the summary rounds CPU to 10 ms
    assert server_s == pytest.approx(6e-6, rel=0.03)
    dearer = dataclasses.replace(FIT_TRUTH, message_cpu_s=3e-3, server_message_cpu_s=4e-3)
    assert byte_cpu(spec, simulated(spec, FIT_TRUTH), dearer) == (0.0, 0.0)


def test_calibration_prices_a_batch_at_what_the_readers_producer_spent_in_the_runs():
    """Summed over the fit runs that tell the producer's CPU (among the reader's), over the
    batches they made; runs of old, which do not tell, price nothing."""
    from recsync.app.runs.fit_jobs import reader_batch_cpu

    def run(examples: int, producer: float | None) -> dict:
        told = {} if producer is None else {"helper_processes": producer}
        return {"examples_trained": examples, "thread_cpu_seconds": {"reader": told}}

    runs = [run(25_600, 0.2), run(51_200, 0.4), run(12_800, None)]
    assert reader_batch_cpu(runs, 256) == pytest.approx(0.6 / 300)
    assert reader_batch_cpu([run(25_600, None), {"examples_trained": 1}], 256) is None


def test_calibration_runs_its_fit_jobs_in_rounds_and_keeps_each_ones_median_run():
    """Each round runs every fit job once (a slow spell of the machine spreads over all of
    them); each job keeps its run of median steady EPS; the progress bar counts every run."""
    from recsync.app.runs.calibrate import calibration_steps, median_runs

    few, many = _fit_jobs(600)
    eps = iter([10, 50, 30, 20, 40, 60])
    order, told = [], []

    def run(spec):
        order.append(id(spec))
        return {"eps_steady": next(eps)}

    kept = median_runs([few, many], 3, run, told.append)
    assert order == [id(few), id(many)] * 3
    assert [r["eps_steady"] for r in kept] == [30, 50]
    assert len(told) == 6 and told[0].endswith("(run 1 of 3)")
    assert calibration_steps(False, 3) == calibration_steps(False) + 2 * 3
    assert calibration_steps(True, 3) > calibration_steps(False, 3)


def test_calibration_refuses_fit_jobs_whose_messages_cannot_tell_what_one_costs():
    from recsync.app.runs.calibrate import simulated
    from recsync.app.runs.fit_jobs import message_end_cpu

    few, many = _fit_jobs(600)
    few_run = simulated(few, FIT_TRUTH)
    with pytest.raises(ValueError, match="must put at least 3 times the first's"):
        message_end_cpu(few, few, few_run, few_run, FIT_TRUTH)
    cheap = dataclasses.replace(FIT_TRUTH, message_cpu_s=0.0)
    with pytest.raises(ValueError, match="must cost both ends CPU"):
        message_end_cpu(few, many, few_run, simulated(many, cheap), FIT_TRUTH)


@pytest.mark.parametrize(
    ("price", "counter", "cheap", "dear"),
    [("message_cpu_s", "message_ends", 1e-4, 4e-4), ("byte_cpu_s", "message_bytes", 1e-8, 1e-7)],
)
def test_a_servers_message_ends_and_bytes_cost_its_own_price(price, counter, cheap, dear):
    """Each end of a message at a server (or the reader) costs `server_message_cpu_s`, and
    each byte it carries there `server_byte_cpu_s`; at a trainer `message_cpu_s` and
    `byte_cpu_s`: the trainers' CPU does not move with the servers' price, and the servers'
    moves by what they counted at it."""
    cluster = ClusterSpec(1, 1, 1)
    base = CostModel(**{price: cheap, f"server_{price}": cheap})
    cheap_job = job(cluster=cluster, cost=base)
    cheap_run = cheap_job.run()
    dear_run = job(cluster=cluster, cost=dataclasses.replace(base, **{f"server_{price}": dear}))
    dear_run = dear_run.run()
    counted = sum(
        getattr(h.machine, counter)
        for a, h in cheap_job.hosts.items()
        if a.role is not Role.TRAINER
    )
    at_trainers = sum(getattr(h.machine, counter) for h in cheap_job.hosts_of(Role.TRAINER))
    assert counted == at_trainers > 2 * SYNTHETIC.num_train // TRAIN.batch_size  # all reach one
    assert dear_run["cpu_seconds"]["trainers"] == cheap_run["cpu_seconds"]["trainers"]
    servers = ("embedding_servers", "reader")
    extra = sum(dear_run["cpu_seconds"][r] - cheap_run["cpu_seconds"][r] for r in servers)
    assert extra == pytest.approx(counted * (dear - cheap), abs=0.011)  # rounded to 10 ms
    at = CostModel.message_cpu_at if price == "message_cpu_s" else CostModel.byte_cpu_at
    assert at(CostModel(**{price: 1e-9}), Role.EMBEDDING_SERVER) == 1e-9  # None: the same
    for name in (price, f"server_{price}"):
        with pytest.raises(ValueError, match=f"{name} must be >= 0"):
            CostModel(**{name: -1.0})


def test_a_workers_next_batch_is_asked_for_as_its_last_one_comes_back():
    """As the engine's loops do, a worker's request for its next batch leaves again as the
    reply to its last one arrives: a reader slower than a round trip but faster than a step
    holds no worker up beyond each one's first batch, every example is trained once and no
    batch more is asked for (the last reply, no batch, asks for none)."""
    cluster = ClusterSpec(1, 2, 1)
    quick = CostModel(worker_flops=1e8, reader_batch_s=1e-4)
    slow = dataclasses.replace(quick, reader_batch_s=2e-3)
    quick_run, slow_run = job(cluster=cluster, cost=quick).run(), job(cluster=cluster, cost=slow)
    slow_run = slow_run.run()
    assert slow_run["examples_trained"] == quick_run["examples_trained"] == SYNTHETIC.num_train
    asked = slow_run["calls_per_batch"]["trainers"]["NextBatch"]
    assert asked == quick_run["calls_per_batch"]["trainers"]["NextBatch"]
    assert asked == pytest.approx(1 + 2 / (SYNTHETIC.num_train / TRAIN.batch_size), abs=1e-3)
    assert slow_run["blocked_seconds"]["NextBatch"] <= (1 + 2) * 2e-3  # the two first asks
    assert slow_run["eps"] > 0.98 * quick_run["eps"]


def test_the_profile_charges_what_calibration_measured_each_at_its_own_price():
    from recsync.app.runs.calibrate import profile

    measured = {
        "worker_s": 0.02,
        "apply_share": 0.1,
        "reader_s": 3e-4,
        "server_row_s": 2e-7,
        "server_element_s": 6e-10,  # a dense element: not a row's per-element share
        "call_caller_cpu_s": 5e-5,
        "call_callee_cpu_s": 3e-5,
        "byte_s": 3e-10,
        "process_idle_cpus": 0.012,
    }
    cost = profile(MODEL, TRAIN, measured)
    assert cost.worker_flops == pytest.approx(
        MODEL.dense_flops_per_example() * TRAIN.batch_size / 0.02
    )
    assert (cost.row_s, cost.element_s) == (2e-7, 6e-10)
    assert cost.message_cpu_s == pytest.approx(2e-5)  # a call is four message ends
    assert (cost.byte_cpu_s, cost.reader_batch_s, cost.apply_share) == (3e-10, 3e-4, 0.1)
    assert cost.process_idle_cpus == 0.012


def test_calibration_prices_a_shard_row_at_its_lookup_and_update_over_the_rows_charged(
    monkeypatch,
):
    """A shard serves a batch's lookup and applies the coalesced row gradients its push
    carries; computing those gradients is the worker's math (timed there), so the price
    leaves it out, and it is per row as the simulator counts a lookup's and a push's rows."""
    from recsync.app.runs import calibrate
    from recsync.protocol.messages import Lookup, PushRows
    from recsync.ps.layout import EmbeddingLayout
    from recsync.ps.local import build_shards
    from recsync.ps.shard import row_gradients

    layout = EmbeddingLayout.single_shard(MODEL.tables)
    shard = build_shards(layout, TRAIN.sparse_optimizer, TRAIN.seed)[0]
    served = []
    for batch in list(SyntheticTask(SYNTHETIC).train_batches(TRAIN.batch_size))[:4]:
        (request,) = layout.route(batch)
        pooled = shard.lookup(request.rows, request.offsets, request.weights)
        push = PushRows(*row_gradients(request.rows, request.offsets, pooled))
        served.append((Lookup(request.rows, request.offsets, request.weights), push))
        assert push.rows.numel() < request.rows.numel()  # duplicates coalesced

    def no_row_gradients(*_: object) -> None:
        raise AssertionError("the shard's price timed the worker's row gradients")

    monkeypatch.setattr(calibrate, "row_gradients", no_row_gradients)
    calls = []
    for name in ("lookup", "apply_gradients"):
        method = getattr(shard, name)
        monkeypatch.setattr(
            shard, name, lambda *a, _m=method, _n=name, **k: calls.append(_n) or _m(*a, **k)
        )
    monkeypatch.setattr(
        calibrate, "_median_seconds", lambda fn, items: [fn(i) for i in items] and 1.0
    )
    rows = sorted(lookup.rows.numel() + push.rows.numel() for lookup, push in served)
    assert calibrate.shard_row_seconds(shard, served) == pytest.approx(2 / (rows[1] + rows[2]))
    assert calls == ["lookup", "apply_gradients"] * len(served)


def test_steady_eps_leaves_out_ramp_up_and_tail():
    from recsync.coordinator.measures import steady_eps

    handed = [(0.0, 10), (1.0, 20), (2.0, 40), (3.0, 60), (4.0, 80), (10.0, 100)]
    assert steady_eps(handed) == pytest.approx((80 - 20) / (4.0 - 1.0))
    assert steady_eps([(2.0, 50)]) == 25.0


def test_a_steady_window_too_short_is_refused():
    from recsync.coordinator.measures import (
        MIN_STEADY_BATCHES,
        ShortSteadyWindow,
        check_steady,
        steady_measures,
    )

    # 2 worker threads, batches of 10, 100 batches: 60 of them, 30 a thread, in the window
    handed = [(0.1 * i, 10 * i) for i in range(1, 101)]
    long = steady_measures(handed, batch_size=10, worker_threads=2)
    assert long["steady_batches_per_thread"] == pytest.approx(30.0)
    assert check_steady(long, "long run") == pytest.approx(100.0)
    # the same batches over 20 threads: 3 a thread in the window
    short = steady_measures(handed, batch_size=10, worker_threads=20)
    assert short["steady_batches_per_thread"] < MIN_STEADY_BATCHES
    with pytest.raises(ShortSteadyWindow, match="short run.*3.0 batches per worker thread"):
        check_steady(short, "short run")
    # no two points inside the window: no steady window at all
    none = steady_measures([(1.0, 10), (2.0, 100)], batch_size=10, worker_threads=1)
    assert none["steady_batches_per_thread"] == 0.0
    with pytest.raises(ShortSteadyWindow, match="lacking"):
        check_steady({"eps_steady": 1.0}, "lacking")


def test_a_run_says_how_many_batches_its_steady_rate_spans():
    cluster = ClusterSpec(2, 2, 1)
    spec = JobSpec(MODEL, TRAIN, cluster, strategy_config("independent"), SYNTHETIC)
    summary = SimJob(spec, plan_for(spec), CostModel()).run()
    batches = SYNTHETIC.num_train / TRAIN.batch_size / 4  # a worker thread's share
    assert 0.5 * batches <= summary["steady_batches_per_thread"] <= 0.6 * batches + 1


def test_progress_is_reported_as_each_batch_is_handed_out():
    handed = []
    cluster = ClusterSpec(2, 2, 1)
    spec = JobSpec(MODEL, TRAIN, cluster, strategy_config("independent"), SYNTHETIC)
    SimJob(spec, plan_for(spec), CostModel(), on_handed=handed.append).run()
    steps = [b - a for a, b in zip([0, *handed], handed, strict=False)]
    assert handed[-1] == SYNTHETIC.num_train
    assert steps[:-1] == [TRAIN.batch_size] * (len(steps) - 1)
    assert 0 < steps[-1] <= TRAIN.batch_size


def test_a_replica_worker_makes_one_call_per_shard_a_step_carrying_its_last_push():
    sim = job("easgd", ClusterSpec(2, 2, 2))
    summary = sim.run()
    batches = -(-SYNTHETIC.num_train // TRAIN.batch_size)  # the last one partial
    trainers = summary["traffic"]["trainers"]
    # every batch touches both shards: one call each per step, its first step's lookups
    # alone (4 threads x 2 shards), then each carrying the previous step's push; one push
    # each per worker thread when its data ran out
    assert trainers["Lookup"]["calls"] == 4 * 2
    assert trainers["PushSparse+Lookup"]["calls"] == 2 * batches - 4 * 2
    assert trainers["PushSparse"]["calls"] == 4 * 2
    assert trainers["NextBatch"]["calls"] == batches + 4  # each thread's last finds none
    assert list(summary["calls_per_batch"]) == ["trainers"]  # servers only answer
    per_batch = summary["calls_per_batch"]["trainers"]
    assert per_batch["PushSparse+Lookup"] == round((2 * batches - 8) / batches, 3)
    assert per_batch["total"] == round(sum(v for k, v in per_batch.items() if k != "total"), 3)
    assert summary["examples_trained"] == SYNTHETIC.num_train


def test_an_async_worker_carries_its_row_gradients_on_its_next_lookups_gba_pushes_at_once():
    cluster = ClusterSpec(2, 2, 2, num_dense_servers=2)
    batches = -(-SYNTHETIC.num_train // TRAIN.batch_size)
    deferred = job("async", cluster).run()
    calls = {k: v["calls"] for k, v in deferred["traffic"]["trainers"].items()}
    # a lookup on every shard each step: the first alone (4 threads x 2 shards), then each
    # carrying the step before's row gradients; the last step's leave alone at the end
    assert calls["Lookup"] == calls["PushSparse"] == 4 * 2
    assert calls["PushSparse+Lookup"] == 2 * batches - 4 * 2
    assert calls["PushDense"] == calls["PullDense"] == 2 * batches  # dense pushes alone
    assert deferred["examples_trained"] == SYNTHETIC.num_train
    at_once = job("gba", cluster).run()
    calls = {k: v["calls"] for k, v in at_once["traffic"]["trainers"].items()}
    assert calls["Lookup"] == calls["PushSparse"] == 2 * batches
    assert "PushSparse+Lookup" not in calls


def test_stragglers_in_stretches_are_redrawn_each_period_and_repeat_from_the_seed():
    from recsync.runtime.sim.cost import WorkerSpeeds

    stretches = Stragglers(fraction=0.25, slowdown=4.0, period_s=10.0)
    speeds = WorkerSpeeds(CostModel(stragglers=stretches), 8, seed=3)
    sets = [
        frozenset(w for w in range(8) if speeds.is_straggler(w, t)) for t in (0.0, 5.0, 15.0, 25.0)
    ]
    assert all(len(s) == 2 for s in sets) and sets[0] == sets[1]
    assert len(set(sets)) > 1  # some period slows other workers
    again = WorkerSpeeds(CostModel(stragglers=stretches), 8, seed=3)
    assert [frozenset(w for w in range(8) if again.is_straggler(w, t)) for t in (25.0, 0.0)] == [
        sets[3],
        sets[0],
    ]
    fixed = WorkerSpeeds(CostModel(stragglers=Stragglers(0.25, 4.0)), 8, seed=3)
    assert len({frozenset(w for w in range(8) if fixed.is_straggler(w, t)) for t in (0, 50)}) == 1
    with pytest.raises(ValueError, match="period_s"):
        Stragglers(period_s=-1.0)


def test_delays_hit_dense_pulls_and_lookups_unless_lookups_are_spared():
    from recsync.families.gradient.messages import PullDense
    from recsync.protocol.messages import Lookup
    from recsync.runtime.sim.cost import Faults

    lookup = Lookup(torch.tensor([1]), torch.tensor([0, 1]), None)
    both, dense_only = Faults(), Faults(delay_lookups=False)
    assert both.may_delay(lookup) and both.may_delay(PullDense(0))
    assert not dense_only.may_delay(lookup) and dense_only.may_delay(PullDense(0))


def test_each_process_idling_on_the_shared_cores_leaves_the_work_the_rest():
    """On one machine (shared cores) every process's idle share slows all work alike: a
    1 x 2 job of 5 processes (reader, shard, trainer and its 2 worker processes), each
    idling at 0.1 of one of 2 cores, leaves 1.5 cores; on a cluster it changes nothing."""
    cluster = ClusterSpec(1, 2, 1, worker_processes=True)
    machine = CostModel(worker_flops=2e8, latency_s=0.0, bandwidth_bytes_s=1e15, shared_cpus=2)
    idling = dataclasses.replace(machine, process_idle_cpus=0.1)
    sim = job("independent", cluster, idling)
    assert sim.topology.num_processes() == 5
    assert idling.shared_stretch(5) == pytest.approx(2 / 1.5)
    assert job("independent", cluster, machine).run()["eps"] == pytest.approx(
        sim.run()["eps"] * 2 / 1.5, rel=1e-3
    )
    threads = dataclasses.replace(cluster, worker_processes=False)
    assert job("independent", threads, idling).topology.num_processes() == 3
    own_cores = dataclasses.replace(machine, shared_cpus=0)
    idling_elsewhere = dataclasses.replace(own_cores, process_idle_cpus=0.1)
    assert (
        job("independent", cluster, idling_elsewhere).run()
        == job("independent", cluster, own_cores).run()
    )
    with pytest.raises(
        ValueError, match="5 processes idling at that would leave almost none of cost.shared_cpus"
    ):
        job("independent", cluster, dataclasses.replace(machine, process_idle_cpus=0.4))


def test_a_mark_mid_run_scores_its_share_of_the_held_out_set_and_the_end_all_of_it():
    spec = JobSpec(MODEL, TRAIN, ClusterSpec(2, 1, 1), strategy_config("easgd"), SYNTHETIC)
    sampled = SimJob(spec, plan_for(spec), CostModel(), eval_every=3_000, eval_examples=1_000)
    sampled.run()
    whole = SimJob(spec, plan_for(spec), CostModel(), eval_every=3_000)
    whole.run()
    marks = [r["test_examples"] for r in sampled.evaluations.records]
    assert marks == [1_000] * 3 + [SYNTHETIC.num_test]
    assert [r["test_examples"] for r in whole.evaluations.records] == [SYNTHETIC.num_test] * 4
    # the same run (scoring does not touch it), and the end's record scores the same model
    assert sampled.evaluations.records[-1] == whole.evaluations.records[-1]
    for part, full in zip(
        sampled.evaluations.records[:-1], whole.evaluations.records, strict=False
    ):
        assert part["examples"] == full["examples"]
        assert abs(part["test_auc"] - full["test_auc"]) < 0.05
