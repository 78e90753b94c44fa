"""``bmuf``: blockwise model-update filtering over an all-reduce, no sync servers.

ShadowSync (Zheng et al. 2020, arXiv 2003.03477) Algorithm 4, after BMUF (Chen & Huo 2016),
with block momentum and Nesterov in the convention of fairseq's ``bmuf.py``. Every trainer
keeps the global model w_g (initialized to w_0, the same on every trainer) and a velocity v
(zeros). One sync of trainer i:

1. ``w_c <- allreduce(snapshot of w_i) / n`` (the driver runs the all-reduce);
2. ``d <- w_c - w_g`` (the descent direction, a surrogate gradient);
3. ``v <- mu v + eta_b d``;
4. ``w_g <- w_g + v``, and with Nesterov additionally ``w_g <- w_g + mu v``;
5. ``w_i <- (1-a) w_i + a w_g`` on the CURRENT replica.

fairseq writes the same thing with the opposite sign (``grad = w_g - w_c``,
``smoothed = mu smoothed + eta_b grad``, ``w_g <- w_g - smoothed [- mu smoothed]``), so
``v = -smoothed``. With Nesterov the STORED w_g is the look-ahead model: the next round's d is
measured from it, and it is what the replicas are pulled toward. Since all trainers see the
same average and start from the same w_0, their w_g and v stay identical.

With ``block_momentum = 0`` and ``block_lr = 1``, ``w_g`` is exactly the average and BMUF is
MA with the same alpha (then ``w_g`` is set to the average by a copy, bit for bit).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import ClassVar

import torch

from recsync.families.synced_replicas.strategy import (
    CollectiveStrategy,
    Timing,
    check_flat_pair,
    check_fraction,
)


@dataclass(frozen=True)
class BmufConfig(CollectiveStrategy):
    """BMUF: the trainers' average over an all-reduce moves a global model with block
    momentum, each replica pulled toward it.

    alpha defaults to 0.1, as S-EASGD and S-MA (the paper also tries a larger one for
    S-BMUF); block_lr 1 as in fairseq."""

    alpha: float = field(
        default=0.1,
        metadata={
            "doc": "The elastic parameter: how far a replica moves toward the global model "
            "at a sync.",
            "values": "(0, 1]",
        },
    )
    block_lr: float = field(
        default=1.0,
        metadata={
            "doc": "The block learning rate eta_b: the step along the average's move.",
            "values": "> 0",
        },
    )
    block_momentum: float = field(
        default=0.0,
        metadata={"doc": "The block momentum mu of the global model's moves.", "values": "[0, 1)"},
    )
    nesterov: bool = field(
        default=False,
        metadata={"doc": "Nesterov momentum: the global model kept as the look-ahead one."},
    )
    timing: Timing = field(
        default_factory=Timing,
        metadata={"doc": "When the replicas sync: shadow (background) or fixed rate."},
    )

    name: ClassVar[str] = "bmuf"
    label: ClassVar[str] = "BMUF"

    def __post_init__(self) -> None:
        check_fraction("alpha", self.alpha)
        lr = self.block_lr
        if not _is_real(lr) or not math.isfinite(lr) or lr <= 0:
            raise ValueError(f"block_lr must be a finite number > 0, got {lr!r}")
        mu = self.block_momentum
        if not _is_real(mu) or not 0 <= mu < 1:
            raise ValueError(f"block_momentum must be a number in [0, 1), got {mu!r}")
        if not isinstance(self.nesterov, bool):
            raise ValueError(f"nesterov must be a bool, got {self.nesterov!r}")
        self._check_timing()

    def _params(self) -> str:
        text = (
            f"alpha={self.alpha:g} block_lr={self.block_lr:g} "
            f"block_momentum={self.block_momentum:g}"
        )
        return text + " nesterov" if self.nesterov else text

    def make_replica(self, initial: torch.Tensor) -> BmufReplica:
        return BmufReplica(self, initial)


def _is_real(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


class BmufReplica:
    """Trainer side of Alg. 4: holds w_g (``global_model``) and v (``velocity``)."""

    def __init__(self, config: BmufConfig, initial: torch.Tensor) -> None:
        if initial.dim() != 1 or not initial.is_floating_point():
            raise ValueError(
                "initial must be a flat (1-D) floating tensor, got shape "
                f"{tuple(initial.shape)} dtype {initial.dtype}"
            )
        self.config = config
        self.global_model = initial.detach().clone()
        self.velocity = torch.zeros_like(self.global_model)
        self.rounds = 0

    def apply(self, replica: torch.Tensor, average: torch.Tensor) -> None:
        """One BMUF round (module docstring, steps 2-5) in place: updates v and w_g from
        ``average`` = allreduce(w_i)/n, then pulls the current replica toward w_g."""
        check_flat_pair(replica, average, "average")
        check_flat_pair(self.global_model, average, "average")
        mu, lr = self.config.block_momentum, self.config.block_lr
        w_g, v = self.global_model, self.velocity
        if mu == 0 and lr == 1:
            torch.sub(average, w_g, out=v)  # v = d
            w_g.copy_(average)  # w_g + d, exactly
        else:
            d = average - w_g
            v.mul_(mu).add_(d, alpha=lr)
            w_g.add_(v)
            if self.config.nesterov:
                w_g.add_(v, alpha=mu)
        replica.lerp_(w_g, self.config.alpha)
        self.rounds += 1

    def state_dict(self) -> dict[str, torch.Tensor]:
        """Copies of w_g and v, for checkpoints."""
        return {"global_model": self.global_model.clone(), "velocity": self.velocity.clone()}

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        for key in ("global_model", "velocity"):
            check_flat_pair(self.global_model, state[key], key)
        self.global_model.copy_(state["global_model"])
        self.velocity.copy_(state["velocity"])
