"""The hash-embedding reproduction's setting: the Criteo-like task with id churn, and the
job of every variant (fixed tables hashed into buckets; hash tables bounded with LRS
eviction, with admission, unbounded, with ttl eviction); and the rule by which two
variants' runs over seeds are compared."""

from __future__ import annotations

import dataclasses
import statistics
from typing import Any

from experiments.repro.claims import MEASURED, Claim, Effect
from experiments.repro.embeddings_capacity import CRITEO_CARDINALITIES
from experiments.repro.verdict import Direction, Verdict, judge
from recsync.coordinator.spec import ClusterSpec, JobSpec
from recsync.data.synthetic import SyntheticSpec
from recsync.families import strategy_config
from recsync.model.hash_spec import Admission, Eviction, HashTables
from recsync.model.spec import ModelSpec, TableSpec
from recsync.optim.dense import DenseOptimizerSpec
from recsync.optim.rowwise import RowOptimizerSpec
from recsync.optim.train_spec import TrainSpec

# Criteo Kaggle (Display Advertising Challenge) distinct values of C1..C26: 33.76M in all
BOUNDED = ("fixed", "hash LRS", "hash LRS + admission 2")  # run at each memory budget
UNBOUNDED = "hash unbounded"
CONTINUAL_VARIANTS = ("no eviction", "ttl eviction")
SHARDS = 2  # embedding servers
ENGINE_FIELDS = ("engine_examples", "engine_repeats")  # the Ray part's own sizes


