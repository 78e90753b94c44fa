"""The simulator's cost model: how long compute, messages, server work and collectives take.

Every number is configurable; defaults describe this project's 2-core machine loosely and
are meant to be replaced by a calibrated profile (`recsync calibrate`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np

from recsync.errors import ConfigError
from recsync.model.spec import ModelSpec
from recsync.protocol.address import Role
from recsync.protocol.messages import Lookup, Message, Work


@dataclass(frozen=True)
class Stragglers:
    """A fraction of workers computes `slowdown` times slower during [start, stop) seconds:
    the same workers throughout (`period_s` 0), or, as on a shared cluster, in stretches: the
    slow ones are drawn anew every `period_s` seconds (deterministic from the job's seed)."""

    fraction: float = 0.0
    slowdown: float = 1.0
    start: float = 0.0
    stop: float = float("inf")
    period_s: float = 0.0

    def __post_init__(self) -> None:
        if not 0.0 <= self.fraction <= 1.0:
            raise ValueError(f"stragglers.fraction must be in [0, 1], got {self.fraction}")
        if self.slowdown < 1.0:
            raise ValueError(f"stragglers.slowdown must be >= 1, got {self.slowdown}")
        if not (self.period_s >= 0 and self.period_s < float("inf")):
            raise ValueError(
                f"stragglers.period_s must be a finite number >= 0, got {self.period_s}"
            )


@dataclass(frozen=True)
class Faults:
    """Injected faults: a fraction of lookup and pull responses delayed by `delay_s` seconds
    (`delay_lookups` False: dense pulls only, as in PSP's model, which has no embeddings);
    trainer `crash_trainer` (None: no crash) crashing at virtual time `crash_at_s`: its
    worker threads stop at their next action, the batches they held are lost (counted and
    reported), the servers of a gradient strategy learn its workers are gone. A cut (a
    checkpoint while training) keeps the reader paused `cut_s` seconds after every worker
    parked: the time to gather the state and hand it over (0: at once; the Ray engine
    paused 0.14-0.18 s a cut for the default job, the workers' parking included,
    `benchmarks/bench_checkpoint.py`). Node losses (runtime/sim/faulty.py): each trainer,
    server (embedding, sync, dense, group) and the reader is lost after an exponential time of
    mean `trainer_mtbf_s`, `server_mtbf_s`, `reader_mtbf_s` (0: never), noticed
    `detect_s` later; the job restarts `restart_s` after that."""

    delay_fraction: float = 0.0
    delay_s: float = 0.0
    delay_lookups: bool = True
    crash_trainer: int | None = None
    crash_at_s: float = 0.0
    cut_s: float = 0.0
    trainer_mtbf_s: float = 0.0
    server_mtbf_s: float = 0.0
    reader_mtbf_s: float = 0.0
    detect_s: float = 1.0
    restart_s: float = 10.0

    def __post_init__(self) -> None:
        if self.crash_trainer is not None and self.crash_trainer < 0:
            raise ValueError(f"faults.crash_trainer must be >= 0, got {self.crash_trainer}")
        if not self.crash_at_s >= 0:
            raise ValueError(f"faults.crash_at_s must be >= 0, got {self.crash_at_s}")
        if not 0.0 <= self.delay_fraction <= 1.0:
            raise ValueError(f"faults.delay_fraction must be in [0, 1], got {self.delay_fraction}")
        if self.delay_s < 0:
            raise ValueError(f"faults.delay_s must be >= 0, got {self.delay_s}")
        for name in ("cut_s", "trainer_mtbf_s", "server_mtbf_s", "reader_mtbf_s"):
            if not getattr(self, name) >= 0:
                raise ValueError(f"faults.{name} must be >= 0, got {getattr(self, name)}")
        for name in ("detect_s", "restart_s"):
            if not getattr(self, name) >= 0:
                raise ValueError(f"faults.{name} must be >= 0, got {getattr(self, name)}")

    def may_delay(self, message: Message) -> bool:
        """Whether fault injection may delay the reply to `message`: a dense pull's, and a
        lookup's unless `delay_lookups` is off."""
        return message.reply_delayable and (self.delay_lookups or not isinstance(message, Lookup))

    def mtbf_s(self, role: Role) -> float:
        """Mean seconds between losses of one node of `role` (0: never lost)."""
        if role is Role.TRAINER:
            return self.trainer_mtbf_s
        if role is Role.READER:
            return self.reader_mtbf_s
        return self.server_mtbf_s

    @property
    def loses_nodes(self) -> bool:
        return bool(self.trainer_mtbf_s or self.server_mtbf_s or self.reader_mtbf_s)


@dataclass(frozen=True)
class FileReading:
    """Seconds a reader node spends making one example of file data, by the file's format
    (data.source), as `recsync calibrate --data FILE` measured the job's own files: reading
    and parsing them, holding the test rows out, handing each batch from the producer to
    the reader's process (pickled through the pipe and back). A format left unset (None)
    costs a batch what a synthetic one does (`CostModel.reader_batch_s`)."""

    criteo: float | None = None
    libsvm: float | None = None
    libffm: float | None = None
    csv: float | None = None
    parquet: float | None = None

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if value is not None and not value >= 0:
                raise ValueError(f"{f.name} must be >= 0 seconds an example, got {value}")

    def example_s(self, fmt: str) -> float | None:
        """Seconds an example of format `fmt` costs (None: not measured)."""
        value: float | None = getattr(self, fmt)
        return value


@dataclass(frozen=True)
class StoredBytes(FileReading):
    """Bytes one example of file data takes as stored, by format (`recsync calibrate --data
    FILE`: the file's size over its examples): what a reader downloads an example when
    the data is on an object store (`CostModel.store_mbit`)."""


@dataclass(frozen=True)
class Machines:
    """The machines a job runs on, each with its network link, where nodes share machines:
    the nodes are placed on them by `coordinator/machines.py`'s rule and the job's pins
    (`cluster.placement`, by an address of `addresses` or an index), and a message between
    two machines queues on the sender's link, then the receiver's (each full duplex: what
    a machine sends and what it receives queue apart), at each one's `link_bytes_s` (the
    payload bytes a second its link carries each way, as `recsync calibrate --network`
    measures them), arriving `latency_s` after it left. Nodes on one machine talk over its
    loopback (`CostModel.latency_s`, `bandwidth_bytes_s`). The messages crossing a link
    share it as TCP's connections do, not evenly: each message's share is weighted by a
    log-normal factor of sigma `flow_spread` (as `recsync calibrate --network` measured
    the spread of concurrent flows' rates; 0: even shares). No machines (the default):
    every node is a machine of its own, with a link of `CostModel.bandwidth_bytes_s`."""

    link_bytes_s: tuple[float, ...] = ()
    latency_s: float = 1.0e-4
    addresses: tuple[str, ...] = ()
    flow_spread: float = 0.0

    def __post_init__(self) -> None:
        if any(not rate > 0 for rate in self.link_bytes_s):
            raise ValueError(f"machines.link_bytes_s must all be > 0, got {self.link_bytes_s}")
        if not self.latency_s >= 0:
            raise ValueError(f"machines.latency_s must be >= 0, got {self.latency_s}")
        if not self.flow_spread >= 0:
            raise ValueError(f"machines.flow_spread must be >= 0, got {self.flow_spread}")
        if self.addresses and len(self.addresses) != len(self.link_bytes_s):
            raise ValueError(
                f"machines.addresses: {len(self.addresses)} addresses for "
                f"{len(self.link_bytes_s)} machines (link_bytes_s)"
            )

    @property
    def count(self) -> int:
        return len(self.link_bytes_s)

    def name(self, machine: int) -> str:
        """A machine's address (or `machine-I` where none is given)."""
        return self.addresses[machine] if self.addresses else f"machine-{machine}"


@dataclass(frozen=True)
class CostModel:
    """Seconds for every kind of work, in virtual time.

    compute: a worker computes `worker_flops` dense FLOP/s (a step's whole dense part:
    forward, backward and the dense optimizer's step on its replica, of which the optimizer
    takes `apply_share`; a worker that pushes its dense gradient instead, a gradient
    strategy's, is charged the rest); each worker's speed is that
    times a log-normal factor (sigma `speed_spread`), each batch times another (sigma
    `batch_noise`); stragglers multiply the time. network: a message costs `latency_s` plus
    its bytes over `bandwidth_bytes_s`, queued on the sender's and the receiver's NIC
    (one message at a time each, so a busy server saturates). servers: a request costs
    `request_s` plus `row_s` per embedding row (or `element_s` per dense element), plus
    its FLOPs (a group PS's FC parts) at `worker_flops`; a row of a hash table costs
    `hash_row_s` more (finding its key's slot, inserting a new one).
    reader: a reader node spends `reader_batch_s` making a batch of the synthetic stream, or
    `file_example_s` an example of the batch's format (FileReading) for file data; on an
    object store of `store_mbit` Mbit/s (0: local files), shared by the job's readers, an
    example also takes its `file_example_bytes` to arrive, which the reader overlaps with
    its parsing (it reads ahead): a batch costs the longer of the two.
    all-reduce: ring, 2(n-1) steps of latency plus 2(n-1)/n of the bytes over bandwidth.
    machines: where nodes share machines and their links (Machines; none: every node a
    machine of its own, `latency_s` and `bandwidth_bytes_s` its link's).
    messaging CPU: each end of a message spends, at a trainer's node (a worker's or the
    trainer's process: the caller), `message_cpu_s` plus `byte_cpu_s` per byte (pickling,
    the socket's copies), at any other node (a server, the reader: the callee)
    `server_message_cpu_s` plus `server_byte_cpu_s` per byte (None: the trainer's price).
    shared_cpus: 0 = every node has CPUs of its own (a cluster); C > 0 = all nodes share C
    cores (one machine, as `recsync calibrate` measures it), so compute, server work,
    reading and messaging queue for the same cores, of which each of the job's processes
    takes `process_idle_cpus` whatever it does (its runtime's threads waking), leaving the
    work the rest.
    """

    worker_flops: float = 2.0e10
    apply_share: float = 0.0
    speed_spread: float = 0.0
    batch_noise: float = 0.0
    latency_s: float = 1.0e-4
    bandwidth_bytes_s: float = 1.25e9
    request_s: float = 5.0e-5
    row_s: float = 2.0e-8
    hash_row_s: float = 6.0e-8
    element_s: float = 2.0e-9
    reader_batch_s: float = 1.0e-4
    file_example_s: FileReading = field(default_factory=FileReading)
    file_example_bytes: StoredBytes = field(default_factory=StoredBytes)
    store_mbit: float = 0.0
    message_cpu_s: float = 0.0
    server_message_cpu_s: float | None = None
    byte_cpu_s: float = 0.0
    server_byte_cpu_s: float | None = None
    shared_cpus: int = 0
    process_idle_cpus: float = 0.0
    stragglers: Stragglers = field(default_factory=Stragglers)
    faults: Faults = field(default_factory=Faults)
    machines: Machines = field(default_factory=Machines)

    def __post_init__(self) -> None:
        for name in ("worker_flops", "bandwidth_bytes_s"):
            if not getattr(self, name) > 0:
                raise ValueError(f"cost.{name} must be > 0, got {getattr(self, name)}")
        for name in (
            "speed_spread",
            "batch_noise",
            "latency_s",
            "request_s",
            "row_s",
            "hash_row_s",
            "element_s",
            "reader_batch_s",
            "store_mbit",
            "message_cpu_s",
            "byte_cpu_s",
            "process_idle_cpus",
        ):
            if getattr(self, name) < 0:
                raise ValueError(f"cost.{name} must be >= 0, got {getattr(self, name)}")
        for name in ("server_message_cpu_s", "server_byte_cpu_s"):
            value = getattr(self, name)
            if value is not None and not value >= 0:
                raise ValueError(f"cost.{name} must be >= 0, got {value}")
        if not 0.0 <= self.apply_share < 1.0:
            raise ValueError(f"cost.apply_share must be in [0, 1), got {self.apply_share}")

    def for_model(self, model: ModelSpec) -> CostModel:
        """The prices a job of `model` pays: a hash table's row costs `hash_row_s` more."""
        if model.hash_tables is None:
            return self
        return dataclasses.replace(self, row_s=self.row_s + self.hash_row_s)

    def for_data(self, fmt: str | None, batch_size: int, num_readers: int = 1) -> CostModel:
        """The prices a job reading `fmt` files (None: the synthetic stream) in batches of
        `batch_size` with `num_readers` readers pays: a batch costs its examples at
        `file_example_s` where that format was measured, or their bytes' transfer from the
        store at a reader's share of `store_mbit`, whichever is longer."""
        if fmt is None:
            return self
        example_s = self.file_example_s.example_s(fmt)
        batch_s = self.reader_batch_s if example_s is None else example_s * batch_size
        example_bytes = self.file_example_bytes.example_s(fmt)
        if self.store_mbit and example_bytes:
            store_bytes_s = self.store_mbit * 1e6 / 8 / num_readers
            batch_s = max(batch_s, example_bytes * batch_size / store_bytes_s)
        return dataclasses.replace(self, reader_batch_s=batch_s)

    def message_cpu_at(self, role: Role) -> float:
        """Seconds of CPU one end of a message takes at a node of `role`, bytes apart."""
        if role is Role.TRAINER or self.server_message_cpu_s is None:
            return self.message_cpu_s
        return self.server_message_cpu_s

    def byte_cpu_at(self, role: Role) -> float:
        """Seconds of CPU each byte of a message takes at either end at a node of `role`."""
        if role is Role.TRAINER or self.server_byte_cpu_s is None:
            return self.byte_cpu_s
        return self.server_byte_cpu_s

    @property
    def charges_messages(self) -> bool:
        """Whether a message's ends cost CPU at all."""
        prices = (self.message_cpu_s, self.server_message_cpu_s, self.byte_cpu_s)
        return any(prices) or bool(self.server_byte_cpu_s)

    def shared_stretch(self, num_processes: int) -> float:
        """How much longer work takes on the shared cores than on cores of its own, while
        `num_processes` processes each take `process_idle_cpus` of them (1.0 on a cluster)."""
        if not self.shared_cpus:
            return 1.0
        idle = num_processes * self.process_idle_cpus
        if idle >= 0.9 * self.shared_cpus:
            raise ConfigError(
                f"cost.process_idle_cpus = {self.process_idle_cpus}: the job's "
                f"{num_processes} processes idling at that would leave almost none of "
                f"cost.shared_cpus = {self.shared_cpus}"
            )
        return self.shared_cpus / (self.shared_cpus - idle)

    def server_s(self, work: Work) -> float:
        """Seconds a server spends on a request: per request, per row, per element, per
        batch read (the reader), and its FLOPs at a worker's speed (a group PS)."""
        return (
            self.request_s * work.requests
            + self.row_s * work.rows
            + self.element_s * work.elements
            + self.reader_batch_s * work.batches
            + work.flops / self.worker_flops
        )

    def allreduce_s(
        self, n: int, nbytes: int, bytes_s: float | None = None, latency_s: float | None = None
    ) -> float:
        """A ring all-reduce of `nbytes` among `n` members, over links of `bytes_s` and
        `latency_s` (None: the cost model's own)."""
        if n <= 1:
            return 0.0
        latency = self.latency_s if latency_s is None else latency_s
        rate = self.bandwidth_bytes_s if bytes_s is None else bytes_s
        return 2 * (n - 1) * latency + 2 * (n - 1) / n * nbytes / rate


class WorkerSpeeds:
    """Per-worker speed factors and straggler membership, drawn once from the seed."""

    def __init__(self, cost: CostModel, num_workers: int, seed: int):
        self.cost = cost
        self.seed = seed
        self.rng = np.random.default_rng(seed)
        self.factor = np.exp(self.rng.normal(0.0, cost.speed_spread, num_workers))
        self.num_stragglers = int(round(cost.stragglers.fraction * num_workers))
        self.straggler = self._draw(self.rng, num_workers)
        self.window = -1  # the stretch `straggler` was drawn for (stretches only)

    def _draw(self, rng: np.random.Generator, num_workers: int) -> np.ndarray:
        chosen = np.zeros(num_workers, dtype=bool)
        chosen[rng.permutation(num_workers)[: self.num_stragglers]] = True
        return chosen

    def is_straggler(self, worker: int, now: float) -> bool:
        """Whether `worker` is slow at `now` (in stretches: the set drawn for now's period,
        from its own generator, so the draws do not depend on the order of the calls)."""
        s = self.cost.stragglers
        if not s.start <= now < s.stop:
            return False
        if s.period_s:
            window = int((now - s.start) // s.period_s)
            if window != self.window:
                rng = np.random.default_rng([self.seed, window])
                self.straggler, self.window = self._draw(rng, len(self.factor)), window
        return bool(self.straggler[worker])

    def compute_s(self, worker: int, flops: float, now: float) -> float:
        cost = self.cost
        seconds = flops / (cost.worker_flops * self.factor[worker])
        if cost.batch_noise:
            seconds *= float(np.exp(self.rng.normal(0.0, cost.batch_noise)))
        if self.is_straggler(worker, now):
            seconds *= cost.stragglers.slowdown
        return float(seconds)

    def delayed(self) -> float:
        """Extra seconds for one response (fault injection)."""
        f = self.cost.faults
        if f.delay_fraction and self.rng.random() < f.delay_fraction:
            return f.delay_s
        return 0.0
