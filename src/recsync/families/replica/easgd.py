"""``easgd``: elastic averaging through a center variable on sync servers.

ShadowSync (Zheng et al. 2020, arXiv 2003.03477) Algorithm 2, after EASGD (Zhang et al.
2015). One sync of trainer i, per sync-server shard:

1. the trainer sends a snapshot of its replica slice, ``w_i``;
2. the server: ``w_ps <- (1-a) w_ps + a w_i`` (in place), and returns a copy of the new w_ps;
3. the trainer: ``w_i <- (1-a) w_i + a w_ps`` with that returned (already updated) w_ps,
   applied to its CURRENT replica, which the worker threads kept training meanwhile.

The interpolation is asymmetric (w_i and w_ps differ afterwards): both sides trust their own
copy, which the paper reports essential in the shadow setting. A round exchanges every
sync server's slice in turn (`EasgdConfig.round`).
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

import torch

from recsync.families.synced_replicas.messages import Center as CenterReply
from recsync.families.synced_replicas.messages import Exchange
from recsync.families.synced_replicas.strategy import (
    CenterStrategy,
    ElasticPull,
    ReplicaPolicy,
    Timing,
    check_flat_pair,
    check_fraction,
    snapshot,
)
from recsync.protocol.address import Address
from recsync.protocol.effects import Call


@dataclass(frozen=True)
class EasgdConfig(CenterStrategy):
    """EASGD: each trainer's dense replica and a center variable on the sync servers pull
    toward each other.

    The paper does not publish alpha's value; 0.1 matches EASGD's advice of a total pull
    ``beta = n * alpha`` about 0.9 for ~10 trainers."""

    alpha: float = field(
        default=0.1,
        metadata={
            "doc": "The elastic parameter: how far the replica and the center move toward "
            "each other at a sync.",
            "values": "(0, 1]",
        },
    )
    timing: Timing = field(
        default_factory=Timing,
        metadata={"doc": "When the replicas sync: shadow (background) or fixed rate."},
    )

    name: ClassVar[str] = "easgd"
    label: ClassVar[str] = "EASGD"

    def __post_init__(self) -> None:
        check_fraction("alpha", self.alpha)
        self._check_timing()

    def _params(self) -> str:
        return f"alpha={self.alpha:g}"

    def make_center(self, center_slice: torch.Tensor) -> EasgdCenter:
        return EasgdCenter(self, center_slice)

    def make_replica(self, initial: torch.Tensor | None = None) -> ElasticPull:
        return ElasticPull(self)

    def round(
        self,
        policy: ReplicaPolicy,
        replica: torch.Tensor,
        writer: torch.Tensor,
        centers: Sequence[Address],
        ranges: Sequence[tuple[int, int]],
    ) -> Generator[Call, CenterReply, None]:
        """Exchange each slice of the replica with its sync server in turn (Alg. 2): send a
        snapshot, fold the returned center into the current slice (through `writer`)."""
        for server, (start, stop) in zip(centers, ranges, strict=True):
            center = yield Call(server, Exchange(snapshot(replica[start:stop])))
            policy.apply(writer[start:stop], center.values)


class EasgdCenter:
    """Server side: one sync server's contiguous slice of the center variable w_ps (updated in
    place; initialize it with the same w_0 as the trainers, Alg. 1 line 3). The node serializes
    ``exchange`` calls on one slice."""

    def __init__(self, config: EasgdConfig, center_slice: torch.Tensor) -> None:
        if center_slice.dim() != 1 or not center_slice.is_floating_point():
            raise ValueError(
                "center_slice must be a flat (1-D) floating tensor, got shape "
                f"{tuple(center_slice.shape)} dtype {center_slice.dtype}"
            )
        self.config = config
        self.center = center_slice
        self.exchanges = 0

    def exchange(self, replica_slice: torch.Tensor) -> torch.Tensor:
        """``w_ps <- (1-a) w_ps + a w_i`` in place (Alg. 2 line 4); returns a copy of the new
        w_ps for the trainer's line 5."""
        check_flat_pair(self.center, replica_slice, "replica_slice")
        self.center.lerp_(replica_slice, self.config.alpha)
        self.exchanges += 1
        return self.center.clone()
