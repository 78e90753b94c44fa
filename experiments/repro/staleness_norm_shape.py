"""The staleness-normalization reproduction's numbers, read off its results: the runs by
label and seed, the clusters' names, and the two figures' shapes (`shape`, `data_norm`) that
its report and its claims judge."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

from experiments.repro.verdict import Verdict, judge

NEAR = 0.005  # AUC: "almost achieves the same AUC as in 1K workers"


def size_name(workers: int) -> str:
    """A cluster's short name: 1K, 3K; 0.4K, 1.2K."""
    return f"{workers / 1000:g}K"


@dataclass(frozen=True)
class Labels:
    """Each run's label for a small and a large cluster (the paper's 1K and 3K)."""

    small: int
    large: int

    def _at(self, workers: int, rule: str) -> str:
        return f"{size_name(workers)}, {rule}"

    @property
    def base_small(self) -> str:
        return self._at(self.small, "no normalization")

    @property
    def base_large(self) -> str:
        return self._at(self.large, "no normalization")

    @property
    def inverse(self) -> str:
        return self._at(self.large, "1/tau (Zhang et al. 2016)")

    @property
    def rho_large(self) -> str:
        return self._at(self.large, "rho on tau'")

    @property
    def rho_large_data(self) -> str:
        return self._at(self.large, "rho on tau' + data norm")

    @property
    def rho_small(self) -> str:
        return self._at(self.small, "rho")

    @property
    def rho_small_data(self) -> str:
        return self._at(self.small, "rho + data norm")

    @property
    def fig5(self) -> tuple[str, ...]:
        return (self.base_small, self.base_large, self.inverse, self.rho_large)

    @property
    def fig6(self) -> tuple[str, ...]:
        return (self.rho_small, self.rho_small_data, self.rho_large, self.rho_large_data)


def labels_of(result: dict[str, Any]) -> Labels:
    """The labels of `result`'s clusters (its runs' smallest and largest worker counts)."""
    workers = [run["workers"] for run in result["runs"]]
    return Labels(min(workers), max(workers))


Runs = dict[str, list[dict[str, Any]]]


def by_label(result: dict[str, Any]) -> Runs:
    """Every label's runs (one a seed; a run without a seed is seed 0's)."""
    runs: Runs = {}
    for run in result["runs"]:
        runs.setdefault(run["label"], []).append(run)
    return runs


def per_seed(runs: Runs, label: str, key: str = "final_auc") -> dict[int, float]:
    return {run.get("seed", 0): run[key] for run in runs[label]}


def mean_of(values: dict[int, float]) -> float:
    return statistics.fmean(values.values())


def cell(values: dict[int, float]) -> str:
    """`mean (min-max)`, or the one value."""
    if len(values) < 2:
        return f"{mean_of(values):.4f}"
    return f"{mean_of(values):.4f} ({min(values.values()):.4f}-{max(values.values()):.4f})"


def _gap(a: dict[int, float], b: dict[int, float]) -> dict[int, float]:
    """|a - b| on each seed both have."""
    return {s: abs(a[s] - b[s]) for s in a.keys() & b.keys()}


@dataclass(frozen=True)
class Shape:
    """Fig. 5's claims judged on a result (paired by seed): rho keeps the large size near
    the small one (`near`), closer than no normalization (`closer`), and 1/tau ends below
    every other large-size run (`worst_verdict`, against the next lowest, `runner_up`)."""

    auc: dict[str, dict[int, float]]
    near: Verdict
    closer: Verdict
    worst: str
    runner_up: str
    worst_verdict: Verdict
    mean_rho_gap: float
    mean_none_gap: float
    rho_gap: dict[int, float]  # per seed: |AUC at the small size - AUC at the large with rho|
    none_gap: dict[int, float]  # the same without normalization


def shape(result: dict[str, Any]) -> Shape:
    runs, names = by_label(result), labels_of(result)
    auc = {label: per_seed(runs, label) for label in runs}
    expected, rho = auc[names.base_small], auc[names.rho_large]
    rho_gap, none_gap = _gap(expected, rho), _gap(expected, auc[names.base_large])
    large = {label: mean_of(auc[label]) for label in names.fig5[1:]}
    runner_up = min((lb for lb in large if lb != names.inverse), key=lambda lb: large[lb])
    return Shape(
        auc,
        judge(rho_gap, NEAR, "lower"),
        judge(rho_gap, none_gap, "lower"),
        min(large, key=lambda label: large[label]),
        runner_up,
        judge(auc[names.inverse], auc[runner_up], "lower"),
        mean_of(expected) - mean_of(rho),
        mean_of(expected) - mean_of(auc[names.base_large]),
        rho_gap,
        none_gap,
    )


@dataclass(frozen=True)
class DataNorm:
    """Fig. 6 at one size: data normalization over rho, judged paired by seed."""

    size: str
    paper_workers: str
    gain: float
    verdict: Verdict


def data_norm(result: dict[str, Any]) -> list[DataNorm | str]:
    """Fig. 6 at each size: the judged gain, or the size's name where it was not run."""
    names, runs = labels_of(result), by_label(result)
    auc = {label: per_seed(runs, label) for label in runs}
    out: list[DataNorm | str] = []
    for size, paper_size, plain, with_data in (
        (size_name(names.small), "1000", names.rho_small, names.rho_small_data),
        (size_name(names.large), "3000", names.rho_large, names.rho_large_data),
    ):
        if plain in auc and with_data in auc:
            gain = mean_of(auc[with_data]) - mean_of(auc[plain])
            out.append(
                DataNorm(size, paper_size, gain, judge(auc[with_data], auc[plain], "higher"))
            )
        else:
            out.append(size)
    return out
