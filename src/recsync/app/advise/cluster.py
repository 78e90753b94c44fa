"""`recsync advise --cluster FILE`: the cluster file's schema, the machine presets, and the
cost model a cluster's machines give the simulator.

A cluster file (TOML)::

    [machines]
    count = 8            # machines
    cores = 16           # cores each
    nic_gbps = 10.0      # each machine's network card, gigabits/s
    latency_us = 50.0    # one message's latency, microseconds
    shared = false       # true: the machines share `cores` (one machine, or namespaces of one)
    preset = "xeon-16core"          # a named machine (PRESETS), or
    # profile = "cost_profile.toml" # one `recsync calibrate` measured

    [grid]               # optional: the counts tried (default: the job's and twice them)
    trainers = [2, 4]
    embedding_servers = [2, 4]
    dense_servers = [1]  # servers holding the dense part (cluster.num_dense_servers)
    readers = [1, 2]     # reader nodes (default: the job's own)

    [[condition]]        # each measured besides the clean cluster
    name = "stragglers"
    kind = "stragglers"
    fraction = 0.25      # of the worker threads
    slowdown = 3.0

    [[condition]]
    name = "slow server"
    kind = "slow_server"
    role = "embedding"   # or "dense": the server holding the dense part
    slowdown = 4.0

Every node of a job gets cores of its own on the cluster (`CostModel.shared_cpus = 0`):
the machine's CPU prices are the preset's (or the profile's), its network the file's
`nic_gbps` and `latency_us` (a calibrated profile's network is one machine's loopback).
A `shared` machine is the other case, one machine running every node (a development box,
one big server): its nodes queue for its `cores` (`shared_cpus = cores`, and a profile's
`process_idle_cpus` and loopback network kept), so a job may take more cores than it has.
Several `shared` machines are hosts of one machine that share its cores but not their
links (the multi-host box): their profile names them (`[cost.machines]`, as `recsync
calibrate --network` measures them), and the job's nodes are placed on them as the engine
places them. A profile that names machines always gives the links between them (the
file's `nic_gbps` and `latency_us` are then not used); it must name `count` of them.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, ValidationError, field_validator, model_validator

from recsync.app.config.base import Section
from recsync.app.config.load import read_toml_file, validation_message
from recsync.app.runs.cost_profile import profile_cost, read_profile
from recsync.errors import ConfigError
from recsync.runtime.sim.cost import CostModel, Stragglers

# Named machines: a CostModel's CPU prices, each with where its numbers come from. The
# network (bandwidth_bytes_s, latency_s) is the cluster file's, never the preset's.
PRESETS: dict[str, tuple[dict[str, float], str]] = {
    "default": (
        {},
        "the simulator's own defaults (runtime/sim/cost.py: 20 GFLOP/s a worker thread, "
        "50 us a server request, 20 ns an embedding row); loosely a 2-core machine's",
    ),
    "dev-2core": (
        {
            "worker_flops": 2.9968e10,
            "apply_share": 0.0940,
            "row_s": 3.135e-8,
            "hash_row_s": 6.17e-9,
            "element_s": 7.65e-10,
            "reader_batch_s": 1.621e-3,
            "request_s": 0.0,
            "message_cpu_s": 1.170e-5,
            "server_message_cpu_s": 2.076e-4,
            "byte_cpu_s": 0.0,
            "server_byte_cpu_s": 1.037e-9,
            "process_idle_cpus": 1.164e-2,  # counts only on a shared machine
        },
        "`recsync calibrate` on a 2-core machine shared with other work, 2026-11 "
        "(reports/reader_cost/results.json, its cost_profile)",
    ),
    "xeon-16core": (
        {
            # 746,545,152 dense FLOPs a batch of the default job / 11.37 ms measured alone,
            # times the engine's worker speed factor 0.727
            "worker_flops": 4.773e10,
            "apply_share": 0.1105,
            "row_s": 2.847e-8,
            "element_s": 1.087e-9,
            "reader_batch_s": 1.550e-3,
            "request_s": 0.0,
            "message_cpu_s": 1.170e-4,
            "server_message_cpu_s": 3.246e-4,
            "byte_cpu_s": 2.148e-10,
            "server_byte_cpu_s": 6.739e-10,
        },
        "`recsync calibrate`'s measures on a 16-core machine, 2026-11-28 "
        "(reports/scaling_16cores/2026-11-28_0a88502_trainers_simulated.jsonl, its "
        "calibration: worker_s, job_* message and byte prices)",
    ),
}


class MachinesSection(Section):
    """[machines]: how many machines, their cores and network card, and their CPU prices."""

    count: int = Field(ge=1, description="Machines.")
    cores: int = Field(ge=1, description="Cores of each machine.")
    nic_gbps: float = Field(
        default=10.0,
        gt=0,
        description="Each machine's network card, gigabits/s (not used where the profile "
        "names machines).",
    )
    latency_us: float = Field(
        default=50.0,
        ge=0,
        description="One message's latency between machines, microseconds (not used where "
        "the profile names machines).",
    )
    shared: bool = Field(
        default=False,
        description="The machines share `cores`: one machine, or hosts of one (then the "
        "profile names them); the job's nodes queue for its cores.",
    )
    preset: str | None = Field(
        default=None,
        description="A named machine whose CPU prices are used (or give profile).",
        json_schema_extra={"unset": '"default", unless profile is given', "values": list(PRESETS)},
    )
    profile: str | None = Field(
        default=None,
        description="A cost profile `recsync calibrate` wrote, whose CPU prices are used, "
        "relative to the cluster file.",
        json_schema_extra={"unset": "the preset's prices"},
    )

    @field_validator("preset")
    @classmethod
    def _known_preset(cls, preset: str | None) -> str | None:
        if preset is not None and preset not in PRESETS:
            raise ValueError(f"unknown preset {preset!r}; known: {sorted(PRESETS)}")
        return preset

    @model_validator(mode="after")
    def _one_price_source(self) -> MachinesSection:
        if self.preset is not None and self.profile is not None:
            raise ValueError("give either machines.preset or machines.profile, not both")
        if self.shared and self.count != 1 and self.profile is None:
            raise ValueError(
                f"machines.shared with machines.count = {self.count}: hosts sharing one "
                "machine's cores need a profile naming them (machines.profile, its "
                "[cost.machines] as `recsync calibrate --network` writes it)"
            )
        return self


class GridSection(Section):
    """[grid]: the counts of each role tried; every combination is a candidate."""

    trainers: list[Annotated[int, Field(ge=1)]] | None = Field(
        default=None,
        description="Trainer counts tried.",
        json_schema_extra={"unset": "the job's cluster.num_trainers and twice it"},
    )
    embedding_servers: list[Annotated[int, Field(ge=1)]] | None = Field(
        default=None,
        description="Embedding server counts tried.",
        json_schema_extra={"unset": "the job's cluster.num_embedding_servers and twice it"},
    )
    dense_servers: list[Annotated[int, Field(ge=1)]] | None = Field(
        default=None,
        description="Counts tried of the servers holding the dense part "
        "(cluster.num_dense_servers: dense, sync or each group's group servers; strategies "
        "whose trainers hold the dense part ignore it).",
        json_schema_extra={"unset": "the job's cluster.num_dense_servers"},
    )
    readers: list[Annotated[int, Field(ge=1)]] | None = Field(
        default=None,
        description="Reader node counts tried.",
        json_schema_extra={"unset": "the job's own: cluster.num_readers, or its default rule"},
    )


class StragglersCondition(Section):
    """A condition: some worker threads compute slower."""

    name: str = Field(description='The condition\'s name in the report; unique, not "clean".')
    kind: Literal["stragglers"] = Field(description="Stragglers.")
    fraction: float = Field(gt=0, le=1, description="The share of worker threads that are slow.")
    slowdown: float = Field(gt=1, description="How many times slower a slow thread computes.")
    period_s: float = Field(
        default=0.0,
        ge=0,
        description="Draw the slow threads anew every this many seconds (0: the same ones "
        "throughout).",
    )


class SlowServerCondition(Section):
    """A condition: the first server of a role answers slower (`cluster.server_slowdown`)."""

    name: str = Field(description='The condition\'s name in the report; unique, not "clean".')
    kind: Literal["slow_server"] = Field(description="A slow server.")
    role: Literal["embedding", "dense"] = Field(
        default="embedding",
        description="embedding: embedding server 0; dense: the server holding the dense part "
        "(EASGD's sync server, a gradient strategy's dense server, a group server).",
    )
    slowdown: float = Field(gt=1, description="How many times slower the server answers.")


Condition = Annotated[StragglersCondition | SlowServerCondition, Field(discriminator="kind")]
CLEAN = "clean"  # the condition every candidate is measured in: no straggler, no slow server


class ClusterFile(Section):
    """A whole cluster file: [machines], [grid] and the [[condition]]s to test."""

    machines: MachinesSection = Field(description="The machines and their prices.")
    grid: GridSection = Field(
        default_factory=GridSection, description="The counts of each role tried."
    )
    condition: list[Condition] = Field(
        default=[],
        description="Conditions each candidate is measured in besides the clean cluster.",
    )

    @model_validator(mode="after")
    def _names_unique(self) -> ClusterFile:
        names = [c.name for c in self.condition]
        if CLEAN in names or len(set(names)) != len(names):
            raise ValueError(
                f"condition names must differ from each other and from {CLEAN!r}, got {names}"
            )
        return self

    @property
    def total_cores(self) -> int:
        return self.machines.count * self.machines.cores

    def base_cost(self, base_dir: Path | None = None) -> CostModel:
        """The cost model of a node of this cluster, in the clean condition: the preset's
        (or the profile's) CPU prices, the file's network, every node on cores of its own
        (a shared machine: every node on its cores, a profile's loopback network)."""
        m = self.machines
        if m.profile is not None:
            path = Path(m.profile)
            if base_dir is not None and not path.is_absolute():
                path = base_dir / path
            try:
                cost = profile_cost(read_profile(path), f"machines.profile {m.profile}")
            except ConfigError as error:
                raise ConfigError(f"machines.profile: {error}") from None
            named = cost.machines.count
            if (named or (m.shared and m.count != 1)) and named != m.count:
                raise ConfigError(
                    f"machines.profile {m.profile} names {named} machines ([cost.machines]), "
                    f"machines.count is {m.count}"
                )
            if m.shared:
                return dataclasses.replace(cost, shared_cpus=m.cores)
            cost = dataclasses.replace(cost, process_idle_cpus=0.0)
            if named:
                return dataclasses.replace(cost, shared_cpus=0)
        else:
            prices, _ = PRESETS[m.preset or "default"]
            cost = CostModel(**prices)  # type: ignore[arg-type]
        return dataclasses.replace(
            cost,
            shared_cpus=m.cores if m.shared else 0,
            bandwidth_bytes_s=m.nic_gbps * 1e9 / 8,
            latency_s=m.latency_us * 1e-6,
        )


def condition_cost(cost: CostModel, condition: Any) -> CostModel:
    """`cost` under `condition` (a slow server is the job's [cluster], not a price)."""
    if isinstance(condition, StragglersCondition):
        stragglers = Stragglers(condition.fraction, condition.slowdown, period_s=condition.period_s)
        return dataclasses.replace(cost, stragglers=stragglers)
    return cost


def parse_cluster(tree: dict[str, Any], source: str) -> ClusterFile:
    """The cluster file of TOML tables `tree` (ConfigError naming `source` and the key)."""
    try:
        return ClusterFile.model_validate(tree)
    except ValidationError as error:
        message = validation_message(error, source).replace("Value error, ", "")
        raise ConfigError(message) from None


def load_cluster(path: str | Path) -> ClusterFile:
    """The cluster file at `path` (ConfigError naming the file and the key at fault)."""
    return parse_cluster(read_toml_file(path, "cluster file"), f"cluster file {path}")
