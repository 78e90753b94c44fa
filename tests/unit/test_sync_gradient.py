"""Gradient strategies (design.md section 3) driven event by event, then property-tested in a
tiny pure-Python event loop over random worker speeds and arrival orders."""

from __future__ import annotations

import collections
import dataclasses
import heapq
import itertools
import math
from collections import Counter
from dataclasses import dataclass, field

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from recsync.families import STRATEGIES, strategy_config
from recsync.families.allreduce.strategy import AllReduceConfig, AllReduceStrategy
from recsync.families.gradient.asynchronous import AsyncConfig
from recsync.families.gradient.backup_workers import BackupWorkersConfig
from recsync.families.gradient.bounded_staleness import BoundedStalenessConfig
from recsync.families.gradient.bsp import BspConfig
from recsync.families.gradient.gba import DECAYS, GbaConfig
from recsync.families.gradient.psp import PartialPull, PspConfig
from recsync.families.gradient.strategy import FULL_PULL, GradientStrategy
from recsync.families.gradient.synchronous import SyncConfig
from recsync.strategy.config import StrategyConfig
from recsync.strategy.gradient import Apply, Drop, GradientPolicy, Push, StartTimer
from recsync.strategy.staleness_norm import StalenessNorm

# the strategies whose dense part lives on dense servers (allreduce keeps it on the trainers
# and runs `sync`'s policy on the embedding shards only; test_allreduce_* covers it)
SERVER_STRATEGIES = {k: v for k, v in STRATEGIES.items() if issubclass(v, GradientStrategy)}


def apply(*grad_ids: int, divisor: float | None = None, lr_scale: float = 1.0) -> Apply:
    """An Apply of weight-1 gradients; divisor defaults to their count."""
    grads = tuple((g, 1.0) for g in grad_ids)
    return Apply(grads, float(len(grad_ids) if divisor is None else divisor), lr_scale)


def push(server: GradientPolicy, grad_id: int, worker: int, version: int, token=None):
    return server.on_push(Push(grad_id, worker, version, token))


# --- async and staleness normalization --------------------------------------------------------


def test_async_applies_each_gradient_alone():
    server = AsyncConfig().make_server(2, sparse=False)
    assert push(server, 0, 0, 0) == [apply(0)]
    assert push(server, 1, 1, 0) == [apply(1)]
    assert server.version == 2
    assert server.may_start(1, 0)
    assert server.on_worker_done(0) == []


def test_async_config_validates_and_describes():
    with pytest.raises(ValueError, match="staleness_norm"):
        AsyncConfig(staleness_norm="rho")
    assert AsyncConfig().describe() == "async"
    norm = StalenessNorm(mu_prime=2)
    assert AsyncConfig(norm).describe() == "async staleness_norm=rho(mu'=2, kappa=2)"


def test_staleness_norm_rules():
    rho = StalenessNorm(mu_prime=2)
    assert [rho.scale(t) for t in (0, 2, 4)] == [1.0, 1.0, 0.0625]  # 4^-2
    inverse = StalenessNorm(rule="inverse")
    assert [inverse.scale(t) for t in (0, 1, 4)] == [1.0, 1.0, 0.25]
    # sigmoid(lambda * 0) = 1/2 halves tau: 4 -> 2 -> 2^-2
    sig = StalenessNorm(mu_prime=1, sigmoid_lambda=1.0)
    assert sig.effective(4) == 2.0
    assert sig.scale(4) == 0.25
    assert sig.scale(4, last_update_abs=1e9) == 0.0625  # sigmoid -> 1: tau stays 4


def test_normalized_staleness_maps_the_large_cluster_onto_the_small_one():
    """tau' = delta' (tau - mu) / delta + mu': the paper's 3K cluster (mean 2,090, variance
    11,300) onto its 1K one (875, 4,770)."""
    norm = StalenessNorm(
        mu_prime=875.0, source_mean=2090.0, source_std=11300**0.5, target_std=4770**0.5
    )
    assert norm.normalized(2090) == 875.0  # the large cluster's mean is the small one's
    one_sd_up = norm.normalized(2090 + 11300**0.5)
    assert one_sd_up == pytest.approx(875.0 + 4770**0.5)
    assert norm.scale(2089) == 1.0  # below its own mean: not scaled
    assert norm.scale(2090 + 11300**0.5) == pytest.approx(one_sd_up**-2.0)
    assert norm.normalized(0) == 0.0  # floored: the first steps' small stalenesses
    rows = norm.scale_rows(torch.tensor([0, 2090, 2090 + 11300**0.5]))
    assert rows[:2].tolist() == [1.0, 1.0]
    assert rows[2].item() == pytest.approx(one_sd_up**-2.0, rel=1e-5)
    assert "tau'=" in AsyncConfig(norm).describe()


