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
    """Stragglers: a fraction of the worker threads computes slower for a while."""

    fraction: float = field(
        default=0.0,
        metadata={"doc": "The share of worker threads that are slow.", "values": "[0, 1]"},
    )
    slowdown: float = field(
        default=1.0,
        metadata={"doc": "How many times slower a straggler computes.", "values": ">= 1"},
    )
    start: float = field(
        default=0.0, metadata={"doc": "Virtual seconds into the job when the slowness begins."}
    )
    stop: float = field(
        default=float("inf"),
        metadata={"doc": "Virtual seconds into the job when it ends (inf: never)."},
    )
    period_s: float = field(
        default=0.0,
        metadata={
            "doc": "Draw the slow threads anew every this many seconds, from the job's seed, "
            "as on a shared cluster (0: the same ones throughout).",
            "values": ">= 0, finite",
        },
    )

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
    """Injected faults: delayed replies, a crashed trainer, the pause of a checkpoint, and
    nodes lost at random.

    A crashed trainer's worker threads stop at their next action, the batches they held are
    lost (counted and reported), the servers of a gradient strategy learn its workers are
    gone. The Ray engine paused 0.14-0.18 s a cut for the default job, the workers' parking
    included (`benchmarks/bench_checkpoint.py`). Node losses: runtime/sim/faulty.py."""

    delay_fraction: float = field(
        default=0.0,
        metadata={
            "doc": "The share of lookup and dense pull replies delayed.",
            "values": "[0, 1]",
        },
    )
    delay_s: float = field(
        default=0.0, metadata={"doc": "Seconds a delayed reply is late.", "values": ">= 0"}
    )
    delay_lookups: bool = field(
        default=True,
        metadata={
            "doc": "Delay embedding lookups' replies too; false: dense pulls only (as PSP's "
            "model, which has no embeddings)."
        },
    )
    crash_trainer: int | None = field(
        default=None,
        metadata={
            "doc": "The trainer that crashes at crash_at_s, its batches lost.",
            "unset": "no crash",
            "values": ">= 0",
        },
    )
    crash_at_s: float = field(
        default=0.0,
        metadata={
            "doc": "Virtual seconds into the job when crash_trainer crashes.",
            "values": ">= 0",
        },
    )
    cut_s: float = field(
        default=0.0,
        metadata={
            "doc": "Seconds a checkpoint taken while training keeps the reader paused after "
            "every worker parked (0: none).",
            "values": ">= 0",
        },
    )
    trainer_mtbf_s: float = field(
        default=0.0,
        metadata={
            "doc": "Mean seconds until a trainer is lost, exponentially distributed (0: never).",
            "values": ">= 0",
        },
    )
    server_mtbf_s: float = field(
        default=0.0,
        metadata={
            "doc": "Mean seconds until a server (embedding, sync, dense, group) is lost (0: "
            "never).",
            "values": ">= 0",
        },
    )
    reader_mtbf_s: float = field(
        default=0.0,
        metadata={"doc": "Mean seconds until a reader is lost (0: never).", "values": ">= 0"},
    )
    detect_s: float = field(
        default=1.0,
        metadata={"doc": "Seconds until a lost node is noticed.", "values": ">= 0"},
    )
    restart_s: float = field(
        default=10.0,
        metadata={
            "doc": "Seconds from noticing a loss until the job restarts.",
            "values": ">= 0",
        },
    )

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
    (data.source), as `recsync calibrate --data FILE` measured the job's own files.

    The seconds count reading and parsing them, holding the test rows out, handing each
    batch from the producer to the reader's process (pickled through the pipe and back)."""

    criteo: float | None = field(
        default=None,
        metadata={
            "doc": "Seconds an example of Criteo TSV files.",
            "unset": "a batch costs reader_batch_s",
            "values": ">= 0",
        },
    )
    libsvm: float | None = field(
        default=None,
        metadata={
            "doc": "Seconds an example of libSVM and libFM files.",
            "unset": "a batch costs reader_batch_s",
            "values": ">= 0",
        },
    )
    libffm: float | None = field(
        default=None,
        metadata={
            "doc": "Seconds an example of libffm files.",
            "unset": "a batch costs reader_batch_s",
            "values": ">= 0",
        },
    )
    csv: float | None = field(
        default=None,
        metadata={
            "doc": "Seconds an example of CSV files.",
            "unset": "a batch costs reader_batch_s",
            "values": ">= 0",
        },
    )
    parquet: float | None = field(
        default=None,
        metadata={
            "doc": "Seconds an example of Parquet files.",
            "unset": "a batch costs reader_batch_s",
            "values": ">= 0",
        },
    )

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
    the data is on an object store (at `store_mbit`)."""

    criteo: float | None = field(
        default=None,
        metadata={
            "doc": "Bytes an example of Criteo TSV files.",
            "unset": "no download time",
            "values": ">= 0",
        },
    )
    libsvm: float | None = field(
        default=None,
        metadata={
            "doc": "Bytes an example of libSVM and libFM files.",
            "unset": "no download time",
            "values": ">= 0",
        },
    )
    libffm: float | None = field(
        default=None,
        metadata={
            "doc": "Bytes an example of libffm files.",
            "unset": "no download time",
            "values": ">= 0",
        },
    )
    csv: float | None = field(
        default=None,
        metadata={
            "doc": "Bytes an example of CSV files.",
            "unset": "no download time",
            "values": ">= 0",
        },
    )
    parquet: float | None = field(
        default=None,
        metadata={
            "doc": "Bytes an example of Parquet files.",
            "unset": "no download time",
            "values": ">= 0",
        },
    )


@dataclass(frozen=True)
class Machines:
    """The machines a job runs on and their network links, where nodes share machines
    (as `recsync calibrate --network` measures them); none: every node is a machine of its
    own.

    The nodes are placed on them by `coordinator/machines.py`'s rule and the job's pins
    (`cluster.placement`). A message between two machines queues on the sender's link,
    then the receiver's (each full duplex: what a machine sends and what it receives queue
    apart). Nodes on one machine talk over its loopback (`CostModel.latency_s`,
    `bandwidth_bytes_s`)."""

    link_bytes_s: tuple[float, ...] = field(
        default=(),
        metadata={
            "doc": "Per machine, the payload bytes a second its link carries each way.",
            "unset": "no machines (every node a machine of its own, with a link of "
            "bandwidth_bytes_s)",
            "values": "each > 0",
        },
    )
    latency_s: float = field(
        default=1.0e-4,
        metadata={
            "doc": "Seconds a message between two machines takes beyond its queueing.",
            "values": ">= 0",
        },
    )
    addresses: tuple[str, ...] = field(
        default=(),
        metadata={
            "doc": "Per machine, its address, as cluster.placement names it.",
            "unset": "machine-0, machine-1, ...",
        },
    )
    flow_spread: float = field(
        default=0.0,
        metadata={
            "doc": "Sigma of the log-normal weight of each message's share of a link, as "
            "TCP's flows share it (0: even shares).",
            "values": ">= 0",
        },
    )

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
    """The simulator's prices: seconds for every kind of work, in virtual time.

    network: a message costs `latency_s` plus its bytes over `bandwidth_bytes_s`, queued on
    the sender's and the receiver's NIC (one message at a time each, so a busy server
    saturates). servers: a request costs `request_s` plus `row_s` per embedding row (or
    `element_s` per dense element), plus its FLOPs (a group PS's FC parts) at
    `worker_flops`. reader: on an object store, a batch costs the longer of parsing and
    downloading its examples (the reader reads ahead). all-reduce: ring, 2(n-1) steps of
    latency plus 2(n-1)/n of the bytes over bandwidth.
    """

    worker_flops: float = field(
        default=2.0e10,
        metadata={
            "doc": "Dense FLOP/s of a worker: a step's forward, backward and dense optimizer "
            "step on its replica.",
            "values": "> 0",
        },
    )
    apply_share: float = field(
        default=0.0,
        metadata={
            "doc": "The share of a step's dense compute that is the optimizer's step (not "
            "charged to a worker that pushes its gradient instead).",
            "values": "[0, 1)",
        },
    )
    speed_spread: float = field(
        default=0.0,
        metadata={
            "doc": "Sigma of the log-normal speed factor each worker draws once (0: all equal).",
            "values": ">= 0",
        },
    )
    batch_noise: float = field(
        default=0.0,
        metadata={
            "doc": "Sigma of the log-normal factor each batch's compute time draws (0: none).",
            "values": ">= 0",
        },
    )
    latency_s: float = field(
        default=1.0e-4,
        metadata={"doc": "Seconds a message takes beyond its bytes' transfer.", "values": ">= 0"},
    )
    bandwidth_bytes_s: float = field(
        default=1.25e9,
        metadata={"doc": "Bytes a second a node's network card carries.", "values": "> 0"},
    )
    request_s: float = field(
        default=5.0e-5,
        metadata={"doc": "Seconds of a server's work per request.", "values": ">= 0"},
    )
    row_s: float = field(
        default=2.0e-8,
        metadata={
            "doc": "Seconds of an embedding server's work per embedding row looked up or updated.",
            "values": ">= 0",
        },
    )
    hash_row_s: float = field(
        default=6.0e-8,
        metadata={
            "doc": "Seconds more per row of a hash table (finding its key's slot, inserting a "
            "new one).",
            "values": ">= 0",
        },
    )
    element_s: float = field(
        default=2.0e-9,
        metadata={"doc": "Seconds of a server's work per dense element.", "values": ">= 0"},
    )
    reader_batch_s: float = field(
        default=1.0e-4,
        metadata={
            "doc": "Seconds a reader spends making a batch of the synthetic stream (and of a "
            "file format not measured).",
            "values": ">= 0",
        },
    )
    file_example_s: FileReading = field(
        default_factory=FileReading,
        metadata={"doc": "Seconds a reader spends on an example of file data, by format."},
    )
    file_example_bytes: StoredBytes = field(
        default_factory=StoredBytes,
        metadata={"doc": "Bytes an example of file data takes as stored, by format."},
    )
    store_mbit: float = field(
        default=0.0,
        metadata={
            "doc": "Mbit/s of the object store the data is on, shared by the job's readers "
            "(0: local files).",
            "values": ">= 0",
        },
    )
    message_cpu_s: float = field(
        default=0.0,
        metadata={
            "doc": "CPU seconds each end of a message takes at a trainer's node (pickling, "
            "the socket's copies).",
            "values": ">= 0",
        },
    )
    server_message_cpu_s: float | None = field(
        default=None,
        metadata={
            "doc": "CPU seconds each end of a message takes at any other node (a server, "
            "the reader).",
            "unset": "message_cpu_s",
            "values": ">= 0",
        },
    )
    byte_cpu_s: float = field(
        default=0.0,
        metadata={
            "doc": "CPU seconds per byte of a message at a trainer's node.",
            "values": ">= 0",
        },
    )
    server_byte_cpu_s: float | None = field(
        default=None,
        metadata={
            "doc": "CPU seconds per byte of a message at any other node.",
            "unset": "byte_cpu_s",
            "values": ">= 0",
        },
    )
    shared_cpus: int = field(
        default=0,
        metadata={
            "doc": "0: every node has CPUs of its own (a cluster); C > 0: all nodes share C "
            "cores (one machine), their work queueing for them."
        },
    )
    process_idle_cpus: float = field(
        default=0.0,
        metadata={
            "doc": "With shared_cpus: the cores each of the job's processes takes whatever it "
            "does (its runtime's threads waking).",
            "values": ">= 0",
        },
    )
    stragglers: Stragglers = field(
        default_factory=Stragglers, metadata={"doc": "Slow worker threads."}
    )
    faults: Faults = field(default_factory=Faults, metadata={"doc": "Injected faults."})
    machines: Machines = field(
        default_factory=Machines,
        metadata={"doc": "Machines shared by several nodes, and their links."},
    )

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
