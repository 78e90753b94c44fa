"""Eviction by days of continual training (`Eviction.ttl_days`), on a hash shard's state.

Continual training runs one job a day, each resumed from the previous day's end state. A
hash shard's state (`HashEmbeddingShard.state_dict`) holds each row's `last_seen` (the shard
clock at its last sight) and the shard's `clock`; `new_day` starts a day on it: the clock
moves one past every sighting so far (as `mark` does) and is recorded in `day_starts` (the
clock at the start of day 1, 2, ...; day 0 starts before any sighting, and a state without
`day_starts` has started no day yet), and the rows last seen before the start of the oldest
of the `ttl_days` days just trained go, counted in `counters["evicted"]` by table (a key's
top byte). The shard keeps `day_starts` through its checkpoints and deltas.
"""

from __future__ import annotations

from typing import Any

import torch

DAY_STARTS = "day_starts"
ROW_FIELDS = ("keys", "weight", "versions", "last_seen")
NUM_TABLES = 256


def day_starts(state: dict[str, Any]) -> torch.Tensor:
    """The shard clock at the start of each day after the first (empty: none started)."""
    starts = state.get(DAY_STARTS)
    return torch.zeros(0, dtype=torch.int64) if starts is None else starts


def new_day(state: dict[str, Any], ttl_days: int) -> dict[str, Any]:
    """`state` at the start of a new day: its start recorded, and the rows not seen in the
    last `ttl_days` days (those last seen before the oldest of them started) evicted."""
    if ttl_days < 1:
        raise ValueError(f"ttl_days must be >= 1, got {ttl_days}")
    clock = int(state["clock"]) + 1
    starts = torch.cat([day_starts(state), torch.tensor([clock], dtype=torch.int64)])
    # starts[-1] is the new day's; starts[-1 - ttl_days] the oldest kept day's (day 0's, at
    # the beginning of time, is not in the list: with fewer days, no row is old enough)
    out = {**state, "clock": clock, DAY_STARTS: starts}
    if starts.numel() <= ttl_days:
        return out
    oldest = int(starts[-1 - ttl_days])
    keep = state["last_seen"].to(torch.int64) >= oldest
    if bool(keep.all()):
        return out
    gone = state["keys"][~keep]
    evicted = torch.bincount((gone >> 56) & 0xFF, minlength=NUM_TABLES)
    counters = dict(state["counters"])
    counters["evicted"] = counters["evicted"] + evicted.to(counters["evicted"].dtype)
    out.update({name: state[name][keep] for name in ROW_FIELDS})
    out["optimizer"] = {name: value[keep] for name, value in state["optimizer"].items()}
    out["counters"] = counters
    return out