def test_staleness_norm_scale_rows():
    tau = torch.tensor([0, 1, 2, 4])
    rho = StalenessNorm(mu_prime=1).scale_rows(tau)
    assert torch.equal(rho, torch.tensor([1, 1, 0.25, 0.0625]))
    inverse = StalenessNorm(rule="inverse").scale_rows(tau)
    assert torch.equal(inverse, torch.tensor([1, 1, 0.5, 0.25]))
    # sigmoid(lambda * 0) = 1/2: tau 0, 2, 4, 8 -> 0, 1, 2, 4
    sig = StalenessNorm(sigmoid_lambda=2.0).scale_rows(tau * 2)
    assert torch.equal(sig, torch.tensor([1, 1, 0.25, 0.0625]))
    assert sig.dtype == torch.float32


@pytest.mark.parametrize(
    "kwargs, field_name",
    [
        ({"rule": "linear"}, "rule"),
        ({"mu_prime": -1}, "mu_prime"),
        ({"mu_prime": math.inf}, "mu_prime"),
        ({"kappa": 0}, "kappa"),
        ({"sigmoid_lambda": 0}, "sigmoid_lambda"),
        ({"source_mean": 10.0}, "set together"),
        ({"source_mean": 10.0, "source_std": 0.0, "target_std": 1.0}, "must be > 0"),
    ],
)
def test_staleness_norm_validation(kwargs, field_name):
    with pytest.raises(ValueError, match=field_name):
        StalenessNorm(**kwargs)


# --- sync ---------------------------------------------------------------------------------


def test_sync_one_gradient_per_worker_per_step():
    server = SyncConfig().make_server(3, sparse=False)
    assert server.may_start(0, None)
    assert push(server, 0, 0, 0) == []
    assert not server.may_start(0, 0)
    assert push(server, 1, 1, 0) == []
    assert push(server, 2, 2, 0) == [apply(0, 1, 2)]
    assert server.version == 1 and server.may_start(0, 0)
    # worker 2 leaves mid-step: the step needs only workers 0 and 1
    assert push(server, 3, 0, 1) == []
    assert server.on_worker_done(2) == []
    assert push(server, 4, 1, 1) == [apply(3, 4)]
    # worker 0 pushes its last gradient then leaves; worker 1 leaves without pushing
    assert push(server, 5, 0, 2) == []
    assert server.on_worker_done(0) == []
    assert server.on_worker_done(1) == [apply(5)]
    assert server.version == 3


def test_sync_rejects_a_wrong_version():
    server = SyncConfig().make_server(2, sparse=False)
    with pytest.raises(AssertionError):
        push(server, 0, 0, 1)


# --- bsp ----------------------------------------------------------------------------------


def test_bsp_any_m_gradients_then_final_flush():
    server = BspConfig(num_aggregate=2).make_server(3, sparse=False)
    assert push(server, 0, 0, 0) == []
    assert push(server, 1, 1, 0) == [apply(0, 1)]
    assert push(server, 2, 2, 0) == []  # stale (version 0 < 1) but aggregated all the same
    assert push(server, 3, 0, 1) == [apply(2, 3)]
    assert push(server, 4, 1, 2) == []
    assert server.may_start(1, 2)
    assert server.on_worker_done(0) == [] and server.on_worker_done(1) == []
    assert server.on_worker_done(2) == [apply(4)]


def test_bsp_config():
    assert BspConfig().make_server(5, sparse=True).num_aggregate == 5
    assert BspConfig(num_aggregate=8).describe() == "BSP M=8"
    for bad in (0, True, 1.5):
        with pytest.raises(ValueError, match="num_aggregate"):
            BspConfig(num_aggregate=bad)


# --- bounded staleness (Hop-BS) -----------------------------------------------------------


