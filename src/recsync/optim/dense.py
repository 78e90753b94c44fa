"""Optimizers of the dense part (MLPs): SGD, Adagrad, Adam from torch.optim."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import torch

DENSE_OPTIMIZERS = ("sgd", "adagrad", "adam")


@dataclass(frozen=True)
class DenseOptimizerSpec:
    """Which torch optimizer updates the dense parameters, and its hyper-parameters."""

    name: str = "adagrad"
    lr: float = 0.01
    eps: float = 1e-8
    betas: tuple[float, float] = (0.9, 0.999)
    momentum: float = 0.0

    def __post_init__(self) -> None:
        if self.name not in DENSE_OPTIMIZERS:
            raise ValueError(
                f"unknown dense optimizer {self.name!r}; one of {list(DENSE_OPTIMIZERS)}"
            )
        if self.lr <= 0:
            raise ValueError(f"dense optimizer lr must be > 0, got {self.lr}")

    def build(self, params: Iterable[torch.nn.Parameter]) -> torch.optim.Optimizer:
        params = list(params)
        if self.name == "sgd":
            return torch.optim.SGD(params, lr=self.lr, momentum=self.momentum, foreach=True)
        if self.name == "adagrad":
            return torch.optim.Adagrad(params, lr=self.lr, eps=self.eps, fused=True)
        return torch.optim.Adam(params, lr=self.lr, betas=self.betas, eps=self.eps, fused=True)
