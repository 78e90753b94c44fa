"""Replica strategies (ShadowSync Alg. 2-4) driven event by event on small flat vectors.

Expected values are hand-computed from design.md section 3; all of them are dyadic
fractions, exact in float32, so the checks are exact (torch.equal)."""

from __future__ import annotations

import pytest
import torch

from recsync.families import STRATEGIES, strategy_config
from recsync.families.replica.bmuf import BmufConfig, BmufReplica
from recsync.families.replica.easgd import EasgdCenter, EasgdConfig
from recsync.families.replica.independent import IndependentConfig
from recsync.families.replica.ma import MaConfig
from recsync.families.synced_replicas.strategy import (
    CenterStrategy,
    CollectiveStrategy,
    ElasticPull,
    FixedTrigger,
    ReplicaStrategy,
    Timing,
    average_sync_gap,
    snapshot,
)


def vec(*values: float) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float32)


def assert_exact(actual: torch.Tensor, *expected: float) -> None:
    assert torch.equal(actual, vec(*expected)), f"{actual.tolist()} != {list(expected)}"


# --- EASGD (Alg. 2) -------------------------------------------------------------------------


def test_easgd_two_trainers_interleaved():
    config = EasgdConfig(alpha=0.25)
    center = vec(0, 0)
    server = EasgdCenter(config, center)
    w1, w2 = vec(4, 8), vec(-4, 16)
    t1, t2 = ElasticPull(config), ElasticPull(config)
    w1_storage = w1.data_ptr()

    # trainer 1 sends its snapshot; the center moves a quarter of the way toward it
    r1 = server.exchange(snapshot(w1))
    assert_exact(center, 1, 2)  # 0.75*0 + 0.25*(4, 8)
    assert_exact(r1, 1, 2)
    # the worker threads of trainer 1 keep training before the answer is applied
    w1 += vec(4, 0)  # w1 = (8, 8)
    # trainer 2 exchanges next: the center moves from (1, 2) toward (-4, 16)
    r2 = server.exchange(snapshot(w2))
    assert_exact(center, -0.25, 5.5)  # 0.75*(1, 2) + 0.25*(-4, 16)
    assert_exact(r1, 1, 2)  # the returned w_ps is a copy, not the live center
    # trainer 1 applies the w_ps it got back to its CURRENT replica (8, 8), not its snapshot
    t1.apply(w1, r1)
    assert_exact(w1, 6.25, 6.5)  # 0.75*(8, 8) + 0.25*(1, 2)
    assert w1.data_ptr() == w1_storage
    t2.apply(w2, r2)
    assert_exact(w2, -3.0625, 13.375)  # 0.75*(-4, 16) + 0.25*(-0.25, 5.5)
    assert_exact(center, -0.25, 5.5)  # trainer-side updates do not touch the center
    assert server.exchanges == 2


def test_easgd_sharded_center_updates_replica_slices_in_place():
    config = EasgdConfig(alpha=0.5)
    center = vec(0, 0, 8, 8)
    shards = [EasgdCenter(config, center[0:2]), EasgdCenter(config, center[2:4])]
    replica = vec(4, 4, 0, 4)
    trainer = ElasticPull(config)
    answers = [
        shard.exchange(snapshot(replica[i * 2 : i * 2 + 2])) for i, shard in enumerate(shards)
    ]
    assert_exact(center, 2, 2, 4, 6)  # each server updated its slice of the center in place
    replica[3] = 8  # a worker step lands while the answers travel back
    for i, answer in enumerate(answers):
        trainer.apply(replica[i * 2 : i * 2 + 2], answer)
    assert_exact(replica, 3, 3, 2, 7)  # 0.5*(4, 4, 0, 8) + 0.5*(2, 2, 4, 6)


def test_easgd_rejects_mismatched_slices():
    config = EasgdConfig()
    with pytest.raises(ValueError, match="replica_slice"):
        EasgdCenter(config, vec(0, 0)).exchange(vec(1, 2, 3))
    with pytest.raises(ValueError, match="received"):
        ElasticPull(config).apply(vec(1, 2), vec(1, 2).double())
    with pytest.raises(ValueError, match="center_slice"):
        EasgdCenter(config, torch.zeros(2, 2))