def test_bounded_staleness_blocks_the_fastest_worker():
    server = BoundedStalenessConfig(staleness=1).make_server(3, sparse=False)
    assert push(server, 0, 0, 0) == [apply(0)]
    assert server.may_start(0, 0)  # clocks 1, 0, 0: one ahead
    assert push(server, 1, 0, 1) == [apply(1)]
    assert not server.may_start(0, 1)  # clocks 2, 0, 0
    assert push(server, 2, 1, 0) == [apply(2)]
    assert not server.may_start(0, 1)  # clocks 2, 1, 0
    assert server.may_start(1, 0) and server.may_start(2, None)
    assert server.on_worker_done(2) == []
    assert server.may_start(0, 1)  # worker 2 no longer counts: clocks 2, 1
    assert server.version == 3


def test_bounded_staleness_zero_is_lock_step():
    server = BoundedStalenessConfig(staleness=0).make_server(2, sparse=True)
    assert push(server, 0, 0, 0) == [apply(0)]
    assert not server.may_start(0, 0)
    assert push(server, 1, 1, 0) == [apply(1)]
    assert server.may_start(0, 0)


def test_bounded_staleness_config():
    norm = StalenessNorm(rule="inverse")
    config = BoundedStalenessConfig(staleness=2, staleness_norm=norm)
    assert config.describe() == "Hop-BS s=2 staleness_norm=inverse(mu'=0, kappa=2)"
    assert BoundedStalenessConfig().describe() == "Hop-BS s=4"
    with pytest.raises(ValueError, match="staleness"):
        BoundedStalenessConfig(staleness=-1)
    with pytest.raises(ValueError, match="staleness_norm"):
        BoundedStalenessConfig(staleness_norm={"rule": "rho"})


# --- backup workers (Hop-BW) --------------------------------------------------------------


def test_backup_workers_first_n_minus_b_then_late_drops():
    server = BackupWorkersConfig(num_backup=1).make_server(3, sparse=False)
    assert push(server, 0, 0, 0) == []
    assert not server.may_start(0, 0)
    assert push(server, 1, 1, 0) == [apply(0, 1)]
    assert push(server, 2, 2, 0) == [Drop(2, "late")]
    assert server.may_start(2, 0) and server.may_start(0, 0)
    assert push(server, 3, 2, 1) == []
    assert server.on_worker_done(0) == []  # 2 active workers: the step still needs 2
    assert push(server, 4, 1, 1) == [apply(3, 4)]
    assert server.on_worker_done(1) == []  # one active worker left: a step needs 1
    assert push(server, 5, 2, 2) == [apply(5)]


def test_backup_workers_done_completes_a_step():
    server = BackupWorkersConfig(num_backup=1).make_server(4, sparse=False)
    assert push(server, 0, 0, 0) == [] and push(server, 1, 1, 0) == []
    assert server.on_worker_done(2) == []  # 3 active: still needs 3
    assert server.on_worker_done(3) == [apply(0, 1)]  # 2 active: needs 2


def test_backup_workers_finished_workers_gradients_do_not_shrink_the_step():
    server = BackupWorkersConfig(num_backup=1).make_server(4, sparse=False)  # N - b = 3
    assert push(server, 0, 0, 0) == [] and push(server, 1, 1, 0) == []
    assert server.on_worker_done(0) == [] and server.on_worker_done(1) == []
    assert push(server, 2, 2, 0) == [apply(0, 1, 2)]  # the first 3, as with nobody done
    assert push(server, 3, 3, 0) == [Drop(3, "late")]


def test_backup_workers_config():
    assert BackupWorkersConfig(num_backup=2).describe() == "Hop-BW b=2"
    with pytest.raises(ValueError, match="num_backup"):
        BackupWorkersConfig(num_backup=-1)
    with pytest.raises(ValueError, match="num_backup"):
        BackupWorkersConfig(num_backup=2).make_server(2, sparse=False)


# --- GBA ----------------------------------------------------------------------------------


