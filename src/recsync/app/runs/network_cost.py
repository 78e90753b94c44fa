"""`recsync calibrate --network`: the links between a Ray cluster's machines (the box's
hosts, or real machines), measured, into the cost profile's `[cost.machines]`, which
`simulate` and `advise` use to place a job's nodes on those machines and price what
crosses each link."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import ray

from recsync.app.runs.cost_profile import profile_text
from recsync.app.runs.reader_cost import base_profile
from recsync.runtime.ray.cluster import connect
from recsync.runtime.ray.link_probe import LinkMeasures, measure_links
from recsync.runtime.sim.cost import CostModel, Machines


def measured_machines(measured: LinkMeasures) -> Machines:
    """The simulator's machines of what was measured: each one's link rate, the latency a
    machine boundary adds, the machines' addresses (what `cluster.placement` pins name),
    and how unevenly concurrent flows share a link."""
    return Machines(
        tuple(measured.link_bytes_s()),
        measured.latency_s(),
        tuple(measured.addresses),
        measured.flow_spread(),
    )


def calibrate_network(
    address: str, out: Path, seconds: float = 1.0
) -> tuple[CostModel, LinkMeasures, bool]:
    """Measure the links of the cluster at `address` and write them into the profile at
    `out` (its other prices kept; the cost model's defaults where there is none yet): the
    profile, what was measured, and whether a profile was there before."""
    base = base_profile(out)
    started = connect(address, None)
    try:
        measured = measure_links(seconds)
    finally:
        if not started:
            ray.shutdown()
    cost = dataclasses.replace(base or CostModel(), machines=measured_machines(measured))
    out.write_text(profile_text(cost), encoding="utf-8")
    return cost, measured, base is not None