# --- MA (Alg. 3) ----------------------------------------------------------------------------


def test_ma_three_trainers():
    config = MaConfig(alpha=0.25)
    replicas = [vec(3, 0), vec(6, 3), vec(0, 9)]
    average = torch.stack([snapshot(w) for w in replicas]).sum(0) / 3  # the driver's all-reduce
    assert_exact(average, 3, 4)
    replicas[0] += vec(4, 4)  # trainer 0 kept training during the all-reduce: (7, 4)
    for w in replicas:
        ElasticPull(config).apply(w, average)
    assert_exact(replicas[0], 6, 4)  # 0.75*(7, 4) + 0.25*(3, 4)
    assert_exact(replicas[1], 5.25, 3.25)  # 0.75*(6, 3) + 0.25*(3, 4)
    assert_exact(replicas[2], 0.75, 7.75)  # 0.75*(0, 9) + 0.25*(3, 4)
    assert_exact(average, 3, 4)


def test_ma_alpha_one_copies_the_average():
    w = vec(1, 2)
    ElasticPull(MaConfig(alpha=1.0)).apply(w, vec(5, -3))
    assert_exact(w, 5, -3)


# --- BMUF (Alg. 4) --------------------------------------------------------------------------

# the all-reduce averages of three rounds
AVERAGES = [vec(4, 8), vec(6, 4), vec(5, 10)]
F32 = {"rtol": 1e-5, "atol": 1e-5}  # float32 policy vs a float64 reference


def test_bmuf_block_momentum_three_rounds():
    config = BmufConfig(alpha=0.5, block_lr=0.5, block_momentum=0.5)
    replica = vec(4, 0)
    bmuf = BmufReplica(config, initial=vec(0, 0))
    # round 1: d = (4, 8); v = 0.5*0 + 0.5*d = (2, 4); w_g = (2, 4)
    bmuf.apply(replica, AVERAGES[0])
    assert_exact(bmuf.velocity, 2, 4)
    assert_exact(bmuf.global_model, 2, 4)
    assert_exact(replica, 3, 2)  # 0.5*(4, 0) + 0.5*(2, 4)
    # round 2: workers moved the replica to (5, 2); d = (6, 4) - (2, 4) = (4, 0)
    replica[0] = 5
    bmuf.apply(replica, AVERAGES[1])
    assert_exact(bmuf.velocity, 3, 2)  # 0.5*(2, 4) + 0.5*(4, 0)
    assert_exact(bmuf.global_model, 5, 6)
    assert_exact(replica, 5, 4)  # 0.5*(5, 2) + 0.5*(5, 6)
    # round 3: d = (5, 10) - (5, 6) = (0, 4)
    bmuf.apply(replica, AVERAGES[2])
    assert_exact(bmuf.velocity, 1.5, 3)  # 0.5*(3, 2) + 0.5*(0, 4)
    assert_exact(bmuf.global_model, 6.5, 9)
    assert_exact(replica, 5.75, 6.5)  # 0.5*(5, 4) + 0.5*(6.5, 9)
    assert bmuf.rounds == 3


def test_bmuf_nesterov_three_rounds():
    config = BmufConfig(alpha=0.5, block_lr=0.5, block_momentum=0.5, nesterov=True)
    replica = vec(4, 0)
    bmuf = BmufReplica(config, initial=vec(0, 0))
    # round 1: v = (2, 4); stored (look-ahead) w_g = 0 + v + 0.5 v = (3, 6)
    bmuf.apply(replica, AVERAGES[0])
    assert_exact(bmuf.velocity, 2, 4)
    assert_exact(bmuf.global_model, 3, 6)
    assert_exact(replica, 3.5, 3)
    # round 2: replica moved to (5, 2); d = (6, 4) - (3, 6) = (3, -2);
    # v = 0.5*(2, 4) + 0.5*(3, -2) = (2.5, 1); w_g = (3, 6) + (2.5, 1) + (1.25, 0.5)
    replica.copy_(vec(5, 2))
    bmuf.apply(replica, AVERAGES[1])
    assert_exact(bmuf.velocity, 2.5, 1)
    assert_exact(bmuf.global_model, 6.75, 7.5)
    assert_exact(replica, 5.875, 4.75)  # 0.5*(5, 2) + 0.5*(6.75, 7.5)
    # round 3: d = (5, 10) - (6.75, 7.5) = (-1.75, 2.5);
    # v = 0.5*(2.5, 1) + 0.5*(-1.75, 2.5) = (0.375, 1.75); w_g += v + 0.5 v
    bmuf.apply(replica, AVERAGES[2])
    assert_exact(bmuf.velocity, 0.375, 1.75)
    assert_exact(bmuf.global_model, 7.3125, 10.125)
    assert_exact(replica, 6.59375, 7.4375)  # 0.5*(5.875, 4.75) + 0.5*(7.3125, 10.125)


