"""``staleness_norm``: scale each gradient by rho(tau) before the optimizer sees it.

Liu & Zhao (AAAI 2021), "Staleness normalization": eta' = rho(tau) * eta with
rho(tau) = 1 if tau <= mu' else tau^-kappa (their eq. 7 with kappa = 2), where tau is the
gradient's staleness (the server's version at push minus the version the worker pulled, per
dense block and per embedding row) and mu' the mean staleness of the smaller cluster one
normalizes to. Optionally tau is first multiplied by sigmoid(lambda * |dw_prev|) (their eq.
5-6), |dw_prev| the mean absolute size of the block's previous update: a model that barely
moves tolerates staleness. rho stays in (0, 1], as the paper requires: a scaled tau below 1
is not turned into a larger step. ``rule="inverse"`` is the 1/tau rule of Zhang et al. (2016) for
comparison (rho = 1 for tau = 0).

Normalized staleness (their Sec. "Staleness Normalization"): a cluster whose staleness has mean
mu and standard deviation delta is mapped onto the smaller cluster's (mu', delta') before rho
is taken, tau' = delta' (tau - mu) / delta + mu' (floored at 0), so eq. 7 compares like with
like: with ``source_mean`` (mu), ``source_std`` (delta) and ``target_std`` (delta') set, a
gradient of the large cluster is scaled only when it is staler than the large cluster's own
typical staleness, by its place in that distribution. The same map applies to embedding rows'
stalenesses (a row staler than the dense mean is rare).

Pure math on numbers or on a tensor of per-row stalenesses; the server node calls it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

import torch

RULES = ("rho", "inverse")


@dataclass(frozen=True)
class StalenessNorm:
    """Staleness normalization: each gradient scaled by rho(tau), tau its staleness, before
    the optimizer sees it."""

    rule: Literal["rho", "inverse"] = field(
        default="rho",
        metadata={
            "doc": "rho: 1 up to mu_prime, tau^-kappa beyond (Liu & Zhao); inverse: 1/tau "
            "(Zhang et al.)."
        },
    )
    mu_prime: float = field(
        default=0.0,
        metadata={"doc": "The staleness up to which nothing is scaled.", "values": ">= 0"},
    )
    kappa: float = field(
        default=2.0, metadata={"doc": "The exponent of rho's tau^-kappa.", "values": "> 0"}
    )
    sigmoid_lambda: float | None = field(
        default=None,
        metadata={
            "doc": "The weight of the block's last update size in a sigmoid factor tau is "
            "first multiplied by.",
            "unset": "off",
            "values": "> 0",
        },
    )
    source_mean: float | None = field(
        default=None,
        metadata={
            "doc": "This cluster's mean staleness, mapped onto mu_prime (set with source_std "
            "and target_std).",
            "unset": "off (tau as it is)",
        },
    )
    source_std: float | None = field(
        default=None,
        metadata={
            "doc": "This cluster's staleness standard deviation (with source_mean).",
            "unset": "off (tau as it is)",
            "values": "> 0",
        },
    )
    target_std: float | None = field(
        default=None,
        metadata={
            "doc": "The standard deviation of the smaller cluster normalized to (with "
            "source_mean).",
            "unset": "off (tau as it is)",
            "values": "> 0",
        },
    )

    def __post_init__(self) -> None:
        if self.rule not in RULES:
            raise ValueError(f"staleness_norm.rule must be one of {list(RULES)}, got {self.rule!r}")
        if not (isinstance(self.mu_prime, int | float) and math.isfinite(self.mu_prime)) or (
            self.mu_prime < 0
        ):
            raise ValueError(
                f"staleness_norm.mu_prime must be a number >= 0, got {self.mu_prime!r}"
            )
        if not (isinstance(self.kappa, int | float) and self.kappa > 0):
            raise ValueError(f"staleness_norm.kappa must be > 0, got {self.kappa!r}")
        if self.sigmoid_lambda is not None and not self.sigmoid_lambda > 0:
            raise ValueError(
                f"staleness_norm.sigmoid_lambda must be None or > 0, got {self.sigmoid_lambda!r}"
            )
        self._check_moments()

    def _check_moments(self) -> None:
        moments = (self.source_mean, self.source_std, self.target_std)
        if all(m is None for m in moments):
            return
        if self.source_mean is None or self.source_std is None or self.target_std is None:
            raise ValueError(
                "staleness_norm: source_mean, source_std and target_std are set together "
                f"(got {moments})"
            )
        if not (self.source_std > 0 and self.target_std > 0):
            raise ValueError(
                f"staleness_norm: source_std and target_std must be > 0, got {moments[1:]}"
            )

    def describe(self) -> str:
        """The ``staleness_norm=...`` part of a strategy's describe() line."""
        params = f"mu'={self.mu_prime:g}, kappa={self.kappa:g}"
        if self.source_mean is not None:
            params += (
                f", tau'={self.target_std:g}(tau-{self.source_mean:g})/{self.source_std:g}+mu'"
            )
        if self.sigmoid_lambda is not None:
            params += f", sigmoid_lambda={self.sigmoid_lambda:g}"
        return f"staleness_norm={self.rule}({params})"

    def _affine(self) -> tuple[float, float] | None:
        """(a, b) of tau' = a tau + b = delta' (tau - mu) / delta + mu'; None: tau as it is."""
        if self.source_mean is None:
            return None
        assert self.source_std is not None and self.target_std is not None
        ratio = self.target_std / self.source_std
        return ratio, self.mu_prime - ratio * self.source_mean

    def normalized(self, tau: float) -> float:
        """tau' (>= 0), or tau when no moments are set."""
        affine = self._affine()
        return float(tau) if affine is None else max(0.0, affine[0] * float(tau) + affine[1])

    def effective(self, tau: float, last_update_abs: float = 0.0) -> float:
        t = self.normalized(tau)
        if self.sigmoid_lambda is None:
            return t
        return t / (1.0 + math.exp(-self.sigmoid_lambda * last_update_abs))

    def scale(self, tau: float, last_update_abs: float = 0.0) -> float:
        """rho for one block's staleness tau."""
        t = self.effective(tau, last_update_abs)
        if self.rule == "inverse":
            return 1.0 / t if t > 1.0 else 1.0
        return 1.0 if t <= self.mu_prime else min(1.0, t ** (-self.kappa))

    def scale_rows(self, tau: torch.Tensor, last_update_abs: float = 0.0) -> torch.Tensor:
        """rho per row for a tensor of per-row stalenesses (float32, same length)."""
        t = tau.to(torch.float32)
        affine = self._affine()
        if affine is not None:
            t = (affine[0] * t + affine[1]).clamp(min=0.0)
        if self.sigmoid_lambda is not None:
            t = t / (1.0 + math.exp(-self.sigmoid_lambda * last_update_abs))
        if self.rule == "inverse":
            return torch.where(t > 1.0, 1.0 / t.clamp(min=1.0), torch.ones_like(t))
        return torch.where(
            t <= self.mu_prime, torch.ones_like(t), t.clamp(min=1.0).pow(-self.kappa)
        )
