"""Every node of a job as one kind of Ray actor: it builds its node from the node's spec,
answers messages (the driver's Ray calls, and its peers' loops over its channel), arms the
node's timers, runs its loops on threads (loops.py), and reports. How a message reaches the
node is coordinator/hosting.py's; here it only takes threads: for nodes that are
`serialized`, messages are handled under a lock and a request waits on its condition;
concurrently otherwise."""

from __future__ import annotations

import dataclasses
import fcntl
import os
import socket
import struct
import threading
import time
from datetime import timedelta
from typing import Any

import numpy as np
import ray
import torch
import torch.distributed as dist

from recsync.coordinator.hosting import HostedNode
from recsync.coordinator.node_specs import BuildContext, NodeSpec
from recsync.coordinator.outcome import HELPER_PROCESSES, THREADS, NodeMeasures
from recsync.protocol.address import Address, Role
from recsync.protocol.messages import Message, wire_bytes
from recsync.protocol.node import StartTimer
from recsync.runtime.ray.errors import NodeFailure
from recsync.runtime.ray.in_flight import InFlight
from recsync.runtime.ray.kernels import load_hash_kernels
from recsync.runtime.ray.loops import LoopDriver
from recsync.runtime.ray.part import Part
from recsync.runtime.ray.shared_memory import attach_shared, create_shared, release_shared
from recsync.runtime.ray.wakeup import Bell, WakeListener
from recsync.runtime.thread_cpu import cpu_by_kind
from recsync.runtime.timeouts import READY_WAIT_S, CallWaits
from recsync.runtime.transport import traffic, wire
from recsync.runtime.transport.channel import ChannelServer, Endpoint
from recsync.runtime.transport.peers import Peers

SIOCGIFADDR = 0x8915  # Linux: an interface's IPv4 address


