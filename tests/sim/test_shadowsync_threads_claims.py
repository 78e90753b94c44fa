"""ShadowSync Fig. 8's claims (shadowsync_threads_claims.py): computed from rows shaped as
the runner writes them, the verdicts its report's findings give; rows of another shape give
none."""

from __future__ import annotations

from experiments.repro import shadowsync_threads, shadowsync_threads_claims
from experiments.repro.claims import BUILT_IN, MEASURED, WITH
from experiments.repro.verdict import HOLDS, WITHIN_NOISE

SEEDS = (0, 1, 2)


def row(trainers, threads, seed, math, **values):
    """A row as `shadowsync_points.run_point` returns it."""
    return {
        "variant": "S-EASGD",
        "trainers": trainers,
        "threads": threads,
        "sync_servers": 1,
        "embedding_servers": 4,
        "seed": seed,
        "math": math,
        "examples": 524_288,
        "period_s": None,
        "cost": "threads",
        "eps": 100.0 * trainers * min(threads, 24),
        "syncs_per_trainer_s": 30.0,
        "average_sync_gap": 4.0,
        "average_sync_gap_per_thread": 1.0,
        "train_loss": 0.6 + threads / 10_000,
        "test_logloss": 0.5 + threads / 10_000 + seed / 100_000,
    } | values


def rows(eval_step=1 / 10_000):
    threads, trainers = shadowsync_threads.THREADS, shadowsync_threads.SERVERS
    made = []
    for seed in SEEDS:
        made += [
            row(5, m, seed, "real", test_logloss=0.5 + m * eval_step + seed / 100_000)
            for m in threads
        ]
        made += [row(n, m, seed, "priced") for n in trainers for m in threads]
    return made


def test_claims_give_the_reports_verdicts_on_the_loss():
    result = rows()
    train, test, flat = shadowsync_threads_claims.claims(result)
    assert test.ours == (
        "5 trainers: eval logloss 0.50011 at 1 thread, 0.50641 at 64 (+1.26%), real math (3 seeds)"
    )
    assert test.verdict.label == HOLDS and round(test.verdict.effect, 6) == 0.0063
    assert train.ours.startswith("5 trainers: train loss 0.60010 at 1 thread, 0.60640 at 64")
    assert train.verdict.label == HOLDS
    assert {train.bears_on, test.bears_on} == {"worker threads"}
    text = shadowsync_threads.report(result)  # the table and the report cannot disagree
    for claim in (train, test):
        assert claim.verdict.describe(5) in text
        assert claim.evidence == MEASURED and claim.direction == WITH
    # EPS flat past 24 threads is the stated compute model's, so built in
    assert flat.evidence == BUILT_IN and "compute at 24 threads" in flat.mechanism
    assert flat.effect.describe_size() == "1.00x EPS at 24 threads" and flat.direction == WITH
    assert flat.verdict.label == HOLDS  # flat in each of the rows' 3 seeds


def test_the_verdict_follows_the_numbers_and_other_shapes_give_none():
    _, test, _ = shadowsync_threads_claims.claims(rows(eval_step=0.0))
    assert test.verdict.label == WITHIN_NOISE
    assert shadowsync_threads_claims.claims({"rows": []}) == []
    assert shadowsync_threads_claims.claims([{"variant": "S-EASGD"}]) == []
