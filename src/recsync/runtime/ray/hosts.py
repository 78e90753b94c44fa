"""The Ray actors of one job's topology: started on the machines the plan gives them (and a
trainer's worker processes beside it), connected, pinged, measured and killed. A Ray error
of any call to them (an actor died, a peer it called died, a call timed out) comes out as a
`NodeFailure` naming the node that is lost, for the job to recover from."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any, Concatenate, ParamSpec, TypeVar

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from recsync.coordinator.machines import (
    assign_machines,
    pins_after_loss,
    resolve_pins,
)
from recsync.coordinator.node_specs import NodeSpec, TrainerSpec
from recsync.coordinator.outcome import NodeMeasures
from recsync.coordinator.topology import Topology
from recsync.protocol.address import Address, Role
from recsync.runtime.ray.actors import NodeActor
from recsync.runtime.ray.cluster import (
    cluster_machines,
    machines_answering,
    machines_with_addresses,
)
from recsync.runtime.ray.errors import NodeFailure, PlacementError, failure
from recsync.runtime.ray.part import Part
from recsync.runtime.ray.pool import IDLE, Key, concurrency_for, reply_of
from recsync.runtime.ray.shared_memory import release_shared, shared_path
from recsync.runtime.ray.wakeup import wake_path
from recsync.runtime.timeouts import (
    COLLECTIVE_TIMEOUT_S,
    PING_TIMEOUT_S,
    START_TIMEOUT_S,
    CallWaits,
)
from recsync.runtime.transport.channel import Endpoint
from recsync.strategy.roles import server_side_roles

P = ParamSpec("P")
R = TypeVar("R")


def _naming_losses(
    method: Callable[Concatenate[JobActors, P], R],
) -> Callable[Concatenate[JobActors, P], R]:
    """`method` with a Ray error of its calls raised as the NodeFailure it means."""

    @functools.wraps(method)
    def named(hosts: JobActors, /, *args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return method(hosts, *args, **kwargs)
        except ray.exceptions.RayError as error:
            raise hosts.named_loss(error) from None

    return named


class JobActors:
    """One actor per node of `topology` (a node's home, if its workers are split into
    processes of their own, plus one actor per worker), on the cluster's alive machines."""

    def __init__(
        self,
        topology: Topology,
        on_up: Callable[[], None] | None = None,
        first_machines: Sequence[str] | None = None,
        lost_machines: frozenset[str] = frozenset(),
        ping_timeout_s: float = PING_TIMEOUT_S,
        waits: CallWaits = CallWaits(),
    ):
        """`first_machines`: the addresses of the machines the job first started on (a
        restart after a loss: pins to machines gone are dropped, `pins_after_loss`);
        `lost_machines`: Ray node ids of machines taken for lost, left out."""
        self.topology = topology
        self.ping_timeout_s = ping_timeout_s  # a node that does not answer a ping: lost
        self.waits = waits  # how long the nodes' loops wait for a reply, a replacement
        self.on_up = on_up  # called once started actors answer (a hook for fault injection)
        found = [m for m in machines_with_addresses() if m[0] not in lost_machines]
        self.machines = [node_id for node_id, _ in found]  # Ray node ids, the head first
        self.machine_ips = [address for _, address in found]
        placement = topology.spec.cluster.placement
        self.unpinned: list[str] = []  # roles whose pinned machines were all lost
        try:
            if first_machines is None:
                pins = resolve_pins(placement, self.machine_ips)
            else:
                pins, self.unpinned = pins_after_loss(placement, first_machines, self.machine_ips)
        except ValueError as error:
            raise PlacementError(str(error)) from None
        nodes = [n.address for n in topology.nodes]
        self.machine_of = assign_machines(nodes, len(self.machines), pins)
        self.actors: dict[Address, Any] = {}  # one per node (a node's home, if split)
        self.endpoints: dict[Address, Endpoint] = {}  # where each node's home is called
        self.worker_actors: dict[Address, list[Any]] = {}  # a split node's worker processes
        self.unreleased: dict[Address, str] = {}  # shared-state files not yet unlinked
        self.replaceable: frozenset[Role] = frozenset()
        self.pool_keys: dict[str, Key] = {}  # actor id -> what its process can host again

    @_naming_losses
    def start(self, replaceable: frozenset[Role] = frozenset()) -> list[Address]:
        """Start every node's actor (and its worker processes' actors), connect the nodes
        that run loops to their peers (a lost node of a `replaceable` role is waited for,
        then called again) and form its collective groups; returns the nodes that run loops
        (the trainers, group PSs)."""
        self.replaceable = replaceable
        hosted = []
        for node in self.topology.nodes:
            part = None
            if node.worker_processes:
                part = Part(shared_path(node.address.name))
                self.unreleased[node.address] = part.path
            hosted.append((node, part, self._machine(node.address)))
        for node, actor in zip(self.topology.nodes, self._host(hosted), strict=True):
            self.actors[node.address] = actor
        self.check_alive(START_TIMEOUT_S)
        self._up()
        self._check_placement()
        self._start_worker_processes()
        addresses = list(self.actors)
        endpoints = ray.get([self.actors[a].endpoint.remote() for a in addresses])
        self.endpoints = dict(zip(addresses, endpoints, strict=True))
        looping = [n.address for n in self.topology.nodes if n.has_loops]
        ray.get(
            [
                actor.connect.remote(self.endpoints, replaceable, self.waits)
                for a in looping
                for actor in self.actors_of(a)
            ]
        )
        pending = []
        for group in self.topology.collectives:  # each its own gloo rendezvous
            first = self.actors[group[0]]
            address = ray.get(first.collective_address.remote())
            pending += [
                self.actors[a].init_collective.remote(
                    address, rank, len(group), COLLECTIVE_TIMEOUT_S
                )
                for rank, a in enumerate(group)
            ]
        ray.get(pending)
        return looping

    def _machine(self, address: Address) -> str | None:
        """The Ray node id of the machine a node runs on (None: the only one)."""
        return None if len(self.machines) == 1 else self.machines[self.machine_of[address]]

    def _host(self, nodes: Sequence[tuple[NodeSpec, Part | None, str | None]]) -> list[Any]:
        """An actor for each (node, part of it, machine): a process kept from an earlier job
        (pool.py) that fits, hosting the node anew, else a new one."""
        wanted = [(machine or "", node.max_calls) for node, _, machine in nodes]
        actors, rehosting = [], []
        for (node, part, machine), kept in zip(nodes, IDLE.take(wanted), strict=True):
            if kept is None:
                placed = {} if machine is None else {"scheduling_strategy": _on(machine)}
                concurrency = concurrency_for(node.max_calls)
                options = NodeActor.options(  # type: ignore[attr-defined]
                    max_concurrency=concurrency, **placed
                )
                actor = options.remote(node, part)
            else:
                concurrency, actor = kept
                rehosting.append((node.address, actor.rehost.remote(node, part)))
            self.pool_keys[actor._actor_id.hex()] = (machine or "", concurrency)
            actors.append(actor)
        for address, ref in rehosting:
            try:
                ray.get(ref, timeout=START_TIMEOUT_S)
            except ray.exceptions.RayError as error:
                raise failure(address.name, error) from None
        return actors

    @_naming_losses
    def replace(self, node: NodeSpec) -> None:
        """Start `node` (one that was lost; a server, not one that runs loops) in a new
        actor, on its machine if it is still there (else the first), and point every node
        that calls it there."""
        assert not node.has_loops and not node.worker_processes, node
        address = node.address
        self._move_if_lost(address)
        self.actors[address] = self._host([(node, None, self._machine(address))])[0]
        ray.get(self.actors[address].ping.remote(), timeout=START_TIMEOUT_S)
        self._up()
        endpoint = self.endpoints[address] = ray.get(self.actors[address].endpoint.remote())
        looping = [n.address for n in self.topology.nodes if n.has_loops]
        ray.get([a.repoint.remote(address, endpoint) for n in looping for a in self.actors_of(n)])

    @_naming_losses
    def restart(self, node: TrainerSpec) -> list[Any]:
        """Start a lost trainer anew (`node`: its next incarnation), on its machine if it is
        still there (else the first machine left), killing what is left of the old one;
        returns its actors (connected to their peers)."""
        address = node.address
        for actor in self.actors_of(address):
            self.pool_keys.pop(actor._actor_id.hex(), None)
            ray.kill(actor, no_restart=True)
        self.worker_actors.pop(address, None)
        self._move_if_lost(address)
        part = Part(shared_path(address.name)) if node.worker_processes else None
        self.actors[address] = self._host([(node, part, self._machine(address))])[0]
        ray.get(self.actors[address].ping.remote(), timeout=START_TIMEOUT_S)
        self._up()
        if part is not None:
            self.unreleased[address] = part.path
            self._start_worker_processes([node])
        self.endpoints[address] = ray.get(self.actors[address].endpoint.remote())
        actors = self.actors_of(address)
        ray.get([a.connect.remote(self.endpoints, self.replaceable, self.waits) for a in actors])
        return actors

    def _move_if_lost(self, address: Address) -> None:
        """A lost node's machine, if it is lost too (gone from Ray's list or not answering),
        is left for a machine that answers and holds nodes of the same side (server side
        or trainers), else the first that answers."""
        here = self.machines[self.machine_of[address]]
        if len(self.machines) == 1:
            return
        alive = cluster_machines()
        if here in alive and here in machines_answering([here]):
            return
        answering = machines_answering([m for m in alive if m != here])
        if not answering:
            raise NodeFailure(f"no machine answers to host {address.name} again", address.name)
        server_side = server_side_roles()
        side = address.role in server_side
        mates = [
            self.machines[self.machine_of[a]]
            for a in self.machine_of
            if a != address and (a.role in server_side) == side
        ]
        chosen = next((m for m in mates if m in answering), None)
        chosen = chosen or next(m for m in alive if m in answering)
        self.machine_of[address] = self.machines.index(chosen)

    def machine_id(self, address: Address) -> str | None:
        """The Ray node id of the machine node `address` runs on (None: the only one)."""
        return self._machine(address)

    def _up(self) -> None:
        if self.on_up is not None:
            self.on_up()

    def named_loss(self, error: ray.exceptions.RayError) -> NodeFailure:
        """The NodeFailure a Ray error of a call to the job's actors means: the node whose
        actor died; else (a call failed or timed out) a node found dead or hung by a ping, as
        the cause; else the failing node's own error (not a loss)."""
        address = self._address_of(getattr(error, "actor_id", None))
        if isinstance(error, ray.exceptions.RayActorError) and address is not None:
            return failure(address.name, error)
        try:
            self.check_alive()
        except NodeFailure as found:
            return found
        return failure("a node" if address is None else address.name, error)

    def explained(self, found: NodeFailure) -> NodeFailure:
        """`found` (a node's failure) if it names a lost node; else the loss of a node a
        ping finds dead or hung, which explains it (an all-reduce whose peer's machine died
        fails in the survivors too), else `found`: the node's own error."""
        if found.lost is not None:
            return found
        try:
            self.check_alive()
        except NodeFailure as lost:
            return lost
        return found

    def _address_of(self, actor_id: str | None) -> Address | None:
        """The node one of whose actors has the id `actor_id` (hex)."""
        for address in self.actors:
            if any(a._actor_id.hex() == actor_id for a in self.actors_of(address)):
                return address
        return None

    def _check_placement(self) -> None:
        """Every node's actor runs on the machine it was given."""
        addresses = list(self.actors)
        ran_on = ray.get([self.actors[a].node_id.remote() for a in addresses])
        for address, node_id in zip(addresses, ran_on, strict=True):
            expected = self.machines[self.machine_of[address]]
            assert node_id == expected, f"{address} runs on {node_id}, not {expected}"

    def placement(self) -> dict[str, int]:
        """Machine index of every node (machines: Ray's nodes, the head first)."""
        return {a.name: self.machine_of[a] for a in self.actors}

    def driver_host(self) -> str | None:
        """The address of the machine the driver runs on (None: not one of the cluster's)."""
        here = ray.get_runtime_context().get_node_id()
        return self.machine_ips[self.machines.index(here)] if here in self.machines else None

    def node_hosts(self) -> dict[str, str]:
        """The address of the machine every node runs on."""
        return {a.name: self.machine_ips[self.machine_of[a]] for a in self.actors}

    def _start_worker_processes(self, nodes: list[TrainerSpec] | None = None) -> None:
        """One actor per worker of each node whose workers run in processes of their own
        (of `nodes`, or of the topology), on the machine of the node's home actor (they map
        its shared state); then the shared state's file is unlinked."""
        split = [n for n in (nodes or self.topology.nodes) if n.worker_processes]
        if not split:
            return
        homes = ray.get([self.actors[n.address].node_id.remote() for n in split])
        for node, node_id in zip(split, homes, strict=True):
            assert isinstance(node, TrainerSpec)
            path = self.unreleased[node.address]
            machine = None if len(self.machines) == 1 else node_id
            parts = [(node, Part(path, worker), machine) for worker in node.workers]
            self.worker_actors[node.address] = self._host(parts)
        self.check_alive(START_TIMEOUT_S)
        ray.get([self.actors[n.address].release_shared.remote() for n in split])
        self.unreleased.clear()

    def actors_of(self, address: Address) -> list[Any]:
        """The actors of one node: its own and those of its worker processes."""
        return [self.actors[address], *self.worker_actors.get(address, [])]

    def check_alive(self, timeout_s: float | None = None) -> None:
        """Every actor answers a ping within `timeout_s` (None: `ping_timeout_s`; a node
        that failed to start, died or hangs is named, as lost)."""
        timeout_s = self.ping_timeout_s if timeout_s is None else timeout_s
        actors = [(a, actor) for a in self.actors for actor in self.actors_of(a)]
        refs = [actor.ping.remote() for _, actor in actors]
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=timeout_s)
        for (address, _), ref in zip(actors, refs, strict=True):
            if ref not in ready:
                raise NodeFailure(
                    f"{address} did not answer within {timeout_s:.0f} s (hung?)", lost=address.name
                )
            try:
                ray.get(ref)
            except ray.exceptions.RayActorError as error:
                raise failure(address.name, error) from None

    @_naming_losses
    def reports(self, addresses: list[Address]) -> dict[Address, Any]:
        """The reports of nodes `addresses`."""
        reports = ray.get([self.actors[a].report.remote() for a in addresses])
        return dict(zip(addresses, reports, strict=True))

    @_naming_losses
    def measures(self, address: Address) -> NodeMeasures:
        """What was measured of a node, summed over its processes."""
        parts: list[NodeMeasures] = ray.get(
            [actor.node_measures.remote() for actor in self.actors_of(address)]
        )
        return functools.reduce(NodeMeasures.merged, parts)

    def shutdown(self, lost_machines: frozenset[str] = frozenset()) -> None:
        """Kill every actor (and unlink a shared-state file a half-done start left); those
        on `lost_machines` (Ray node ids of machines that no longer answer) are killed
        without being asked to let go of anything first (nothing of theirs is left to)."""
        on_lost = {a for a in self.actors if self._machine(a) in lost_machines}
        asked = {a: path for a, path in self.unreleased.items() if a not in on_lost}
        refs = {a: self.actors[a].release_shared.remote() for a in asked if a in self.actors}
        ready, _ = ray.wait(list(refs.values()), num_returns=len(refs), timeout=PING_TIMEOUT_S)
        for address, path in asked.items():
            ref = refs.get(address)
            try:
                assert ref is not None and ref in ready
                ray.get(ref)
            except (ray.exceptions.RayError, AssertionError):
                release_shared(path)  # the home is gone: the files are here, if anywhere
                release_shared(wake_path(path))
        actors = [
            actor
            for address in self.actors
            if address not in on_lost
            for actor in self.actors_of(address)
        ]
        released = [actor.release.remote() for actor in actors]
        ready, _ = ray.wait(released, num_returns=len(released), timeout=PING_TIMEOUT_S)
        for actor, ref in zip(actors, released, strict=True):
            key = self.pool_keys.pop(actor._actor_id.hex(), None)
            if not (key is not None and reply_of(ref, ready) is True and IDLE.give(key, actor)):
                ray.kill(actor, no_restart=True)
        for address in on_lost:
            for actor in self.actors_of(address):
                self.pool_keys.pop(actor._actor_id.hex(), None)
                ray.kill(actor, no_restart=True)
        self.actors.clear()
        self.endpoints.clear()
        self.worker_actors.clear()
        self.unreleased.clear()


def _on(machine: str) -> NodeAffinitySchedulingStrategy:
    return NodeAffinitySchedulingStrategy(machine, soft=False)
