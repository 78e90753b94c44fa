"""SWAP (Liu & Zhao, AAAI 2021, Algorithm 2): the second-moment accumulator of an adaptive
optimizer is multiplied by lambda0 at every multiple of `period` global steps, so the samples
of older periods weigh less than new ones (v_t = lambda_t v_{t-1} + g_t^2, lambda_t = lambda0
when t mod T = 0, else 1). The embedding rows' optimizers (`rowwise`) and the dense one
(`dense`) both take it.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Swap:
    """SWAP: the optimizer's second-moment accumulator decays at every multiple of a period
    of global steps, so older gradients weigh less (adagrad, rowwise_adagrad, adam).

    v <- lambda_t v + g^2, lambda_t = decay at multiples of period, else 1."""

    decay: float = field(
        metadata={
            "doc": "The factor the accumulator is multiplied by at each period's end.",
            "values": "(0, 1]",
        }
    )
    period: int = field(metadata={"doc": "The global steps between two decays.", "values": ">= 1"})

    def __post_init__(self) -> None:
        if not 0.0 < self.decay <= 1.0:
            raise ValueError(f"swap.decay must be in (0, 1], got {self.decay}")
        if self.period < 1:
            raise ValueError(f"swap.period must be >= 1, got {self.period}")

    def decays_at(self, global_step: int) -> bool:
        """Whether the update numbered `global_step` (0-based) decays the accumulator first."""
        return global_step > 0 and global_step % self.period == 0