@pytest.mark.parametrize("nesterov", [False, True])
def test_bmuf_matches_fairseq_sign_convention(nesterov):
    """fairseq: grad = w_g - avg; smoothed = mu smoothed + lr grad; w_g -= smoothed
    (and -= mu smoothed with Nesterov). Ours is the same with v = -smoothed."""
    gen = torch.Generator().manual_seed(0)
    mu, lr = 0.875, 0.7
    initial = torch.randn(16, generator=gen)
    bmuf = BmufReplica(
        BmufConfig(alpha=1.0, block_lr=lr, block_momentum=mu, nesterov=nesterov), initial
    )
    global_param, smoothed = initial.double(), torch.zeros(16, dtype=torch.float64)
    for _ in range(5):
        average = torch.randn(16, generator=gen)
        grad = global_param - average.double()
        smoothed = mu * smoothed + lr * grad
        global_param = global_param - smoothed - (mu * smoothed if nesterov else 0)
        bmuf.apply(torch.zeros(16), average)
        torch.testing.assert_close(bmuf.global_model.double(), global_param, **F32)
        torch.testing.assert_close(bmuf.velocity.double(), -smoothed, **F32)


def test_bmuf_without_momentum_and_unit_block_lr_is_ma():
    gen = torch.Generator().manual_seed(1)
    n = 3
    start = [torch.randn(8, generator=gen) for _ in range(n)]
    initial = torch.randn(8, generator=gen)
    for alpha in (1.0, 0.3):
        ma_w = [w.clone() for w in start]
        bmuf_w = [w.clone() for w in start]
        ma = [ElasticPull(MaConfig(alpha=alpha)) for _ in range(n)]
        bmuf = [
            BmufReplica(BmufConfig(alpha=alpha, block_lr=1.0, block_momentum=0.0), initial)
            for _ in range(n)
        ]
        for _ in range(3):
            steps = [torch.randn(8, generator=gen) for _ in range(n)]  # worker progress
            for i in range(n):
                ma_w[i] += steps[i]
                bmuf_w[i] += steps[i]
            average = torch.stack(ma_w).mean(0)
            for i in range(n):
                ma[i].apply(ma_w[i], average)
                bmuf[i].apply(bmuf_w[i], average)
                assert torch.equal(bmuf[i].global_model, average)
            for i in range(n):
                assert torch.equal(ma_w[i], bmuf_w[i])
        if alpha == 1.0:
            assert all(torch.equal(w, ma_w[0]) for w in ma_w)


def test_bmuf_state_dict_round_trip():
    config = BmufConfig(alpha=0.5, block_lr=0.5, block_momentum=0.5)
    bmuf = BmufReplica(config, vec(0, 0))
    bmuf.apply(vec(4, 0), AVERAGES[0])
    state = bmuf.state_dict()
    other = BmufReplica(config, vec(9, 9))
    other.load_state_dict(state)
    assert_exact(other.global_model, 2, 4)
    assert_exact(other.velocity, 2, 4)
    state["velocity"].zero_()  # a copy, not the live tensor
    assert_exact(bmuf.velocity, 2, 4)


def test_bmuf_initial_is_copied():
    initial = vec(1, 1)
    bmuf = BmufReplica(BmufConfig(), initial)
    initial += 1
    assert_exact(bmuf.global_model, 1, 1)
    assert_exact(bmuf.velocity, 0, 0)


# --- timing ---------------------------------------------------------------------------------


