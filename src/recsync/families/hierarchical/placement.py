"""Where each operator of the dense part runs within a hierarchical-training group (Huang et
al. 2021, Sec. 3.2.1): rule-based tagging, then greedy refinement on estimated CPU, network
and memory utilisation. Pure: no clocks, no processes; the same plan for every group.

Devices: index 0 is "the trainers" (the t trainers of a group run the trainer-tagged ops
replicated, each on 1/t of the examples), 1..p the group PSs. Utilisation is demand at a
reference rate over capacity: the rate the group's t trainers would reach with the whole
dense part on them (EASGD's trainers), so a plan whose busiest CPU or NIC is at u reaches
about 1/u times that rate.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from recsync.families.hierarchical.op_graph import Op, OpKind

TRAINER = 0
TRAINER_KINDS = (OpKind.INPUT, OpKind.LOOKUP, OpKind.INTERACTION, OpKind.LOSS)  # rules
DIMENSIONS = ("cpu", "network", "memory")


@dataclass(frozen=True)
class GroupShape:
    """A group's hardware and traffic: `trainers` (t), `group_servers` (p), `nets` (r,
    concurrent batches per trainer), per-machine FLOP/s, NIC bytes/s and memory; the
    bytes ratio of forward activations and of gradients on the wire (compression: int8
    0.25, bf16 0.5) and the CPU seconds coding costs per element; the examples between
    two of a group PS's cross-group syncs (each moves its parameters twice)."""

    trainers: int = 6
    group_servers: int = 6
    nets: int = 24
    batch_size: int = 256
    flops_s: float = 1.25e11
    nic_bytes_s: float = 25e9 / 8
    memory_bytes: float = 64e9
    optimizer_slots: int = 1  # Adagrad: one accumulator per parameter
    activation_ratio: float = 1.0
    gradient_ratio: float = 1.0
    coding_s: float = 0.0
    sync_every_examples: float = 256 * 24 * 10

    def __post_init__(self) -> None:
        if self.trainers < 1 or self.group_servers < 1 or self.nets < 1:
            raise ValueError(
                f"a group needs trainers, group_servers and nets >= 1, got "
                f"{self.trainers}, {self.group_servers}, {self.nets}"
            )


@dataclass(frozen=True)
class Utilisation:
    """Per device (0: trainers, 1..p: group PSs), each dimension's demand over capacity."""

    cpu: tuple[float, ...]
    network: tuple[float, ...]
    memory: tuple[float, ...]

    @property
    def maximum(self) -> float:
        return max(max(self.cpu), max(self.network), max(self.memory))

    def bottleneck(self) -> tuple[int, str]:
        """The device and dimension at the maximum (the lowest device index on ties)."""
        best = max(
            (
                (value, -device, dim)
                for dim in DIMENSIONS
                for device, value in enumerate(getattr(self, dim))
            ),
        )
        return -best[1], best[2]


@dataclass(frozen=True)
class GroupPlacement:
    """The plan: every op's device, the utilisation after tagging and after refinement,
    and the refinement's moves (op, from, to)."""

    ops: tuple[Op, ...]
    device: dict[str, int]
    tagged: Utilisation
    refined: Utilisation
    moves: tuple[tuple[str, int, int], ...] = field(default=())
    reference_eps: float = 0.0

    @property
    def predicted_eps(self) -> float:
        """The reference rate scaled by the busiest CPU or NIC of the refined plan."""
        busiest = max(max(self.refined.cpu), max(self.refined.network))
        return self.reference_eps / busiest if busiest > 0 else float("inf")


def reference_eps(ops: Sequence[Op], shape: GroupShape) -> float:
    """Examples/s of t trainers running the whole dense part themselves."""
    return shape.trainers * shape.flops_s / sum(op.flops for op in ops)


def parameter_modules(ops: Sequence[Op]) -> set[str]:
    """The ops the first tagging rule sends to group PSs: those of every module that holds
    parameters, except the rule-fixed trainer ops and the joins of split FCs."""
    modules = {op.module for op in ops if op.param_bytes > 0}
    return {
        op.name for op in ops if movable(op) and op.kind is not OpKind.JOIN and op.module in modules
    }


def tag(ops: Sequence[Op], num_servers: int) -> dict[str, int]:
    """Rule-based tagging: parameterised ops and their module's ops to the group PSs;
    input, lookup, interaction, loss and the joins of split FCs to the trainers; the PS ops
    grouped into connected components, each on one group PS, balanced by parameter bytes
    (largest component first onto the lightest PS)."""
    on_ps = parameter_modules(ops)
    parent = {name: name for name in on_ps}

    def root(name: str) -> str:
        while parent[name] != name:
            parent[name] = parent[parent[name]]
            name = parent[name]
        return name

    for op in ops:
        for source in op.inputs:
            if op.name in on_ps and source in on_ps:
                parent[root(op.name)] = root(source)
    components: dict[str, list[Op]] = {}
    for op in ops:
        if op.name in on_ps:
            components.setdefault(root(op.name), []).append(op)
    load = [0] * num_servers
    device = {op.name: TRAINER for op in ops}
    by_size = sorted(components.values(), key=lambda c: (-sum(o.param_bytes for o in c), c[0].name))
    for component in by_size:
        server = min(range(num_servers), key=lambda s: (load[s], s))
        load[server] += sum(o.param_bytes for o in component)
        for op in component:
            device[op.name] = server + 1
    return device