@ray.remote(num_cpus=0)
class NodeActor:
    """One node of a job, hosted by Ray."""

    def __init__(self, spec: NodeSpec, part: Part | None = None):
        torch.set_num_threads(1)
        self.epoch = 0  # of the nodes this process hosted: a timer of an earlier one is void
        self.in_flight = InFlight()
        self._host(spec, part)

    def _host(self, spec: NodeSpec, part: Part | None) -> None:
        self.released, self.running = False, False
        self.in_flight.reopen()
        self.spec, self.part = spec, part
        self.name = (
            spec.address.name
            if part is None or part.worker is None
            else (f"{spec.address.name} worker {part.worker}")
        )
        self.node = spec.build(BuildContext(one_at_a_time=False, background_reading=True))
        load_hash_kernels(spec)  # before the node's CPU and the job's clock start
        if part is not None:
            tensors = self.node.shared_tensors()
            assert tensors, f"{self.name} shares no state: its loops need one process"
            share = create_shared if part.worker is None else attach_shared
            self.node.share(share(part.path, tensors))
        self.listener = (
            WakeListener(part.wake_path, self._wake)
            if part is not None and part.worker is None
            else None
        )
        self.bell = Bell(part.wake_path) if part is not None and part.worker is not None else None
        self.cond = threading.Condition() if spec.serialized else None
        self.measures = NodeMeasures()
        self.hosted = HostedNode(self.node, self.measures, spec.slowdown_at)
        assert spec.serialized or not self.hosted.defers, f"{self.name} defers: serialize it"
        self.wakes = _Wakes(self)
        self.counting = threading.Lock()
        self.started = time.perf_counter()  # (re)set when the job starts (`run`)
        self.peers = Peers({})
        self.group: Any = None
        self.driver: LoopDriver | None = None  # while its loops run
        self.server: ChannelServer | None = None  # once a peer may call it
        self.cpu_at_start = _process_cpu_s()
        self.traffic_at_start = traffic.sent()  # of the nodes this process hosted before
        self.reported_bytes = 0
        self.asked_bytes = 0
        self.threads_at_start = cpu_by_kind()  # of the nodes this process hosted before

    def rehost(self, spec: NodeSpec, part: Part | None = None) -> int:
        """Host another node (a later job's) in this process, `release`d before; returns the
        process id."""
        assert self.released, "rehost of a node actor that was not released"
        self._host(spec, part)
        return os.getpid()

    def release(self) -> bool:
        """Close what the node holds beyond its memory (its channel and connections, its
        collective group, wake pipe and helper processes) and drop it, so that this process
        can host a later job's node (pool.py); False, closing nothing, while its loops run."""
        if self.running or not self.in_flight.close(self.name):
            return False
        if self.server is not None:
            self.server.close()
        if self.listener is not None:
            self.listener.close()
        if self.bell is not None:
            self.bell.close()
        if self.group is not None and dist.is_initialized():
            dist.destroy_process_group()
        self.node.close()
        epoch, in_flight = self.epoch + 1, self.in_flight
        self.__dict__.clear()
        self.epoch, self.released, self.in_flight = epoch, True, in_flight
        return True

    def ping(self) -> int:
        """Alive: its process id."""
        return os.getpid()

    def node_id(self) -> str:
        return str(ray.get_runtime_context().get_node_id())

    def release_shared(self) -> None:
        """Every process of the node has mapped its shared state: unlink its file."""
        assert self.part is not None
        release_shared(self.part.path)
        release_shared(self.part.wake_path)

    def endpoint(self) -> Endpoint:
        """Where peers' loops send this node messages (its channel, started on first ask)."""
        if self.server is None:
            host = ray.util.get_node_ip_address()  # type: ignore[no-untyped-call]
            self.server = ChannelServer(self._call_owned, host)
        return self.server.endpoint

    def connect(
        self,
        peers: dict[Address, Endpoint],
        replaceable: frozenset[Role] = frozenset(),
        waits: CallWaits = CallWaits(),
    ) -> None:
        """The endpoints of the other nodes, for this node's loops to call; calls to a lost
        node of a `replaceable` role wait for its replacement (`repoint`), as long as
        `waits` says."""
        self.peers = Peers(peers, replaceable, waits)

    def repoint(self, address: Address, endpoint: Endpoint) -> None:
        """Node `address` was lost and runs in a new actor now, reached at `endpoint`."""
        self.peers.replace(address, endpoint)

    def call(self, wired: Message, owned: bool = False) -> Any:
        """The node's (encoded) reply to an (encoded) message; a fused one's push is
        applied first, then its request answered. `owned`: the message's arrays are its
        own writable buffers (read off the channel), kept without a copy; else (a Ray
        call's read-only views) a message the node keeps (`retained`) is copied."""
        with self.in_flight.call():
            message = wire.decode(wired, copy=wired.retained and not owned)
            push, request = self.hosted.split(message)
            if push is not None:
                self._handle(push)
            reply = self._handle(request)
            with self.counting:
                self.hosted.count_reply(request, reply)
            return wire.encode(reply)

    def ask(self, wired: Message) -> Any:
        """The node's (encoded) reply to a driver's message (through Ray: progress polls,
        cuts, held-out samples): its bytes are counted as what it sent the driver's side
        (`NodeMeasures.control_bytes`), not as the job's traffic, which the simulator's
        driver, asking its nodes in process, has none of."""
        with self.in_flight.call():
            reply = self._handle(wire.decode(wired, copy=wired.retained))
            with self.counting:
                self.asked_bytes += wire_bytes(reply)
            return wire.encode(reply)

    def _call_owned(self, wired: Message) -> Any:
        """`call` for a message read off the channel (its arrays fresh buffers of its own)."""
        return self.call(wired, owned=True)

    def _handle(self, message: Message) -> Any:
        """The node's reply, once it is ready for the message (serialized nodes: under the
        lock)."""
        hosted, cond = self.hosted, self.cond
        if cond is None:
            reply = self._slowed(message)
            hosted.after(message, self.wakes)
            return reply
        with cond:
            if hosted.waits(message) and not cond.wait_for(
                lambda: not hosted.waits(message), timeout=READY_WAIT_S
            ):
                raise NodeFailure(
                    f"{self.name}: a {message.kind} waited {READY_WAIT_S:.0f} s for the "
                    "server to be ready"
                )
            reply = self._slowed(message)
            hosted.after(message, self.wakes)
        return reply

    def _slowed(self, message: Message) -> Any:
        """The node's reply, taking `slowdown` times as long (an emulated slow server)."""
        started = time.perf_counter()
        reply = self.hosted.handle(message)
        slowdown = self.hosted.slowdown(started - self.started)
        if slowdown > 1.0:
            time.sleep((slowdown - 1.0) * (time.perf_counter() - started))
        return reply

    def _fire(self, epoch: int, timer_id: int) -> None:
        if epoch != self.epoch:  # armed by a node this process hosted before
            return
        assert self.cond is not None
        with self.cond:
            self.hosted.fire(timer_id, self.wakes)

    def collective_address(self) -> str:
        """Where the collective group's rendezvous will listen (this node hosts it as rank
        0): this machine's address and a port free now."""
        here = ray.util.get_node_ip_address()  # type: ignore[no-untyped-call]
        with socket.socket() as sock:
            sock.bind((here, 0))
            port = sock.getsockname()[1]
        return f"tcp://{here}:{port}"

    def init_collective(self, address: str, rank: int, world_size: int, timeout_s: float) -> None:
        """Join the collective group (gloo) whose rendezvous is at `address` (rank 0 hosts
        it, listening on its machine's address only); the group's connections go over this
        machine's own address (gloo would take what the host name resolves to: 127.0.1.1 or
        127.0.0.1 on many machines, which other machines cannot reach)."""
        here = ray.util.get_node_ip_address()  # type: ignore[no-untyped-call]
        device = interface_of(here)
        if device is not None:
            os.environ["GLOO_SOCKET_IFNAME"] = device
        host, _, port = address.removeprefix("tcp://").rpartition(":")
        timeout = timedelta(seconds=timeout_s)
        if rank == 0:  # the store owns the listening socket (and closes it when it goes)
            listening = socket.create_server((host, int(port))).detach()
            store = dist.TCPStore(  # type: ignore[attr-defined]
                host,
                int(port),
                world_size,
                is_master=True,
                timeout=timeout,
                master_listen_fd=listening,
            )
        else:
            store = dist.TCPStore(  # type: ignore[attr-defined]
                host, int(port), world_size, is_master=False, timeout=timeout
            )
        dist.init_process_group(
            "gloo", store=store, rank=rank, world_size=world_size, timeout=timeout
        )
        self.group = dist.group.WORLD

    def run(self) -> None:
        """Run the node's loops until they end (raises the first failure of any)."""
        self.started = time.perf_counter()
        driver = LoopDriver(
            self.name,
            self.peers,
            self.started,
            self.hosted,
            self.counting,
            ring=self.bell.ring if self.bell is not None else None,
        )
        driver.group = self.group
        self.driver = driver
        part, loops = self.part, self.node.loops()
        self.running = True
        try:
            driver.run(loops if part is None else [loop for loop in loops if part.runs(loop)])
        finally:
            self.running = False

    def _wake(self) -> None:
        """A worker process of this node notified: the loops here re-check their waits."""
        driver = self.driver
        if driver is not None:
            driver.wake()

    def report(self) -> Any:
        """The node's report; its bytes (its tensors') are counted as what it sent the
        driver's side through Ray (`NodeMeasures.control_bytes`)."""
        report = self.node.report()
        self.reported_bytes += tensor_bytes(report)
        return report

    def node_measures(self) -> NodeMeasures:
        helpers = self.node.helper_cpu_seconds()
        before = self.threads_at_start  # what threads of earlier nodes spent, by kind
        threads = {
            f"{THREADS}{kind}": s - before.get(kind, 0.0)
            for kind, s in cpu_by_kind().items()
            if kind not in before or s > before[kind]
        }
        if helpers:
            threads[f"{THREADS}{HELPER_PROCESSES}"] = helpers
        with self.counting:
            measures = self.measures
            return NodeMeasures(
                dict(measures.bytes_sent),
                traffic.since(self.traffic_at_start),
                dict(measures.calls),
                dict(measures.blocked),
                dict(measures.effects),
                dict(measures.worker_compute_s),
                dict(measures.worker_steps),
                {"process": _process_cpu_s() - self.cpu_at_start + helpers, **threads},
                {
                    kind: size
                    for kind, size in (("report", self.reported_bytes), ("asked", self.asked_bytes))
                    if size
                },
            )


