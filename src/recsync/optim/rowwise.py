"""Row-wise optimizers for embedding rows, applied in place to the rows a batch touched.

Each optimizer keeps its state beside the rows (one entry per row) and updates only the
given unique rows. SWAP (Liu & Zhao) decays the second-moment accumulator by lambda0 at every
multiple of `period` global steps; a row untouched for several periods catches up lazily with
lambda0 ** (periods missed) the next time it is updated, which equals decaying every row at
every period boundary.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from recsync.optim.swap import Swap


class RowOptimizer:
    """Base class: `apply(weight, rows, grads, global_step)` updates weight[rows] in place.

    rows: U unique int64 row indices; grads: U x D. `global_step` counts the updates the
    owning shard has applied before this one (SWAP and Adam's bias correction use it).
    """

    def __init__(self, num_rows: int, dim: int, swap: Swap | None = None):
        self.num_rows = num_rows
        self.dim = dim
        self.swap = swap
        self.last_period = torch.zeros(num_rows, dtype=torch.int64) if swap else None

    def apply(
        self,
        weight: torch.Tensor,
        rows: torch.Tensor,
        grads: torch.Tensor,
        global_step: int,
        lr_scale: float = 1.0,
    ) -> None:
        """Update the touched `rows` of `weight` by their U x D `grads`; `lr_scale` multiplies
        the learning rate (PSP's linear scaling)."""
        raise NotImplementedError

    def state_dict(self) -> dict[str, torch.Tensor]:
        return {"last_period": self.last_period} if self.last_period is not None else {}

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        for name, value in state.items():
            getattr(self, name).copy_(value)

    def initial_value(self, name: str) -> float:
        """The value every entry of per-row state `name` starts from."""
        return 0.0

    def resize(self, num_rows: int) -> None:
        """Grow every per-row state tensor to `num_rows` rows, new rows at their initial value."""
        assert num_rows >= self.num_rows
        for name, old in self.state_dict().items():
            new = old.new_full((num_rows, *old.shape[1:]), self.initial_value(name))
            new[: self.num_rows] = old
            setattr(self, name, new)
        self.num_rows = num_rows

    def reset_rows(self, rows: torch.Tensor) -> None:
        """Put the state of `rows` (slots about to hold new rows) back to its initial value."""
        for name, state in self.state_dict().items():
            state.index_fill_(0, rows, self.initial_value(name))

    def _swap_factor(self, rows: torch.Tensor, global_step: int) -> torch.Tensor | None:
        """U x 1 decay to apply to the touched rows' accumulators before adding g^2."""
        if self.swap is None:
            return None
        assert self.last_period is not None  # kept whenever SWAP is on
        period = global_step // self.swap.period
        missed = period - self.last_period.index_select(0, rows)
        self.last_period.index_fill_(0, rows, period)
        return torch.pow(self.swap.decay, missed.to(torch.float64)).to(torch.float32).unsqueeze(1)


class RowSGD(RowOptimizer):
    """w <- w - lr * g."""

    def __init__(self, num_rows: int, dim: int, lr: float, swap: Swap | None = None):
        if swap is not None:
            raise ValueError("swap needs an accumulator; sgd keeps none (use adagrad or adam)")
        super().__init__(num_rows, dim)
        self.lr = lr

    def apply(
        self,
        weight: torch.Tensor,
        rows: torch.Tensor,
        grads: torch.Tensor,
        global_step: int,
        lr_scale: float = 1.0,
    ) -> None:
        weight.index_add_(0, rows, grads, alpha=-self.lr * lr_scale)


class RowAdagrad(RowOptimizer):
    """Adagrad as torch.optim.Adagrad computes it, restricted to the touched rows.

    rowwise=False: one accumulator per element (exact Adagrad).
    rowwise=True: one accumulator per row, v += mean(g^2) over the row (FBGEMM convention).
    """

    def __init__(
        self,
        num_rows: int,
        dim: int,
        lr: float,
        eps: float = 1e-10,
        initial_accumulator: float = 0.0,
        rowwise: bool = False,
        swap: Swap | None = None,
    ):
        super().__init__(num_rows, dim, swap)
        self.lr = lr
        self.eps = eps
        self.rowwise = rowwise
        self.initial_accumulator = initial_accumulator
        self.accumulator = torch.full((num_rows, 1 if rowwise else dim), initial_accumulator)

    def apply(
        self,
        weight: torch.Tensor,
        rows: torch.Tensor,
        grads: torch.Tensor,
        global_step: int,
        lr_scale: float = 1.0,
    ) -> None:
        acc = self.accumulator.index_select(0, rows)
        factor = self._swap_factor(rows, global_step)
        if factor is not None:
            acc.mul_(factor)
        if self.rowwise:
            acc.add_(grads.pow(2).mean(dim=1, keepdim=True))
        else:
            acc.addcmul_(grads, grads)
        self.accumulator.index_copy_(0, rows, acc)
        step = grads / acc.sqrt_().add_(self.eps)
        weight.index_add_(0, rows, step, alpha=-self.lr * lr_scale)

    def state_dict(self) -> dict[str, torch.Tensor]:
        return {**super().state_dict(), "accumulator": self.accumulator}

    def initial_value(self, name: str) -> float:
        return self.initial_accumulator if name == "accumulator" else 0.0


class RowAdam(RowOptimizer):
    """Lazy Adam as torch.optim.SparseAdam computes it: moments of touched rows only,
    bias correction by the number of updates the shard has applied."""

    def __init__(
        self,
        num_rows: int,
        dim: int,
        lr: float,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        swap: Swap | None = None,
    ):
        super().__init__(num_rows, dim, swap)
        self.lr = lr
        self.beta1, self.beta2 = betas
        self.eps = eps
        self.exp_avg = torch.zeros(num_rows, dim)
        self.exp_avg_sq = torch.zeros(num_rows, dim)

    def apply(
        self,
        weight: torch.Tensor,
        rows: torch.Tensor,
        grads: torch.Tensor,
        global_step: int,
        lr_scale: float = 1.0,
    ) -> None:
        step = global_step + 1
        m = self.exp_avg.index_select(0, rows)
        v = self.exp_avg_sq.index_select(0, rows)
        factor = self._swap_factor(rows, global_step)
        if factor is not None:
            v.mul_(factor)
        m.mul_(self.beta1).add_(grads, alpha=1 - self.beta1)
        v.mul_(self.beta2).addcmul_(grads, grads, value=1 - self.beta2)
        self.exp_avg.index_copy_(0, rows, m)
        self.exp_avg_sq.index_copy_(0, rows, v)
        step_size = self.lr * (1 - self.beta2**step) ** 0.5 / (1 - self.beta1**step)
        denom = v.sqrt_().add_(self.eps)
        weight.index_add_(0, rows, m / denom, alpha=-step_size * lr_scale)

    def state_dict(self) -> dict[str, torch.Tensor]:
        return {**super().state_dict(), "exp_avg": self.exp_avg, "exp_avg_sq": self.exp_avg_sq}


ROW_OPTIMIZERS = ("sgd", "adagrad", "rowwise_adagrad", "adam")


@dataclass(frozen=True)
class RowOptimizerSpec:
    """Which row-wise optimizer a table shard uses, and its hyper-parameters."""

    name: str = field(
        default="adagrad",
        metadata={
            "doc": "The optimizer (rowwise_adagrad: one accumulator a row).",
            "values": list(ROW_OPTIMIZERS),
        },
    )
    lr: float = field(default=0.05, metadata={"doc": "The learning rate.", "values": "> 0"})
    eps: float = field(
        default=1e-8,
        metadata={"doc": "Added to the denominator (adagrad, rowwise_adagrad, adam)."},
    )
    initial_accumulator: float = field(
        default=0.0,
        metadata={"doc": "The starting value of adagrad's accumulator (adagrad, rowwise_adagrad)."},
    )
    betas: tuple[float, float] = field(
        default=(0.9, 0.999),
        metadata={"doc": "Adam's decay rates of the first and second moments."},
    )
    swap: Swap | None = field(
        default=None,
        metadata={
            "doc": "SWAP: decay the accumulator periodically (adagrad, rowwise_adagrad, adam).",
            "unset": "off",
        },
    )

    def __post_init__(self) -> None:
        if self.name not in ROW_OPTIMIZERS:
            raise ValueError(
                f"unknown sparse optimizer {self.name!r}; one of {sorted(ROW_OPTIMIZERS)}"
            )
        if self.lr <= 0:
            raise ValueError(f"sparse optimizer lr must be > 0, got {self.lr}")

    def build(self, num_rows: int, dim: int) -> RowOptimizer:
        if self.name == "sgd":
            return RowSGD(num_rows, dim, self.lr, swap=self.swap)
        if self.name in ("adagrad", "rowwise_adagrad"):
            return RowAdagrad(
                num_rows,
                dim,
                self.lr,
                eps=self.eps,
                initial_accumulator=self.initial_accumulator,
                rowwise=self.name == "rowwise_adagrad",
                swap=self.swap,
            )
        return RowAdam(num_rows, dim, self.lr, betas=self.betas, eps=self.eps, swap=self.swap)