def test_gba_token_buffer_and_threshold_decay_stale_without_a_place():
    server = GbaConfig(num_aggregate=2, iota=1, stale_slot=False).make_server(3, sparse=False)
    assert push(server, 0, 0, 0, token=0) == []
    assert push(server, 1, 1, 0, token=0) == [apply(0, 1)]
    assert push(server, 2, 2, 0, token=0) == []  # k - t = 1 <= iota
    assert push(server, 3, 0, 1, token=1) == [apply(2, 3)]
    assert push(server, 4, 1, 1, token=1) == []
    assert server.on_worker_done(1) == []  # a failure changes nothing else
    assert push(server, 5, 0, 2, token=2) == [apply(4, 5)]
    assert push(server, 6, 2, 0, token=1) == [Drop(6, "stale")]  # k - t = 2 > iota
    assert push(server, 7, 0, 3, token=4) == []  # a token ahead of k: weight 1
    assert server.may_start(2, 0)
    assert server.on_worker_done(0) == []
    assert server.on_worker_done(2) == [apply(7)]  # the final partial flush
    assert server.version == 4


def test_gba_a_stale_gradient_takes_its_place_in_the_buffer():
    """The paper's rule: the buffer holds M pushes and a stale one is left out when they
    are aggregated; a step of stale pushes only advances k with nothing to apply."""
    server = GbaConfig(num_aggregate=2, iota=1).make_server(3, sparse=False)
    assert push(server, 0, 0, 0, token=0) == []
    assert push(server, 1, 1, 0, token=0) == [apply(0, 1)]
    assert push(server, 2, 2, 0, token=0) == []
    assert push(server, 3, 0, 1, token=1) == [apply(2, 3)]
    assert push(server, 4, 1, 2, token=0) == [Drop(4, "stale")]  # k - t = 2 > iota: a place
    assert push(server, 5, 0, 2, token=2) == [apply(5)]  # M = 2 places: one fresh, one stale
    assert push(server, 6, 2, 0, token=0) == [Drop(6, "stale")]
    assert push(server, 7, 1, 0, token=1) == [Drop(7, "stale"), Apply((), 1.0)]
    assert server.version == 4
    assert push(server, 8, 2, 0, token=0) == [Drop(8, "stale")]
    assert server.on_worker_done(0) == [] and server.on_worker_done(1) == []
    assert server.on_worker_done(2) == [Apply((), 1.0)]  # the final flush: its place only
    assert server.version == 5


@pytest.mark.parametrize("sparse, divisor", [(False, 1.5), (True, 2.0)])
def test_gba_exponential_decay_dense_weighted_mean_sparse_count(sparse, divisor):
    server = GbaConfig(num_aggregate=2, iota=0, decay="exponential").make_server(2, sparse)
    assert push(server, 0, 0, 0, token=0) == []
    assert push(server, 1, 1, 0, token=0) == [apply(0, 1)]
    assert push(server, 2, 1, 0, token=0) == []  # k - t = 1: weight 0.5
    assert push(server, 3, 0, 1, token=1) == [Apply(((2, 0.5), (3, 1.0)), divisor)]


def test_gba_exponential_weights():
    server = GbaConfig(num_aggregate=2, iota=0, decay="exponential").make_server(2, sparse=False)
    push(server, 0, 0, 0, token=0)
    push(server, 1, 1, 0, token=0)
    push(server, 2, 0, 1, token=1)
    assert push(server, 3, 1, 1, token=1) == [apply(2, 3)]
    push(server, 4, 0, 2, token=0)  # k = 2: weight 0.25
    assert push(server, 5, 1, 2, token=-2) == [Apply(((4, 0.25), (5, 0.0625)), 0.3125)]


def test_gba_config():
    assert AsyncConfig().token_list(5) is None
    assert [GbaConfig().token_list(5).token(i) for i in (0, 4, 5, 9, 10)] == [0, 0, 1, 1, 2]
    assert [GbaConfig(num_aggregate=3).token_list(5).token(i) for i in (2, 3)] == [0, 1]
    assert GbaConfig().describe() == "GBA iota=4 decay=threshold"
    assert GbaConfig(num_aggregate=8, iota=2).describe() == "GBA M=8 iota=2 decay=threshold"
    assert GbaConfig(stale_slot=False).describe() == (
        "GBA iota=4 decay=threshold stale-without-slot"
    )
    assert sorted(DECAYS) == ["exponential", "threshold"]
    for kwargs, name in [
        ({"decay": "linear"}, "decay"),
        ({"iota": -1}, "iota"),
        ({"num_aggregate": 0}, "num_aggregate"),
        ({"stale_slot": "yes"}, "stale_slot"),
    ]:
        with pytest.raises(ValueError, match=name):
            GbaConfig(**kwargs)


