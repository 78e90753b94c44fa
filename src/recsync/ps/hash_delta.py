"""Incremental checkpoints of hash shards: what changed between two of a shard's states.

A hash shard's state (`HashEmbeddingShard.state_dict`) holds its live rows sorted by key,
each with the shard clock it was last seen at, and the shard's clock. Every change to a
row (an insert, an update, a reused slot) sets its `last_seen` to the clock of the
moment, and clocks only grow, so the rows that changed after a state `base` are among
those seen at or after `base["clock"]`; the rows of `base` missing from the new state were
evicted. A delta holds those rows whole, the evicted keys, and the shard's scalars,
sketch and counters (small beside the rows); applying it to `base` gives the new state
exactly.
"""

from __future__ import annotations

from typing import Any

import torch

ROW_FIELDS = ("keys", "weight", "versions", "last_seen")
EVICTED = "evicted"
SKETCH, SKETCH_CHANGES = "sketch", "sketch_changes"  # the admission sketch: changed cells


def is_hash_state(state: dict[str, Any]) -> bool:
    """A hash shard's state, or a grouped one's whose stores are hash shards."""
    groups = state.get("groups")
    if groups is not None:
        return all(is_hash_state(g) for g in groups)
    return "keys" in state and "clock" in state


def _rows(state: dict[str, Any], keep: torch.Tensor) -> dict[str, Any]:
    rows: dict[str, Any] = {name: state[name][keep] for name in ROW_FIELDS}
    rows["optimizer"] = {name: value[keep] for name, value in state["optimizer"].items()}
    return rows


def shard_delta(base: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """The rows of `new` changed since `base`, the keys evicted since, and `new`'s scalars
    (a grouped shard's: each store's)."""
    if "groups" in new:
        groups = [shard_delta(b, n) for b, n in zip(base["groups"], new["groups"], strict=True)]
        return {**new, "groups": groups}
    changed = new["last_seen"] >= int(base["clock"])
    evicted = base["keys"][~torch.isin(base["keys"], new["keys"])]
    scalars = {k: v for k, v in new.items() if k not in (*ROW_FIELDS, "optimizer", SKETCH)}
    cells = (new[SKETCH] != base[SKETCH]).flatten().nonzero().squeeze(1)
    sketch = (cells, new[SKETCH].flatten()[cells])
    return {**scalars, **_rows(new, changed), EVICTED: evicted, SKETCH_CHANGES: sketch}


def apply_shard_delta(base: dict[str, Any], delta: dict[str, Any]) -> dict[str, Any]:
    """`base` with `delta` applied: the state `shard_delta` was taken from."""
    if "groups" in delta:
        pairs = zip(base["groups"], delta["groups"], strict=True)
        return {**delta, "groups": [apply_shard_delta(b, d) for b, d in pairs]}
    replaced = torch.cat([delta[EVICTED], delta["keys"]])
    kept = _rows(base, ~torch.isin(base["keys"], replaced))
    rows = _rows(delta, torch.ones(delta["keys"].numel(), dtype=torch.bool))
    order = torch.argsort(torch.cat([kept["keys"], rows["keys"]]))
    merged: dict[str, Any] = {
        name: torch.cat([kept[name], rows[name]])[order] for name in ROW_FIELDS
    }
    merged["optimizer"] = {
        name: torch.cat([kept["optimizer"][name], rows["optimizer"][name]])[order]
        for name in rows["optimizer"]
    }
    skipped = (*ROW_FIELDS, "optimizer", EVICTED, SKETCH_CHANGES)
    scalars = {k: v for k, v in delta.items() if k not in skipped}
    cells, values = delta[SKETCH_CHANGES]
    sketch = base[SKETCH].clone()
    sketch.view(-1)[cells] = values
    return {**scalars, **merged, SKETCH: sketch}
