"""A seeded synthetic CTR task whose labels come from a hidden teacher model.

Ids are Zipf-skewed per feature; dense features are log(1+count) of log-normal counts.
The teacher is a factorization machine over the ids (first-order weights plus pairwise dot
products of small factor vectors) plus a linear term on the dense features. Its own AUC on
the test split is the best AUC any model can reach. With `drift` > 0 the teacher's weights
take a random-walk step every day (continual-learning runs); the test split is drawn from
the last day. With `id_churn` > 0 each day replaces a share of every feature's ids by
never-seen ones (the teacher has weights for all of them); `bucket_rows` hashes the emitted
ids into fewer buckets (fixed tables smaller than the id space: collisions).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import torch

from recsync.data.batch import Batch, concat, rebatch
from recsync.data.keys import check_features, prefixes
from recsync.data.shares import Select
from recsync.metrics.quality import auc

CHUNK = 4096


@dataclass(frozen=True)
class SyntheticSpec:
    """The synthetic task: sizes, the hidden teacher's shape, and drift and churn across
    days.

    The teacher's logit has three parts whose standard deviations are set here: the sum of
    the first-order id weights, the sum of pairwise factor products and the dense linear
    term. Feature f's ids are in [0, table_rows[f]), or [0, id_space()[f]) with churn.
    """

    num_train: int = field(
        default=1_000_000, metadata={"doc": "Training examples.", "values": ">= 1"}
    )
    num_test: int = field(
        default=50_000,
        metadata={"doc": "Held-out examples, drawn from the last day.", "values": ">= 1"},
    )
    num_dense: int = field(
        default=13,
        metadata={"doc": "Dense features, log(1 + count) of log-normal counts."},
    )
    table_rows: tuple[int, ...] = field(
        default=(100,) * 26,
        metadata={
            "doc": "The ids of each categorical feature (one table each), drawn Zipf-skewed.",
            "values": "each >= 1",
        },
    )
    zipf_exponent: float = field(
        default=1.05,
        metadata={"doc": "The skew of each feature's id frequencies.", "values": "> 0"},
    )
    teacher_dim: int = field(
        default=4,
        metadata={"doc": "The width of the teacher's pairwise factor vectors.", "values": ">= 1"},
    )
    first_order_std: float = field(
        default=1.0,
        metadata={
            "doc": "Standard deviation of the teacher's sum of first-order id weights.",
            "values": ">= 0",
        },
    )
    pairwise_std: float = field(
        default=0.1,
        metadata={
            "doc": "Standard deviation of the teacher's sum of pairwise factor products.",
            "values": ">= 0",
        },
    )
    dense_std: float = field(
        default=0.3,
        metadata={
            "doc": "Standard deviation of the teacher's linear term per unit-variance dense "
            "feature.",
            "values": ">= 0",
        },
    )
    base_ctr: float = field(
        default=0.25,
        metadata={
            "doc": "The click rate of the teacher's intercept (its bias is its logit).",
            "values": "(0, 1)",
        },
    )
    num_days: int = field(
        default=1,
        metadata={
            "doc": "Days the training examples are split into, in stream order.",
            "values": ">= 1",
        },
    )
    drift: float = field(
        default=0.0,
        metadata={
            "doc": "Each new day, the teacher's weights take a random-walk step of this size "
            "(relative to their spread).",
            "values": ">= 0",
        },
    )
    seed: int = field(default=0, metadata={"doc": "The seed of the task: teacher and examples."})
    keyed: bool = field(
        default=False,
        metadata={
            "doc": "Emit ids as feature-prefixed keys, for hash tables; set by the run from "
            "model.table_kind."
        },
    )
    id_churn: float = field(
        default=0.0,
        metadata={
            "doc": "From the second day on, the share of each feature's ids replaced each "
            "day by never-seen ones.",
            "values": "[0, 1)",
        },
    )
    bucket_rows: tuple[int, ...] = field(
        default=(),
        metadata={
            "doc": "Per feature, hash ids beyond this many into it (a fixed table smaller "
            "than the id space, with collisions); not with keyed.",
            "unset": "ids emitted as they are",
            "values": "each >= 1, one per table",
        },
    )

    def __post_init__(self) -> None:
        if self.num_train < 1 or self.num_test < 1:
            raise ValueError("synthetic num_train and num_test must be >= 1")
        if not self.table_rows or any(r < 1 for r in self.table_rows):
            raise ValueError(f"synthetic table_rows must be >= 1, got {self.table_rows}")
        if self.zipf_exponent <= 0:
            raise ValueError(f"synthetic zipf_exponent must be > 0, got {self.zipf_exponent}")
        if not 0 < self.base_ctr < 1:
            raise ValueError(f"synthetic base_ctr must be in (0, 1), got {self.base_ctr}")
        if self.num_days < 1 or self.drift < 0:
            raise ValueError("synthetic num_days must be >= 1 and drift >= 0")
        if min(self.first_order_std, self.pairwise_std, self.dense_std) < 0 or self.teacher_dim < 1:
            raise ValueError("synthetic teacher stds must be >= 0 and teacher_dim >= 1")
        if not 0 <= self.id_churn < 1:
            raise ValueError(f"synthetic id_churn must be in [0, 1), got {self.id_churn}")
        if self.bucket_rows:
            if len(self.bucket_rows) != len(self.table_rows) or min(self.bucket_rows) < 1:
                raise ValueError(
                    "synthetic bucket_rows must give one count >= 1 per table, got "
                    f"{self.bucket_rows}"
                )
            if self.keyed:
                raise ValueError("synthetic bucket_rows hashes fixed tables' ids: not with keyed")
        if self.keyed:
            check_features(len(self.table_rows), "synthetic spec")

    def churned(self) -> tuple[int, ...]:
        """How many of each feature's ids are replaced by new ones every day after the first."""
        return tuple(round(self.id_churn * rows) for rows in self.table_rows)

    def id_space(self) -> tuple[int, ...]:
        """The ids each feature can show over all days (table_rows without churn)."""
        return tuple(
            rows + (self.num_days - 1) * new
            for rows, new in zip(self.table_rows, self.churned(), strict=True)
        )

    def day_sizes(self) -> list[int]:
        """Training examples of each day, in the stream's order."""
        return split_days(self.num_train, self.num_days)