def test_gba_needs_a_token():
    server = GbaConfig().make_server(2, sparse=False)
    with pytest.raises(AssertionError):
        push(server, 0, 0, 0)


# --- PSP ----------------------------------------------------------------------------------


def test_psp_partial_push_with_timeout_and_linear_scaling():
    server = PspConfig(push_count=2, push_wait_s=5.0).make_server(4, sparse=False)
    assert push(server, 0, 0, 0) == []
    assert push(server, 1, 1, 0) == [StartTimer(0, 5.0)]  # c reached: wait up to tau1
    assert push(server, 2, 2, 0) == []  # joins while the timer runs
    assert server.on_timer(0) == [apply(0, 1, 2, lr_scale=3.0)]
    assert push(server, 3, 3, 0) == [Drop(3, "old")]
    # step 1: every worker answers before the timer fires; the timer is then ignored
    assert push(server, 4, 0, 1) == []
    assert push(server, 5, 1, 1) == [StartTimer(1, 5.0)]
    assert push(server, 6, 2, 1) == []
    assert push(server, 7, 3, 1) == [apply(4, 5, 6, 7, lr_scale=4.0)]
    assert server.on_timer(1) == []
    assert server.on_timer(0) == []
    assert server.may_start(3, 0) and server.version == 2


def test_psp_zero_wait_and_no_linear_scaling():
    config = PspConfig(push_count=2, linear_scaling=False)
    server = config.make_server(3, sparse=True)
    assert push(server, 0, 2, 0) == []
    assert push(server, 1, 2, 0) == [apply(0, 1)]  # c counts gradients, not workers
    assert push(server, 2, 0, 0) == [Drop(2, "old")]


def test_psp_done_workers_lower_the_bar():
    server = PspConfig(push_count=2, push_wait_s=1.0).make_server(4, sparse=False)
    assert push(server, 0, 0, 0) == []
    assert server.on_worker_done(0) == [] and server.on_worker_done(1) == []
    assert push(server, 1, 2, 0) == [StartTimer(0, 1.0)]  # c = 2 reached, worker 3 out
    assert server.on_timer(0) == [apply(0, 1, lr_scale=2.0)]
    assert push(server, 2, 3, 0) == [Drop(2, "old")]
    assert push(server, 3, 2, 1) == []  # c = min(2, 1 buffered + worker 3) = 2
    assert server.on_worker_done(3) == [apply(3, lr_scale=1.0)]  # nobody else can push


def test_psp_a_finished_workers_gradient_does_not_stand_in_for_an_active_one():
    """The end of the data: half the workers pushed their last gradient and left; the step
    still waits for the other half (full sync, c = all, no timeout)."""
    server = PspConfig().make_server(4, sparse=False)
    assert push(server, 0, 0, 0) == [] and push(server, 1, 1, 0) == []
    assert server.on_worker_done(0) == [] and server.on_worker_done(1) == []
    assert push(server, 2, 2, 0) == []
    assert push(server, 3, 3, 0) == [apply(0, 1, 2, 3, lr_scale=4.0)]


def test_psp_a_gradient_ahead_of_a_lagging_server_counts_as_current():
    """Alg. 1, server line 7: only t' < t is dropped; a worker whose iteration is ahead of
    this server (it pulled a newer version elsewhere) pushes into the current step."""
    server = PspConfig(push_count=2).make_server(2, sparse=False)
    assert push(server, 0, 0, 1) == []
    assert push(server, 1, 1, 0) == [apply(0, 1, lr_scale=2.0)]
    assert push(server, 2, 0, 0) == [Drop(2, "old")] and server.version == 1


def test_partial_pull_tags_every_block_with_the_workers_iteration():
    """Alg. 1, worker line 17: every block's gradient carries t, also a block kept from an
    earlier step (tagging it with that copy's own version would make it "old")."""
    assert PartialPull(0.9, 0.0).push_versions([3, 2, 3]) == [3, 3, 3]
    assert FULL_PULL.push_versions([3, 2, 3]) == [3, 2, 3]


