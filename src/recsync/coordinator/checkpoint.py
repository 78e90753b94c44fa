"""A consistent snapshot of a job, taken when it is quiescent, and resumed under any strategy.

A job stops taking new batches once the reader reached its data limit (or the data ran
out); the batches already handed out finish (they were "in flight" when the stop came; none
is lost or repeated) and then the state is read: every embedding shard (rows, optimizer
state, per-row versions, global step), the dense parameters with their optimizer state,
the position in the training stream, and the global step; and what the job's family alone
needs to go on exactly (a hierarchical job's group PSs). A resumed job starts from it
under any strategy with the same hyper-parameters; its data stream starts at the position.
"""

from __future__ import annotations

import dataclasses
from dataclasses import asdict, dataclass
from typing import Any

import torch

from recsync.data.shares import StreamPosition
from recsync.ps.hash_delta import apply_shard_delta, is_hash_state, shard_delta
from recsync.ps.layout import TableLayout

FORMAT = 1


@dataclass
class JobState:
    """What a checkpoint holds (tensors are copies)."""

    dense: torch.Tensor
    dense_optimizer: dict[str, Any]
    shards: list[dict[str, Any]]
    slices: list[tuple[int, ...]]
    data_position: int
    global_step: int
    in_flight_examples: int
    strategy: str
    family_state: dict[str, Any] | None = None  # what its family alone resumes from
    # examples past `data_position` some readers had handed out (data/shares.py), as ranges
    data_beyond: list[tuple[int, int]] | None = None
    # what the positions count: None, the stream's examples (every checkpoint before line
    # shares); "slots/<L>", slots of line blocks of L lines (io/shared_text.py)
    data_unit: str | None = None

    def to_dict(self) -> dict[str, Any]:
        fields = asdict(self)
        if self.family_state is None:
            del fields["family_state"]  # a file as before families had state of their own
        if not self.data_beyond:
            del fields["data_beyond"]  # one reader's position: a prefix of the stream
        if self.data_unit is None:
            del fields["data_unit"]  # positions count examples, as before line shares
        return {"format": FORMAT, **fields}

    @classmethod
    def from_dict(cls, state: dict[str, Any]) -> JobState:
        if state.get("format") != FORMAT:
            raise ValueError(f"checkpoint format {state.get('format')!r}, expected {FORMAT}")
        fields = {k: v for k, v in state.items() if k != "format"}
        fields["slices"] = [tuple(s) for s in fields["slices"]]
        if fields.get("data_beyond"):
            fields["data_beyond"] = [(int(a), int(b)) for a, b in fields["data_beyond"]]
        return cls(**fields)

    def check_finite(self) -> None:
        """Every floating tensor it holds is finite (a diverged job's state is not resumed)."""
        parts = {
            "dense": self.dense,
            "dense_optimizer": self.dense_optimizer,
            "shards": self.shards,
            "family_state": self.family_state,
        }
        for name, value in _tensors(parts, ""):
            if value.is_floating_point() and not bool(torch.isfinite(value).all()):
                raise ValueError(f"{name} holds NaN or infinite values")

    @property
    def stream_position(self) -> StreamPosition:
        """The stream's units (examples, or slots: `data_unit`) consumed before the state
        was taken."""
        return StreamPosition(self.data_position, tuple(self.data_beyond or ()))

    def check_layout(self, layout: TableLayout) -> None:
        """The resumed job must place the tables on shards as the checkpointed one did."""
        if layout_slices(layout) != self.slices:
            raise ValueError(
                "checkpoint: its embedding layout (tables on "
                f"{len(self.shards)} shards) differs from this job's ({layout.num_shards} "
                "shards): resume with the same cluster.num_embedding_servers and tables"
            )

    def check_dense(self, num_params: int) -> None:
        if self.dense.numel() != num_params:
            raise ValueError(
                f"checkpoint: {self.dense.numel()} dense parameters, this model has {num_params}"
            )

    def optimizer_slice(self, start: int, stop: int) -> dict[str, Any]:
        """The dense optimizer state of parameters [start, stop) (a dense server's block)."""
        return {
            k: v[start:stop].clone() if isinstance(v, torch.Tensor) else v
            for k, v in self.dense_optimizer.items()
        }


def _tensors(value: Any, name: str) -> list[tuple[str, torch.Tensor]]:
    """The tensors inside nested dicts and lists, each with its path ("shards[0].weight")."""
    if isinstance(value, torch.Tensor):
        return [(name, value)]
    if isinstance(value, dict):
        items = [(f"{name}.{k}" if name else str(k), v) for k, v in value.items()]
    elif isinstance(value, list | tuple):
        items = [(f"{name}[{i}]", v) for i, v in enumerate(value)]
    else:
        return []
    return [found for key, item in items for found in _tensors(item, key)]


def layout_slices(layout: TableLayout) -> list[tuple[int, ...]]:
    return layout.signature()


def state_delta(base: JobState, new: JobState) -> JobState | None:
    """`new` with each hash shard's state cut to what changed since `base` (hash_delta.py);
    None when a shard is not a hash shard (a fixed table's checkpoint is whole)."""
    if not all(is_hash_state(s) for s in (*base.shards, *new.shards)):
        return None
    shards = [shard_delta(b, n) for b, n in zip(base.shards, new.shards, strict=True)]
    return dataclasses.replace(new, shards=shards)


def apply_state_delta(base: JobState, delta: JobState) -> JobState:
    """The state `delta` was taken from (`state_delta(base, state)`)."""
    shards = [apply_shard_delta(b, d) for b, d in zip(base.shards, delta.shards, strict=True)]
    return dataclasses.replace(delta, shards=shards)