@dataclasses.dataclass(frozen=True)
class Setting:
    """Sizes of the reproduction (the defaults are the reported run)."""

    scale: int = 1000
    floor: int = 3
    dim: int = 16
    fixed_caps: tuple[int, ...] = (1000, 100)  # rows of a fixed table, one budget each
    churn: float = 0.05  # share of each feature's ids replaced a day
    quality_examples: int = 120_000
    quality_days: int = 4
    seeds: tuple[int, ...] = (0, 1, 2, 3, 4)  # training seeds (model init, initial rows)
    task_seed: int = 0  # the task (teacher, ids, examples): the same for every run
    test_examples: int = 20_000
    days: int = 10  # continual days trained (and scored on the day after each)
    per_day: int = 32_768
    ttl_days: int = 1  # eviction: rows unseen for this many days of updates
    cuts_per_day: int = 4
    deltas_per_full: int = 4
    batch_size: int = 256
    bottom_mlp: tuple[int, ...] = (64, 32)
    top_mlp: tuple[int, ...] = (64, 32)
    engine_examples: int = 0  # Ray runs of this many examples (0: the cost model's ratio)
    engine_repeats: int = 2
    capacity_fraction: float = 1.0  # share of every Criteo id inserted by the capacity run
    continual_seeds: tuple[int, ...] = (0, 1, 2, 3, 4)  # training seeds of the continual runs
    # one factor of both default Adagrad rates (dense 0.01, rows 0.05), the same grid for
    # every variant of the quality and the continual runs (settle.tune grows it past an edge)
    grid: tuple[float, ...] = (0.5, 1.0, 2.0)
    tuning_seed: int = 0
    validation_examples: int = 20_000  # the tuning's held-out examples (a stream of its own)
    eval_marks: int = 8  # held-out evaluations over a quality run (its loss curve)

    def __post_init__(self) -> None:
        if min(self.scale, self.floor, self.dim, self.batch_size, self.days) < 1:
            raise ValueError("embeddings: scale, floor, dim, batch_size and days must be >= 1")
        if not self.seeds or not self.fixed_caps or min(self.fixed_caps) < 1:
            raise ValueError("embeddings: needs seeds and fixed_caps (each >= 1)")
        if not self.continual_seeds or self.eval_marks < 4:
            raise ValueError("embeddings: needs continual_seeds and at least 4 eval_marks")
        if self.per_day % self.batch_size or self.per_day < self.cuts_per_day * self.batch_size:
            raise ValueError(
                f"embeddings: per_day ({self.per_day}) must be whole batches of "
                f"{self.batch_size}, at least one per cut ({self.cuts_per_day} a day)"
            )

    def table_rows(self) -> tuple[int, ...]:
        """Day 0's ids of each feature: Criteo's cardinalities / scale, at least floor."""
        return tuple(max(c // self.scale, self.floor) for c in CRITEO_CARDINALITIES)

    def ttl_steps(self) -> int:
        """Shard updates in ttl_days days (each batch updates every shard once)."""
        return self.ttl_days * self.per_day // self.batch_size

    def as_dict(self) -> dict[str, Any]:
        """The setting as saved beside every part and in results.json."""
        return dataclasses.asdict(self)


def synthetic(setting: Setting, seed: int, days: int, examples: int) -> SyntheticSpec:
    """The Criteo-like task with id churn, `examples` over `days` days (ids not keyed)."""
    return SyntheticSpec(
        num_train=examples,
        num_test=setting.test_examples,
        table_rows=setting.table_rows(),
        num_days=days,
        id_churn=setting.churn,
        seed=seed,
    )


def fixed_rows(task: SyntheticSpec, cap: int | None) -> tuple[int, ...]:
    """Each fixed table's rows: its id space (over all days) up to `cap` (None: all)."""
    return tuple(space if cap is None else min(space, cap) for space in task.id_space())


def quality_label(variant: str, cap: int | None) -> str:
    """A quality run's name in the results and the report."""
    return variant if cap is None else f"{variant}, {cap:,} rows a table"


def train(setting: Setting, seed: int, factor: float = 1.0) -> TrainSpec:
    """Adagrad with both default rates (dense and rows) times `factor`."""
    return TrainSpec(
        batch_size=setting.batch_size,
        dense_optimizer=DenseOptimizerSpec(lr=DenseOptimizerSpec().lr * factor),
        sparse_optimizer=RowOptimizerSpec(lr=RowOptimizerSpec().lr * factor),
        seed=seed,
    )


def job(
    setting: Setting,
    variant: str,
    task: SyntheticSpec,
    seed: int,
    cap: int | None = None,
    factor: float = 1.0,
) -> JobSpec:
    """The job of a variant (fixed tables and the bounds of hash tables: each table's id
    space up to `cap` rows): S-EASGD, 2 trainers x 2 workers, 2 embedding servers; both
    Adagrad rates times `factor`."""
    if variant not in (*BOUNDED, UNBOUNDED, *CONTINUAL_VARIANTS):
        raise ValueError(f"embeddings: unknown variant {variant!r}")
    rows = fixed_rows(task, cap)
    tables = tuple(TableSpec(f"C{f + 1}", r, setting.dim) for f, r in enumerate(rows))
    bound = sum(rows) // SHARDS
    hash_tables = {
        "fixed": None,
        "hash LRS": HashTables(max_rows=bound),
        "hash LRS + admission 2": HashTables(max_rows=bound, admission=Admission(min_count=2)),
        UNBOUNDED: HashTables(),
        "no eviction": HashTables(),
        "ttl eviction": HashTables(eviction=Eviction(ttl_steps=setting.ttl_steps())),
    }[variant]
    if hash_tables is None:
        data = dataclasses.replace(task, bucket_rows=rows)
    else:
        data = dataclasses.replace(task, keyed=True)
    model = ModelSpec(
        tables=tables,
        bottom_mlp=setting.bottom_mlp,
        top_mlp=setting.top_mlp,
        hash_tables=hash_tables,
    )
    return JobSpec(
        model,
        train(setting, seed, factor),
        ClusterSpec(2, 2, SHARDS, num_dense_servers=1),
        strategy_config("easgd"),
        data,
    )


def quality_variants(setting: Setting) -> list[tuple[str, int | None]]:
    """(variant, cap) of every quality run of a seed: each bounded variant at each budget,
    and unbounded hash tables."""
    bounded = [(v, cap) for cap in setting.fixed_caps for v in BOUNDED]
    return [*bounded, (UNBOUNDED, None)]


def by_variant(quality: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """The quality runs grouped by variant (their seeds in run order)."""
    runs: dict[str, list[dict[str, Any]]] = {}
    for run in quality:
        runs.setdefault(run["variant"], []).append(run)
    return runs


def paired(runs: dict[str, list[dict[str, Any]]], a: str, b: str, metric: str) -> Verdict:
    """`a` better than `b` on `metric` (a higher AUC, a lower NE), paired by seed, judged by
    `verdict.judge`."""
    first = {r["seed"]: r[metric] for r in runs[a]}
    second = {r["seed"]: r[metric] for r in runs[b]}
    return judge(first, second, _direction(metric))


def _direction(metric: str) -> Direction:
    return "lower" if metric.endswith("_ne") else "higher"


def compare(runs: dict[str, list[dict[str, Any]]], a: str, b: str, metric: str) -> dict[str, Any]:
    """`a` minus `b` on `metric`, paired by seed, judged by `verdict.judge`: the paper's
    direction is `a` better (a higher AUC, a lower NE); `difference` is `a` minus `b`."""
    verdict = paired(runs, a, b, metric)
    sign = 1.0 if _direction(metric) == "higher" else -1.0
    return {
        "a": a,
        "b": b,
        "metric": metric,
        "seeds": verdict.seeds,
        "difference": sign * verdict.effect,
        "spread": verdict.spread,
        "verdict": verdict.label,
        "judged": verdict.describe(),
    }


def continual_gaps(continual: list[dict[str, Any]]) -> dict[int, float]:
    """Per training seed: next-day AUC, ttl eviction minus no eviction, mean over the days
    (a run without a seed, of the older one-seed setting, is seed 0)."""
    runs = {(r["variant"], r.get("seed", 0)): r["days"] for r in continual}
    seeds = sorted({seed for variant, seed in runs if (CONTINUAL_VARIANTS[1], seed) in runs})
    return {
        seed: statistics.fmean(
            b["next_day_auc"] - a["next_day_auc"]
            for a, b in zip(
                runs[(CONTINUAL_VARIANTS[0], seed)],
                runs[(CONTINUAL_VARIANTS[1], seed)],
                strict=True,
            )
        )
        for seed in seeds
        if (CONTINUAL_VARIANTS[0], seed) in runs
    }


def continual_gap(continual: list[dict[str, Any]]) -> tuple[float, Verdict]:
    """Next-day AUC, ttl eviction minus no eviction, mean over the days and the seeds, and
    its verdict over the seeds (the paper's direction: eviction costs no AUC, i.e. ttl is not
    below no eviction)."""
    gaps = continual_gaps(continual)
    return statistics.fmean(gaps.values()), judge(gaps, 0.0, "higher")


def quality_verdicts(quality: list[dict[str, Any]], caps: list[int]) -> list[dict[str, Any]]:
    """At each memory budget: hash (LRS) vs fixed, admission vs fixed and vs plain LRS, and
    what the bound costs (unbounded vs LRS); AUC and NE each."""
    runs = by_variant(quality)
    pairs = []
    for cap in caps:
        fixed, lrs, admit = (quality_label(v, cap) for v in BOUNDED)
        pairs += [(lrs, fixed), (admit, fixed), (admit, lrs), (UNBOUNDED, lrs)]
    return [
        compare(runs, a, b, metric)
        for a, b in pairs
        if a in runs and b in runs
        for metric in ("test_auc", "test_ne")
    ]


def claims(results: dict[str, Any]) -> list[Claim]:
    """The report's headline claims (the papers' premises on hash tables), from its results
    file: at each memory budget, bounded hash tables (LRS) against fixed tables on AUC; over
    the continual days, ttl eviction against none."""
    runs = by_variant(results["quality"])
    seeds = len(results["setting"]["seeds"])
    premise = "GBA; Liu & Zhao: production models on expandable hash tables (a premise)"
    out = []
    for cap in results["setting"]["fixed_caps"]:
        fixed, lrs, _ = (quality_label(v, cap) for v in BOUNDED)
        if fixed not in runs or lrs not in runs:
            continue
        verdict = paired(runs, lrs, fixed, "test_auc")
        rows = runs[fixed][0]["rows_budget"]
        out.append(
            Claim(
                "at equal memory, bounded hash tables score a higher AUC than fixed tables",
                premise,
                f"{rows:,} rows ({cap:,} a table), {seeds} seeds: test AUC, hash LRS minus "
                f"fixed, {verdict.effect:+.4f}",
                verdict,
                "hash embeddings",
                effect=Effect.difference(
                    {r["seed"]: r["test_auc"] for r in runs[lrs]},
                    {r["seed"]: r["test_auc"] for r in runs[fixed]},
                    "test AUC, hash LRS minus fixed",
                    "higher",
                ),
                evidence=MEASURED,
            )
        )
    gaps = continual_gaps(results["continual"])
    gap, verdict = continual_gap(results["continual"])
    first = min(r.get("seed", 0) for r in results["continual"])
    days = {r["variant"]: r["days"] for r in results["continual"] if r.get("seed", 0) == first}
    kept, evicting = days["no eviction"][-1]["rows_live"], days["ttl eviction"][-1]["rows_live"]
    count = "one seed" if len(gaps) == 1 else f"{len(gaps)} seeds"
    out.append(
        Claim(
            "evicting stale rows bounds memory without lowering next-day AUC",
            premise,
            f"{len(days['no eviction'])} continual days: next-day AUC, ttl minus no eviction, "
            f"{gap:+.4f}; last day {evicting:,} rows vs {kept:,} ({count})",
            verdict,
            "hash embeddings",
            effect=Effect.of(gaps, "next-day AUC, ttl minus no eviction", "higher"),
            evidence=MEASURED,
        )
    )
    return out