def utilisation(ops: Sequence[Op], device: dict[str, int], shape: GroupShape) -> Utilisation:
    """Demand at the reference rate over each device's capacity. CPU: the ops' FLOPs and
    the coding of what crosses devices; network: every cut edge's activation forward and
    gradient back (a PS-to-PS edge goes through a trainer, which drives each batch), and a
    group PS's sync traffic; memory: parameters with optimizer state, and the activations
    of the t x r batches in flight (a trainer: r)."""
    eps = reference_eps(ops, shape)
    devices = shape.group_servers + 1
    flops, wire, coded, memory = [0.0] * devices, [0.0] * devices, [0.0] * devices, [0.0] * devices
    by_name = {op.name: op for op in ops}
    in_flight = [float(shape.trainers * shape.nets * shape.batch_size)] * devices
    in_flight[TRAINER] = float(shape.nets * shape.batch_size)
    per_edge = shape.activation_ratio + shape.gradient_ratio
    for op in ops:
        here = device[op.name]
        flops[here] += op.flops
        memory[here] += (
            op.param_bytes * (1 + shape.optimizer_slots) + op.out_bytes * in_flight[here]
        )
        if here != TRAINER:
            wire[here] += 2.0 * op.param_bytes / shape.sync_every_examples
        for source in op.inputs:
            there = device[source]
            if there == here:
                continue
            size = by_name[source].out_bytes
            for end in {here, there, TRAINER}:
                hops = 2 if end == TRAINER and TRAINER not in (here, there) else 1
                wire[end] += hops * size * per_edge
                coded[end] += hops * size / 4
    trainers = shape.trainers
    cpu = tuple(
        eps
        * (flops[d] / shape.flops_s + coded[d] * shape.coding_s)
        / (trainers if d == TRAINER else 1)
        for d in range(devices)
    )
    network = tuple(
        eps * wire[d] / shape.nic_bytes_s / (trainers if d == TRAINER else 1)
        for d in range(devices)
    )
    return Utilisation(cpu, network, tuple(m / shape.memory_bytes for m in memory))


def movable(op: Op) -> bool:
    """The rules fix input, lookup, interaction and loss on the trainers."""
    return op.kind not in TRAINER_KINDS


def fc_parts(ops: Sequence[Op]) -> dict[str, list[str]]:
    """What refinement moves at once, by module: every FC part (an unsplit FC, a slice of
    a split one, or a co-partitioned part's FC, ReLU and FC), the unit the engines run on
    one group PS."""
    modules = {op.module for op in ops if op.param_bytes > 0}
    parts: dict[str, list[str]] = {}
    for op in ops:
        if op.module in modules and movable(op) and op.kind is not OpKind.JOIN:
            parts.setdefault(op.module, []).append(op.name)
    return parts


def refine(
    ops: Sequence[Op], device: dict[str, int], shape: GroupShape, max_moves: int = 200
) -> tuple[dict[str, int], tuple[tuple[str, int, int], ...]]:
    """Greedy refinement: take the bottleneck device, try moving each FC part on it to
    every other group PS (the paper moves single ops; an FC part is what the engines run
    on one group PS, and a group keeps one copy of its parameters, so parts move whole and
    only between group PSs), apply the move that lowers the system's maximum utilisation
    most; stop when none lowers it, when the bottleneck is the trainers, or after
    `max_moves` (the paper's time limit, counted in moves so the plan is deterministic).
    The maximum never rises."""
    current = dict(device)
    moves: list[tuple[str, int, int]] = []
    parts = fc_parts(ops)
    best = utilisation(ops, current, shape).maximum
    for _ in range(max_moves):
        where, _ = utilisation(ops, current, shape).bottleneck()
        choice: tuple[float, str, int] | None = None
        for module, names in parts.items():
            if current[names[0]] != where:
                continue
            for target in range(1, shape.group_servers + 1):
                if target == where:
                    continue
                trial = dict(current, **dict.fromkeys(names, target))
                value = utilisation(ops, trial, shape).maximum
                if value < best - 1e-12 and (choice is None or (value, module, target) < choice):
                    choice = (value, module, target)
        if choice is None:
            break
        best, module, target = choice
        moves.append((module, current[parts[module][0]], target))
        current.update(dict.fromkeys(parts[module], target))
    return current, tuple(moves)


def place(
    ops: Sequence[Op], shape: GroupShape, tagging: bool = True, refinement: bool = True
) -> GroupPlacement:
    """Tag (or, without tagging rules, every parameterised op's module on group PS 1 and
    the rest on the trainers: one unit), then refine if asked."""
    if tagging:
        device = tag(ops, shape.group_servers)
    else:
        on_ps = parameter_modules(ops)
        device = {op.name: 1 if op.name in on_ps else TRAINER for op in ops}
    tagged = utilisation(ops, device, shape)
    moves: tuple[tuple[str, int, int], ...] = ()
    if refinement:
        device, moves = refine(ops, device, shape)
    return GroupPlacement(
        tuple(ops),
        device,
        tagged,
        utilisation(ops, device, shape),
        moves,
        reference_eps(ops, shape),
    )
