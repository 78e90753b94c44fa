"""Optimizers of the dense part, on one flat parameter vector (SGD, Adagrad, Adam).

Adagrad and Adam take SWAP (`optim.swap`): the update counter is the global step.

The dense replica keeps all its parameters as views into one flat vector, so one update is
a handful of vector operations, several worker threads can apply theirs lock-free (Hogwild),
and sync strategies average whole replicas at once. The formulas are torch.optim's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from recsync.model.priced import is_priced
from recsync.optim.swap import Swap

DENSE_OPTIMIZERS = ("sgd", "adagrad", "adam")


@dataclass(frozen=True)
class DenseOptimizerSpec:
    """Which optimizer updates the dense parameters, and its hyper-parameters."""

    name: str = field(
        default="adagrad",
        metadata={"doc": "The optimizer.", "values": list(DENSE_OPTIMIZERS)},
    )
    lr: float = field(default=0.01, metadata={"doc": "The learning rate.", "values": "> 0"})
    eps: float = field(default=1e-8, metadata={"doc": "Added to the denominator (adagrad, adam)."})
    betas: tuple[float, float] = field(
        default=(0.9, 0.999),
        metadata={"doc": "Adam's decay rates of the first and second moments."},
    )
    momentum: float = field(
        default=0.0, metadata={"doc": "SGD's momentum (0: none).", "values": "[0, 1)"}
    )
    swap: Swap | None = field(
        default=None,
        metadata={
            "doc": "SWAP: decay the accumulator periodically (adagrad or adam).",
            "unset": "off",
        },
    )

    def __post_init__(self) -> None:
        if self.name not in DENSE_OPTIMIZERS:
            raise ValueError(
                f"unknown dense optimizer {self.name!r}; one of {list(DENSE_OPTIMIZERS)}"
            )
        if self.lr <= 0:
            raise ValueError(f"dense optimizer lr must be > 0, got {self.lr}")
        if not 0.0 <= self.momentum < 1.0:
            raise ValueError(f"dense optimizer momentum must be in [0, 1), got {self.momentum}")
        if self.swap is not None and self.name == "sgd":
            raise ValueError(
                "dense optimizer swap needs an accumulator; sgd keeps none (use adagrad or adam)"
            )

    def build(self, num_params: int) -> FlatOptimizer:
        return FlatOptimizer(self, num_params)


class FlatOptimizer:
    """Applies `step(params, grad)` in place on a flat P-vector (or `updated`: into a new
    one); state sits beside it.

    Lock-free: concurrent callers of `step` may interleave (Hogwild); the state is then
    approximate, as in the Hogwild papers. `updated` is for one caller at a time (a server,
    under its lock): it keeps its denominator in a scratch vector of its own, so a server's
    update does not allocate (and miss the cache on) a fresh P-vector every time.
    """

    def __init__(self, spec: DenseOptimizerSpec, num_params: int):
        self.spec = spec
        self.counter = torch.zeros(1, dtype=torch.float64)  # steps taken, as shareable memory
        self.state: dict[str, torch.Tensor] = {}
        self._denom: torch.Tensor | None = None  # `updated`'s scratch
        if spec.name == "adagrad":
            self.state["sum"] = torch.zeros(num_params)
        elif spec.name == "adam":
            self.state["exp_avg"] = torch.zeros(num_params)
            self.state["exp_avg_sq"] = torch.zeros(num_params)
        elif spec.momentum:
            self.state["momentum"] = torch.zeros(num_params)

    def step(self, params: torch.Tensor, grad: torch.Tensor, lr_scale: float = 1.0) -> None:
        """One update in place; ``lr_scale`` multiplies the learning rate (PSP's linear
        scaling)."""
        self._update(params, grad, lr_scale, in_place=True)

    def updated(
        self, params: torch.Tensor, grad: torch.Tensor, lr_scale: float = 1.0
    ) -> torch.Tensor:
        """One update into a new vector; `params` keeps its values (a server can hand its
        values out without copying them: it never writes to them again)."""
        return self._update(params, grad, lr_scale, in_place=False)

    def _update(
        self, params: torch.Tensor, grad: torch.Tensor, lr_scale: float, in_place: bool
    ) -> torch.Tensor:
        spec = self.spec
        if spec.swap is not None and spec.swap.decays_at(self.steps):
            self.state["sum" if spec.name == "adagrad" else "exp_avg_sq"].mul_(spec.swap.decay)
        self.counter += 1
        if is_priced(params):  # priced math: no values to update (the steps still count)
            return params
        lr = spec.lr * lr_scale
        if spec.name == "sgd":
            if spec.momentum:
                buf = self.state["momentum"]
                buf.mul_(spec.momentum).add_(grad)
                grad = buf
            return params.add_(grad, alpha=-lr) if in_place else params.add(grad, alpha=-lr)
        scratch = None if in_place else self._scratch(params)  # where the denominator goes
        if spec.name == "adagrad":
            acc = self.state["sum"]
            acc.addcmul_(grad, grad)
            step, value = grad, -lr
            denom = torch.sqrt(acc, out=scratch).add_(spec.eps)
        else:
            beta1, beta2 = spec.betas
            m, v = self.state["exp_avg"], self.state["exp_avg_sq"]
            m.lerp_(grad, 1 - beta1)
            v.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
            steps = self.steps
            bias1 = 1 - beta1**steps
            bias2_sqrt = (1 - beta2**steps) ** 0.5
            step, value = m, -lr / bias1
            denom = torch.sqrt(v, out=scratch).div_(bias2_sqrt).add_(spec.eps)
        if in_place:
            return params.addcdiv_(step, denom, value=value)
        return torch.addcdiv(params, step, denom, value=value)

    @property
    def steps(self) -> int:
        return int(self.counter[0])

    def tensors(self) -> dict[str, torch.Tensor]:
        """Every tensor of its state (the step counter included), by name."""
        return {"steps": self.counter, **self.state}

    def rebind(self, tensors: dict[str, torch.Tensor]) -> None:
        """Keep its state in `tensors` (same names, shapes and values as `tensors()`'s)."""
        self.counter = tensors["steps"]
        self.state = {name: tensors[name] for name in self.state}

    def _scratch(self, params: torch.Tensor) -> torch.Tensor:
        if self._denom is None:
            self._denom = torch.empty_like(params)
        return self._denom

    def state_dict(self) -> dict[str, Any]:
        return {"steps": self.steps, **self.state}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.counter.fill_(int(state["steps"]))
        for name, value in self.state.items():
            value.copy_(state[name])