def test_psp_config():
    config = PspConfig(push_count=28, push_wait_s=0.5, pull_fraction=0.9)
    assert config.describe() == "PSP c=28 tau1=0.5s b=0.9 tau2=0s"
    assert PspConfig(linear_scaling=False).describe() == (
        "PSP c=all tau1=0s b=1 tau2=0s no-linear-scaling"
    )
    assert config.pull_fraction == 0.9 and PspConfig().pull_wait_s == 0.0
    with pytest.raises(ValueError, match="push_count"):
        PspConfig(push_count=5).make_server(4, sparse=False)
    for kwargs, name in [
        ({"push_count": 0}, "push_count"),
        ({"push_wait_s": -1.0}, "push_wait_s"),
        ({"pull_fraction": 0.0}, "pull_fraction"),
        ({"pull_fraction": 1.5}, "pull_fraction"),
        ({"pull_wait_s": math.nan}, "pull_wait_s"),
        ({"linear_scaling": "yes"}, "linear_scaling"),
    ]:
        with pytest.raises(ValueError, match=name):
            PspConfig(**kwargs)


# --- registry -----------------------------------------------------------------------------


def test_registry_names_and_servers():
    assert sorted(SERVER_STRATEGIES) == sorted(
        ["async", "sync", "bsp", "bounded_staleness", "backup_workers", "gba", "psp"]
    )
    for name, cls in SERVER_STRATEGIES.items():
        config = cls()
        assert config.name == name and isinstance(config, GradientStrategy | StrategyConfig)
        assert config.describe().startswith(config.label)
        server = config.make_server(4, sparse=False)
        assert isinstance(server, GradientPolicy) and server.version == 0
        with pytest.raises(dataclasses.FrozenInstanceError):
            config.num_workers = 1  # type: ignore[attr-defined]


def test_gradient_strategy_config():
    assert strategy_config("gba", iota=2) == GbaConfig(iota=2)
    norm = strategy_config("async", staleness_norm={"mu_prime": 3, "kappa": 1})
    assert norm == AsyncConfig(StalenessNorm(mu_prime=3, kappa=1))
    hop = strategy_config("bounded_staleness", staleness=1, staleness_norm=None)
    assert hop == BoundedStalenessConfig(staleness=1)
    with pytest.raises(ValueError, match="unknown strategy 'hogwild'"):
        strategy_config("hogwild")
    with pytest.raises(ValueError, match="unknown field"):
        strategy_config("sync", staleness=3)
    with pytest.raises(ValueError, match="staleness_norm: unknown field"):
        strategy_config("async", staleness_norm={"tau": 1})
    with pytest.raises(ValueError, match="iota"):
        strategy_config("gba", iota=-2)


# --- property tests: a tiny event loop ----------------------------------------------------


@dataclass
class Applied:
    version: int  # the server version the Apply ended (its global step)
    action: Apply
    trigger: str  # "push", "done" or "timer"
    active: int  # active workers right after the triggering event
    time: float
    active_set: frozenset[int] = frozenset()  # who they are


@dataclass
class Run:
    num_workers: int
    pushes: dict[int, Push] = field(default_factory=dict)
    applies: list[Applied] = field(default_factory=list)
    drops: list[tuple[Drop, int]] = field(default_factory=list)  # (drop, server version)
    starts: list[tuple[int, list[int], set[int]]] = field(default_factory=list)
    timers: list[tuple[float, StartTimer, int]] = field(default_factory=list)  # (t, _, version)

    def workers(self, rec: Applied) -> list[int]:
        return [self.pushes[g].worker for g, _ in rec.action.grads]


@st.composite
def scenarios(draw):
    """n workers (2..8), each with 1..4 steps of random durations; some fail in their last
    step (the gradient is never pushed)."""
    n = draw(st.integers(2, 8))
    steps = draw(st.lists(st.integers(1, 4), min_size=n, max_size=n))
    durations = [draw(st.lists(st.integers(1, 12), min_size=k, max_size=k)) for k in steps]
    fail = draw(st.lists(st.sampled_from([False, False, False, True]), min_size=n, max_size=n))
    return steps, durations, fail


