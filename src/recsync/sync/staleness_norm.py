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

Pure math on numbers or on a tensor of per-row stalenesses; the server node calls it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import torch

RULES = ("rho", "inverse")


@dataclass(frozen=True)
class StalenessNorm:
    """``rule``: ``"rho"`` (Liu & Zhao) or ``"inverse"`` (1/tau); ``mu_prime`` >= 0, the
    staleness below which nothing is scaled; ``kappa`` > 0 the exponent; ``sigmoid_lambda``
    None (off) or > 0, the weight of |dw_prev| in the optional sigmoid factor."""

    rule: Literal["rho", "inverse"] = "rho"
    mu_prime: float = 0.0
    kappa: float = 2.0
    sigmoid_lambda: float | None = None

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

    def effective(self, tau: float, last_update_abs: float = 0.0) -> float:
        if self.sigmoid_lambda is None:
            return float(tau)
        return float(tau) / (1.0 + math.exp(-self.sigmoid_lambda * last_update_abs))

    def scale(self, tau: float, last_update_abs: float = 0.0) -> float:
        """rho for one block's staleness tau."""
        t = self.effective(tau, last_update_abs)
        if self.rule == "inverse":
            return 1.0 / t if t > 1.0 else 1.0
        return 1.0 if t <= self.mu_prime else min(1.0, t ** (-self.kappa))

    def scale_rows(self, tau: torch.Tensor, last_update_abs: float = 0.0) -> torch.Tensor:
        """rho per row for a tensor of per-row stalenesses (float32, same length)."""
        t = tau.to(torch.float32)
        if self.sigmoid_lambda is not None:
            t = t / (1.0 + math.exp(-self.sigmoid_lambda * last_update_abs))
        if self.rule == "inverse":
            return torch.where(t > 1.0, 1.0 / t.clamp(min=1.0), torch.ones_like(t))
        return torch.where(
            t <= self.mu_prime, torch.ones_like(t), t.clamp(min=1.0).pow(-self.kappa)
        )