class _Wakes:
    """What a node hosted by Ray wakes when it moved (called under its lock, if it has one):
    the requests waiting on its condition, its loops' waits, and timers on threads."""

    def __init__(self, actor: NodeActor):
        self.actor = actor

    def requests(self, host: HostedNode) -> None:
        if self.actor.cond is not None:
            self.actor.cond.notify_all()

    def loops(self, host: HostedNode) -> None:
        driver = self.actor.driver
        if driver is not None:  # its loops' Awaits re-check
            driver.wake()

    def arm(self, host: HostedNode, timer: StartTimer) -> None:
        actor = self.actor
        thread = threading.Timer(timer.seconds, actor._fire, args=(actor.epoch, timer.timer_id))
        thread.daemon = True
        thread.start()


def interface_of(address: str) -> str | None:
    """The name of this machine's network interface holding the IPv4 `address` (None: no
    such interface, or not an IPv4 address)."""
    try:
        wanted = socket.inet_aton(address)
    except OSError:
        return None
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        for _, name in socket.if_nameindex():
            request = struct.pack("256s", name.encode()[:15])
            try:
                reply = fcntl.ioctl(sock.fileno(), SIOCGIFADDR, request)
            except OSError:  # no IPv4 address on it
                continue
            if reply[20:24] == wanted:
                return name
    return None


def tensor_bytes(value: Any) -> int:
    """The bytes of the tensors and arrays in `value` (dataclasses, mappings and sequences
    followed): about what Ray carries of it, whose pickle holds those bytes and little else."""
    if isinstance(value, torch.Tensor):
        return int(value.nbytes)
    if isinstance(value, np.ndarray):
        return int(value.nbytes)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return sum(tensor_bytes(getattr(value, f.name)) for f in dataclasses.fields(value))
    if isinstance(value, dict):
        return sum(tensor_bytes(v) for v in value.values())
    if isinstance(value, list | tuple):
        return sum(tensor_bytes(v) for v in value)
    return 0


def _process_cpu_s() -> float:
    """CPU seconds this process spent so far (every thread: the node's and Ray's)."""
    times = os.times()
    return times.user + times.system