def simulate(config, scenario, sparse: bool = False) -> Run:
    """Workers pull (record the version and take a token), compute, push; a worker blocked by
    ``may_start`` retries after every server event; timers fire in the same loop."""
    steps, durations, fail = scenario
    n = len(steps)
    server = config.make_server(n, sparse)
    tokens = config.token_list(n)
    run = Run(n)
    heap: list[tuple[float, int, str, int]] = []
    seq, ids, handed = itertools.count(), itertools.count(), itertools.count()
    done_steps, last_version = [0] * n, [None] * n
    clock = [0] * n
    active, waiting = set(range(n)), set(range(n))
    in_flight: dict[int, tuple[int, int | None]] = {}
    now = 0.0

    def execute(actions, trigger: str) -> None:
        for action in actions:
            if isinstance(action, Apply):
                rec = Applied(
                    len(run.applies) + 1, action, trigger, len(active), now, frozenset(active)
                )
                run.applies.append(rec)
            elif isinstance(action, Drop):
                run.drops.append((action, len(run.applies)))
            else:
                run.timers.append((now, action, len(run.applies)))
                heapq.heappush(heap, (now + action.seconds, next(seq), "timer", action.timer_id))
        assert server.version == len(run.applies)

    def start_waiting() -> None:
        for w in sorted(waiting):
            if server.may_start(w, last_version[w]):
                waiting.discard(w)
                run.starts.append((w, list(clock), set(active)))
                token = None if tokens is None else tokens.token(next(handed))
                in_flight[w] = (server.version, token)
                t = now + durations[w][done_steps[w]]
                heapq.heappush(heap, (t, next(seq), "push", w))

    start_waiting()
    while heap:
        now, _, kind, arg = heapq.heappop(heap)
        if kind == "timer":
            execute(server.on_timer(arg), "timer")
        else:
            w = arg
            version, token = in_flight.pop(w)
            last = done_steps[w] + 1 == steps[w]
            if not (last and fail[w]):
                grad_id = next(ids)
                run.pushes[grad_id] = Push(grad_id, w, version, token)
                clock[w] += 1
                execute(server.on_push(run.pushes[grad_id]), "push")
                done_steps[w] += 1
                last_version[w] = version
            if last:
                active.discard(w)
                execute(server.on_worker_done(w), "done")
            else:
                waiting.add(w)
        start_waiting()
    assert not waiting and not in_flight, "deadlock: workers still waiting to start"
    # every gradient applied exactly once or dropped exactly once, with a reason
    seen = Counter(g for rec in run.applies for g, _ in rec.action.grads)
    seen.update(drop.grad_id for drop, _ in run.drops)
    assert seen == Counter(list(run.pushes)), "a gradient pending, lost or handled twice"
    assert all(drop.reason for drop, _ in run.drops)
    return run


PROPERTY = settings(max_examples=50, deadline=None)


@PROPERTY
@given(scenarios(), st.sampled_from(list(SERVER_STRATEGIES)), st.booleans())
def test_every_strategy_accounts_for_every_gradient(scenario, name, sparse):
    simulate(SERVER_STRATEGIES[name](), scenario, sparse)


@PROPERTY
@given(scenarios())
def test_property_sync(scenario):
    run = simulate(SyncConfig(), scenario)
    assert not run.drops
    for rec in run.applies:
        workers = run.workers(rec)
        assert len(workers) == len(set(workers)) == rec.action.divisor
        assert all(run.pushes[g].version == rec.version - 1 for g, _ in rec.action.grads)
        assert len(workers) >= rec.active  # every active worker is in the step


@PROPERTY
@given(scenarios(), st.integers(1, 10))
def test_property_bsp(scenario, m):
    run = simulate(BspConfig(num_aggregate=m), scenario)
    assert not run.drops
    for i, rec in enumerate(run.applies):
        final = i == len(run.applies) - 1 and rec.trigger == "done" and rec.active == 0
        assert len(rec.action.grads) == m or (final and len(rec.action.grads) < m)


@PROPERTY
@given(scenarios(), st.integers(0, 3))
def test_property_bounded_staleness(scenario, s):
    run = simulate(BoundedStalenessConfig(staleness=s), scenario)
    assert len(run.applies) == len(run.pushes) and not run.drops
    for worker, clock, active in run.starts:
        assert clock[worker] - min(clock[a] for a in active) <= s


@PROPERTY
@given(scenarios(), st.data())
def test_property_backup_workers(scenario, data):
    n = len(scenario[0])
    b = data.draw(st.integers(0, n - 1))
    run = simulate(BackupWorkersConfig(num_backup=b), scenario)
    for rec in run.applies:
        workers = run.workers(rec)
        assert len(set(workers)) == len(workers) and 1 <= len(workers) <= n - b
        if len(workers) < n - b:  # fewer only once nobody left out can still push
            assert rec.active_set <= set(workers)
        assert all(run.pushes[g].version == rec.version - 1 for g, _ in rec.action.grads)
    for drop, version in run.drops:
        assert drop.reason == "late" and run.pushes[drop.grad_id].version < version