def split_days(total: int, days: int) -> list[int]:
    """`total` examples cut into `days` days, the first ones one longer when it does not
    divide."""
    return [total // days + (1 if i < total % days else 0) for i in range(days)]


class Teacher:
    """The hidden model: logit = bias + dense . w + sum_f u_f[id] + sum_{f<g} <V_f[id], V_g[id]>."""

    def __init__(self, spec: SyntheticSpec, gen: torch.Generator):
        F, k, space = len(spec.table_rows), spec.teacher_dim, spec.id_space()
        self.dense_weight = (
            torch.randn(spec.num_dense, generator=gen)
            * spec.dense_std
            / max(spec.num_dense, 1) ** 0.5
        )
        self.first = [torch.randn(r, generator=gen) * spec.first_order_std / F**0.5 for r in space]
        pairs = max(F * (F - 1) // 2, 1)
        factor_std = (spec.pairwise_std**2 / (pairs * k)) ** 0.25
        self.factors = [torch.randn(r, k, generator=gen) * factor_std for r in space]
        self.bias = torch.log(torch.tensor(spec.base_ctr / (1 - spec.base_ctr)))

    def drifted(self, drift: float, gen: torch.Generator) -> Teacher:
        other = object.__new__(Teacher)
        other.dense_weight = (
            self.dense_weight
            + drift * torch.randn(self.dense_weight.shape, generator=gen) * self.dense_weight.std()
        )
        other.first = [
            u + drift * torch.randn(u.shape, generator=gen) * u.std() for u in self.first
        ]
        other.factors = [
            v + drift * torch.randn(v.shape, generator=gen) * v.std() for v in self.factors
        ]
        other.bias = self.bias
        return other

    def logits(self, dense: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        """dense: B x num_dense, ids: B x F (one id per feature)."""
        F = ids.shape[1]
        first = sum(self.first[f][ids[:, f]] for f in range(F))
        vecs = torch.stack([self.factors[f][ids[:, f]] for f in range(F)], dim=1)
        total = vecs.sum(1)
        pairwise = 0.5 * (total.pow(2).sum(1) - vecs.pow(2).sum((1, 2)))
        centered = dense - dense.mean() if dense.numel() else dense
        logits: torch.Tensor = self.bias + centered @ self.dense_weight + first + pairwise
        return logits


MAX_TEST_SPLITS = 4  # the test splits (and teachers' AUCs) kept for the specs seen last
_TEST_SPLITS: dict[SyntheticSpec, tuple[Batch, torch.Tensor]] = {}
_TEACHER_AUCS: dict[SyntheticSpec, float] = {}


class SyntheticTask:
    """Deterministic train/test streams of a synthetic task, with the teacher's AUC."""

    def __init__(self, spec: SyntheticSpec, labelled_train: bool = True):
        """`labelled_train` False: the training stream's labels are all 0, the teacher not
        run on it (its ids and dense features are the same): for priced math, whose
        events depend on the ids only. The test split is labelled either way."""
        self.spec = spec
        self.labelled_train = labelled_train
        gen = torch.Generator().manual_seed(spec.seed)
        self.teachers = [Teacher(spec, gen)]
        for _ in range(1, spec.num_days):
            self.teachers.append(self.teachers[-1].drifted(spec.drift, gen))
        self.id_probs = [self._zipf(r) for r in spec.table_rows]
        self.id_perms = [torch.randperm(r, generator=gen) for r in spec.table_rows]
        self.day_ids = churn_maps(spec) if spec.id_churn else None
        self._test: tuple[Batch, torch.Tensor] | None = None

    def _zipf(self, rows: int) -> torch.Tensor:
        p = 1.0 / torch.arange(1, rows + 1, dtype=torch.float64) ** self.spec.zipf_exponent
        return p / p.sum()

    def _chunk(
        self, size: int, day: int, stream: int, index: int, labelled: bool = True
    ) -> tuple[Batch, torch.Tensor]:
        seed = hash((self.spec.seed, stream, day, index)) & 0x7FFF_FFFF  # int tuples hash stably
        gen = torch.Generator().manual_seed(seed)
        spec = self.spec
        counts = torch.exp(1.0 + 1.5 * torch.randn(size, spec.num_dense, generator=gen)).floor()
        dense = torch.log1p(counts).to(torch.float32)
        positions = [
            perm[torch.multinomial(p, size, replacement=True, generator=gen)]
            for p, perm in zip(self.id_probs, self.id_perms, strict=True)
        ]
        if self.day_ids is not None:
            positions = [ids[day][pos] for ids, pos in zip(self.day_ids, positions, strict=True)]
        ids = torch.stack(positions, dim=1)
        if labelled:
            prob = torch.sigmoid(self.teachers[day].logits(dense, ids))
            labels = (torch.rand(size, generator=gen) < prob).to(torch.float32)
        else:
            prob = labels = torch.zeros(size)
        F = ids.shape[1]
        offsets = torch.arange(F * size + 1, dtype=torch.int64)
        by_feature = ids.t()
        if spec.bucket_rows:
            buckets = torch.tensor(spec.bucket_rows, dtype=torch.int64).unsqueeze(1)
            hashed = torch.tensor(spec.id_space()).unsqueeze(1) > buckets
            by_feature = torch.where(hashed, bucket_of(by_feature) % buckets, by_feature)
        if spec.keyed:
            by_feature = by_feature | prefixes(F).unsqueeze(1)
        batch = Batch(dense, by_feature.reshape(-1).contiguous(), offsets, labels)
        return batch, prob.to(torch.float32)

    def _chunks(self, total: int, days: range, stream: int) -> Iterator[Batch]:
        for day, count in zip(days, split_days(total, len(days)), strict=True):
            for index, start in enumerate(range(0, count, CHUNK)):
                size = min(CHUNK, count - start)
                yield self._chunk(size, day, stream, index, self.labelled_train)[0]

    def train_selected(self, batch_size: int, select: Select) -> Iterator[Batch]:
        """The examples of the training stream `select` picks (a reader's share), cut into
        batches; a chunk with none of them is never made."""

        def pieces() -> Iterator[Batch]:
            at = 0
            days = range(self.spec.num_days)
            for day, count in zip(days, split_days(self.spec.num_train, len(days)), strict=True):
                for index, start in enumerate(range(0, count, CHUNK)):
                    size = min(CHUNK, count - start)
                    wanted = select(at, at + size)
                    if wanted:
                        chunk = self._chunk(size, day, 1, index, self.labelled_train)[0]
                        yield from (chunk.slice(a - at, b - at) for a, b in wanted)
                    at += size

        return rebatch(pieces(), batch_size)

    def train_batches(self, batch_size: int, start_example: int = 0) -> Iterator[Batch]:
        """The training stream, day after day, cut into batches; `start_example` skips ahead
        (a resumed run continues exactly where the checkpoint left off)."""
        chunks = self._chunks(self.spec.num_train, range(self.spec.num_days), 1)
        return rebatch(skip_examples(chunks, start_example), batch_size)

    def test_set(self) -> tuple[Batch, torch.Tensor]:
        """The whole test split (last day's teacher) and the teacher's probabilities on it:
        made once per spec in a process (a job's readers each hold the task's split)."""
        if self._test is None:
            self._test = _TEST_SPLITS.get(self.spec)
        if self._test is None:
            day = self.spec.num_days - 1
            starts = range(0, self.spec.num_test, CHUNK)
            parts = [
                self._chunk(min(CHUNK, self.spec.num_test - s), day, 2, i)
                for i, s in enumerate(starts)
            ]
            self._test = concat([b for b, _ in parts]), torch.cat([p for _, p in parts])
            if len(_TEST_SPLITS) >= MAX_TEST_SPLITS:
                _TEST_SPLITS.pop(next(iter(_TEST_SPLITS)))
            _TEST_SPLITS[self.spec] = self._test
        return self._test

    def day_test_set(self, day: int, size: int) -> tuple[Batch, torch.Tensor]:
        """`size` held-out examples of day `day` (its teacher; a stream of their own), and the
        teacher's probabilities: continual-learning runs are scored on the next day."""
        if not 0 <= day < self.spec.num_days:
            raise ValueError(f"day {day} out of range [0, {self.spec.num_days})")
        parts = [
            self._chunk(min(CHUNK, size - s), day, 3, i)
            for i, s in enumerate(range(0, size, CHUNK))
        ]
        return concat([b for b, _ in parts]), torch.cat([p for _, p in parts])

    def teacher_auc(self) -> float:
        """The teacher's own AUC on the test split: the best AUC a model can reach."""
        known = _TEACHER_AUCS.get(self.spec)
        if known is None:
            batch, prob = self.test_set()
            known = auc(batch.labels, prob)
            if len(_TEACHER_AUCS) >= MAX_TEST_SPLITS:
                _TEACHER_AUCS.pop(next(iter(_TEACHER_AUCS)))
            _TEACHER_AUCS[self.spec] = known
        return known


BUCKET_MIX = -0x61C8864680B583EB  # 0x9E3779B97F4A7C15 as a signed int64


def bucket_of(ids: torch.Tensor) -> torch.Tensor:
    """A non-negative multiplicative hash of every id (int64 products wrap)."""
    return ((ids * BUCKET_MIX) >> 32) & 0x7FFFFFFF


def churn_maps(spec: SyntheticSpec) -> list[torch.Tensor]:
    """Per feature, a num_days x table_rows map from id position to the id it shows that day:
    day 0 the position itself; each later day, the day before's with `churned()` random
    positions given the next never-seen ids (drawn from the seed, apart from the teacher)."""
    gen = torch.Generator().manual_seed(hash((spec.seed, 4)) & 0x7FFF_FFFF)
    maps = []
    for rows, new in zip(spec.table_rows, spec.churned(), strict=True):
        days = [torch.arange(rows, dtype=torch.int64)]
        for day in range(1, spec.num_days):
            ids = days[-1].clone()
            ids[torch.randperm(rows, generator=gen)[:new]] = (
                rows + (day - 1) * new + torch.arange(new)
            )
            days.append(ids)
        maps.append(torch.stack(days))
    return maps


def skip_examples(chunks: Iterator[Batch], count: int) -> Iterator[Batch]:
    """The stream without its first `count` examples."""
    for chunk in chunks:
        if count >= chunk.batch_size:
            count -= chunk.batch_size
            continue
        yield chunk.slice(count, chunk.batch_size) if count else chunk
        count = 0