def test_fixed_trigger_every_iterations():
    trigger = FixedTrigger(Timing("fixed", every_iterations=3))
    fired = [i for i in range(1, 11) if trigger.after_iteration(now=0.0)]
    assert fired == [3, 6, 9]
    assert (trigger.iterations, trigger.syncs) == (10, 3)
    assert trigger.next_due is None


def test_fixed_trigger_every_seconds_irregular_now():
    trigger = FixedTrigger(Timing("fixed", every_seconds=2.0))
    assert trigger.next_due == 2.0
    script = [
        (0.5, False),
        (1.9, False),
        (2.0, True),  # due at 2; next due 4
        (2.1, False),
        (3.99, False),
        (4.5, True),  # due at 4; next due 6
        (9.7, True),  # 6 and 8 passed during one long iteration: one sync, next due 10
        (9.9, False),
        (10.0, True),  # next due 12
        (10.1, False),
        (13.0, True),  # next due 14
    ]
    assert [trigger.after_iteration(now) for now, _ in script] == [due for _, due in script]
    assert trigger.next_due == 14.0
    assert trigger.syncs == 5


def test_fixed_trigger_every_seconds_with_start():
    trigger = FixedTrigger(Timing("fixed", every_seconds=0.1), start=1.0)
    assert not trigger.after_iteration(1.05)
    assert trigger.after_iteration(1.1000001)
    assert not trigger.after_iteration(1.15)
    assert trigger.after_iteration(1.3)
    assert trigger.next_due > 1.3


def test_fixed_trigger_rejects_shadow():
    with pytest.raises(ValueError, match="mode"):
        FixedTrigger(Timing())


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"mode": "sometimes"}, "mode"),
        ({"mode": "shadow", "every_iterations": 5}, "every_iterations"),
        ({"mode": "shadow", "every_seconds": 1.0}, "every_seconds"),
        ({"mode": "fixed"}, "exactly one of every_iterations or every_seconds"),
        (
            {"mode": "fixed", "every_iterations": 5, "every_seconds": 1.0},
            "exactly one of every_iterations or every_seconds",
        ),
        ({"mode": "fixed", "every_iterations": 0}, "every_iterations must be an int > 0"),
        ({"mode": "fixed", "every_iterations": 2.5}, "every_iterations must be an int > 0"),
        ({"mode": "fixed", "every_iterations": True}, "every_iterations must be an int > 0"),
        ({"mode": "fixed", "every_seconds": -1.0}, "every_seconds must be a finite number > 0"),
        ({"mode": "fixed", "every_seconds": float("inf")}, "every_seconds must be a finite"),
    ],
)
def test_timing_validation(kwargs, field):
    with pytest.raises(ValueError, match=field):
        Timing(**kwargs)


def test_timing_accepts_valid():
    assert Timing().is_shadow
    assert Timing("fixed", every_iterations=5).every_iterations == 5
    assert Timing("fixed", every_seconds=60).every_seconds == 60


def test_average_sync_gap():
    assert average_sync_gap(521, 100) == 5.21
    assert average_sync_gap(30, 6) == 5.0
    assert average_sync_gap(0, 3) == 0.0
    assert average_sync_gap(10, 0) is None
    with pytest.raises(ValueError, match="syncs"):
        average_sync_gap(10, -1)
    with pytest.raises(ValueError, match="iterations"):
        average_sync_gap(1.5, 1)


def test_fixed_rate_gap_is_k():
    """m worker threads, each with its own trigger, every k iterations: the gap is k."""
    triggers = [FixedTrigger(Timing("fixed", every_iterations=5)) for _ in range(4)]
    syncs = sum(t.after_iteration(0.0) for _ in range(20) for t in triggers)
    assert average_sync_gap(20 * 4, syncs) == 5.0