@PROPERTY
@given(scenarios(), st.integers(1, 10), st.integers(0, 3), st.booleans(), st.booleans())
def test_property_gba_threshold(scenario, m, iota, sparse, stale_slot):
    run = simulate(GbaConfig(num_aggregate=m, iota=iota, stale_slot=stale_slot), scenario, sparse)
    stale_at = collections.Counter(k for _, k in run.drops)
    for i, rec in enumerate(run.applies):
        grads = rec.action.grads
        final = i == len(run.applies) - 1 and rec.trigger == "done" and rec.active == 0
        k = rec.version - 1
        places = len(grads) + (stale_at[k] if stale_slot else 0)
        assert places == m or (final and places < m)
        assert rec.action.divisor == (len(grads) or 1) and all(w == 1.0 for _, w in grads)
        assert all(k - run.pushes[g].token <= iota for g, _ in grads)
    for drop, k in run.drops:
        assert drop.reason == "stale" and k - run.pushes[drop.grad_id].token > iota


@PROPERTY
@given(scenarios(), st.integers(1, 10), st.integers(0, 2))
def test_property_gba_exponential(scenario, m, iota):
    run = simulate(GbaConfig(num_aggregate=m, iota=iota, decay="exponential"), scenario)
    assert not run.drops
    for rec in run.applies:
        k = rec.version - 1
        for g, weight in rec.action.grads:
            assert weight == 0.5 ** max(0, k - run.pushes[g].token - iota)
        assert rec.action.divisor == sum(w for _, w in rec.action.grads)


@PROPERTY
@given(scenarios(), st.data(), st.sampled_from([0.0, 1.5, 6.0]), st.booleans())
def test_property_psp(scenario, data, wait, linear):
    n = len(scenario[0])
    c = data.draw(st.integers(1, n))
    config = PspConfig(push_count=c, push_wait_s=wait, linear_scaling=linear)
    run = simulate(config, scenario)
    for rec in run.applies:
        d = len(rec.action.grads)
        assert d >= (1 if rec.trigger == "timer" else min(c, rec.active))
        assert rec.action.divisor == d and rec.action.lr_scale == (d if linear else 1)
        assert all(run.pushes[g].version == rec.version - 1 for g, _ in rec.action.grads)
    for drop, version in run.drops:
        assert drop.reason == "old" and run.pushes[drop.grad_id].version < version
    # a step never waits longer than tau1 once its timer is armed
    assert wait > 0 or not run.timers
    for armed_at, timer, version in run.timers:
        assert timer.seconds == wait
        assert run.applies[version].time <= armed_at + wait
    assert [timer.timer_id for _, timer, _ in run.timers] == list(range(len(run.timers)))


def test_allreduce_runs_the_sync_policy_on_embedding_shards_only():
    config = STRATEGIES["allreduce"]()
    assert isinstance(config, AllReduceConfig) and isinstance(config, AllReduceStrategy)
    assert not isinstance(config, GradientStrategy) and config.holds_workers
    assert isinstance(config.make_server(3, sparse=True), type(SyncConfig().make_server(3, True)))
    with pytest.raises(ValueError, match="no dense servers"):
        config.make_server(3, sparse=False)


@pytest.mark.parametrize(
    "name, holds",
    [
        ("async", False),
        ("bsp", False),
        ("gba", False),
        ("psp", False),
        ("sync", True),
        ("bounded_staleness", True),
        ("backup_workers", True),
    ],
)
def test_a_strategy_says_whether_its_servers_can_hold_a_worker_back(name, holds):
    config = strategy_config(name)
    assert config.holds_workers is holds
    if not holds:  # a strategy that never holds a worker back keeps the default may_start
        assert type(config.make_server(4, False)).may_start is GradientPolicy.may_start


def test_partial_pull_starts_each_pull_one_block_further_on():
    """With answers arriving in request order, the b% that arrive first would otherwise
    always be the same blocks, and the others never refreshed."""
    pull = PartialPull(0.75, 0.0)
    assert pull.order(4, 0) == [0, 1, 2, 3] and pull.order(4, 5) == [1, 2, 3, 0]
    assert FULL_PULL.order(4, 5) == [0, 1, 2, 3]