# --- configs, registry, names ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("factory", "field"),
    [
        (lambda: EasgdConfig(alpha=0), "alpha"),
        (lambda: EasgdConfig(alpha=1.5), "alpha"),
        (lambda: EasgdConfig(alpha=float("nan")), "alpha"),
        (lambda: MaConfig(alpha=-0.1), "alpha"),
        (lambda: MaConfig(alpha="0.5"), "alpha"),
        (lambda: BmufConfig(alpha=2), "alpha"),
        (lambda: BmufConfig(block_lr=0), "block_lr"),
        (lambda: BmufConfig(block_lr=float("inf")), "block_lr"),
        (lambda: BmufConfig(block_momentum=1.0), "block_momentum"),
        (lambda: BmufConfig(block_momentum=-0.5), "block_momentum"),
        (lambda: BmufConfig(nesterov="yes"), "nesterov"),
        (lambda: EasgdConfig(timing="shadow"), "timing"),
        (lambda: IndependentConfig(timing={"mode": "shadow"}), "timing"),
    ],
)
def test_config_validation(factory, field):
    with pytest.raises(ValueError, match=field):
        factory()


def test_config_family_types_and_defaults():
    independent = IndependentConfig()
    assert isinstance(independent, ReplicaStrategy)
    assert not isinstance(independent, CenterStrategy | CollectiveStrategy)
    assert isinstance(EasgdConfig(), CenterStrategy)
    assert isinstance(MaConfig(), CollectiveStrategy)
    assert isinstance(BmufConfig(), CollectiveStrategy)
    b = BmufConfig()
    assert (b.block_lr, b.block_momentum, b.nesterov, b.timing) == (1.0, 0.0, False, Timing())


def test_describe_uses_the_papers_names():
    assert EasgdConfig(alpha=0.1).describe() == "S-EASGD alpha=0.1"
    assert MaConfig(timing=Timing("fixed", every_iterations=5)).describe() == "FR-MA-5 alpha=0.1"
    fr_bmuf = BmufConfig(
        alpha=0.5, block_momentum=0.5, nesterov=True, timing=Timing("fixed", every_seconds=60)
    )
    assert fr_bmuf.describe() == "FR-BMUF-60s alpha=0.5 block_lr=1 block_momentum=0.5 nesterov"
    assert (
        EasgdConfig(timing=Timing("fixed", every_seconds=0.5))
        .describe()
        .startswith("FR-EASGD-0.5s")
    )
    assert IndependentConfig().describe().startswith("independent")


def test_registry():
    assert {
        "independent": IndependentConfig,
        "easgd": EasgdConfig,
        "ma": MaConfig,
        "bmuf": BmufConfig,
    } == {name: cls for name, cls in STRATEGIES.items() if issubclass(cls, ReplicaStrategy)}
    assert strategy_config("easgd", alpha=0.5) == EasgdConfig(alpha=0.5)
    config = strategy_config(
        "bmuf", block_momentum=0.5, timing={"mode": "fixed", "every_iterations": 30}
    )
    assert config == BmufConfig(block_momentum=0.5, timing=Timing("fixed", every_iterations=30))
    assert strategy_config("independent") == IndependentConfig()


def test_registry_errors():
    with pytest.raises(ValueError, match=r"unknown strategy 'downpour'; known: \['allreduce'"):
        strategy_config("downpour")
    with pytest.raises(ValueError, match="unknown field"):
        strategy_config("ma", beta=0.5)
    with pytest.raises(ValueError, match="timing: unknown field"):
        strategy_config("ma", timing={"every": 5})
    with pytest.raises(ValueError, match="alpha"):
        strategy_config("easgd", alpha=3.0)


def test_sync_measures_give_eq_2_over_the_job_and_the_per_thread_view():
    """Two shadow trainers of 4 threads: 40 and 24 iterations, 5 and 3 syncs; eq. 2 is
    all iterations over all syncs (8), per thread each trainer's gap over its 4 threads."""
    from recsync.families.replica.family import sync_measures
    from recsync.trainer.stats import TrainerStats

    trainers = []
    for iterations, syncs in ((40, 5), (24, 3)):
        stats = TrainerStats(4)
        for i in range(iterations):
            stats.count_step(i % 4, 256, 0.5)
        for _ in range(syncs):
            stats.count_sync(stats.own_row)
        trainers.append(stats)
    assert sync_measures(trainers, shadow=True) == {
        "syncs": 8,
        "average_sync_gap": 8.0,
        "average_sync_gap_per_thread": 2.0,
    }
    assert sync_measures(trainers, shadow=False)["average_sync_gap_per_thread"] == 8.0
