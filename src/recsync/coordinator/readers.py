"""A job's readers seen as one: where the stream stands, the reports joined, and (for a
driver that holds the reader nodes in its own process, the simulator) the group's cut.

Each trainer takes its batches from one reader (`ClusterSpec.reader_of`); each reader hands
out its share of the stream (data/shares.py) and counts what it handed to each trainer, so
the job's counts are the readers' summed, and the stream's position follows from every
reader's count (`Deal.position_after`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from recsync.coordinator.node_specs import ReaderSpec
from recsync.coordinator.reader import ReaderNode, ReaderReport
from recsync.coordinator.topology import Topology
from recsync.data.batch import Batch
from recsync.data.shares import Deal, StreamPosition
from recsync.data.skips import ShareSkips
from recsync.protocol.address import Role
from recsync.protocol.messages import Message
from recsync.protocol.reading import PauseReading


def deal_of(topology: Topology) -> Deal:
    """How the job's readers share the stream."""
    readers = topology.of_role(Role.READER)
    assert readers and isinstance(readers[0], ReaderSpec)
    return readers[0].deal


def data_unit_of(topology: Topology) -> str | None:
    """What the job's stream positions count: None, examples; "slots/<L>" under line
    shares (a checkpoint's `data_unit`)."""
    readers = topology.of_role(Role.READER)
    assert readers and isinstance(readers[0], ReaderSpec)
    lines = readers[0].lines
    return None if lines is None else lines.unit


def position_of(topology: Topology, handed: Sequence[int]) -> StreamPosition:
    """The stream's position once reader r consumed `handed[r]` units of its share in this
    job (examples; slots under line shares)."""
    return deal_of(topology).position_after(handed)


def joined_report(reports: Sequence[ReaderReport]) -> ReaderReport:
    """One report for the job's readers: counts summed (per trainer, each trainer's own
    reader counted it), the held-out set of the first (every reader holds the same split
    out; under line shares only the first reads it), the skips of the first or, under
    line shares (each reader parsed its blocks), all merged; stopped if any was told to
    stop."""
    first = reports[0]
    if len(reports) == 1:
        return first

    def summed(lists: list[list[int]]) -> list[int]:
        return [sum(column) for column in zip(*lists, strict=True)] if lists[0] else []

    # when the data ran out: each reader's count when its share did (else its total)
    at_stop = None
    if any(r.handed_at_stop is not None for r in reports):
        at_stop = sum(
            r.total_examples if r.handed_at_stop is None else r.handed_at_stop for r in reports
        )
    return ReaderReport(
        summed([r.handed_examples for r in reports]),
        sum(r.total_examples for r in reports),
        at_stop,
        first.test,
        first.teacher_auc,
        _merged_skips([r.skipped for r in reports]),
        any(r.stopped for r in reports),
        summed([r.requeued_examples for r in reports]),
        summed([r.previous_examples for r in reports]),
        None if first.position is None else sum(r.consumed for r in reports),
        sum(r.storage_retries for r in reports),
    )


def _merged_skips(skipped: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The readers' skip reports as one: the first's where each read the stream whole;
    under line shares (each counted its own blocks, `first_at` said) all merged."""
    if "first_at" not in skipped[0]:
        return skipped[0]
    reports = [ShareSkips.from_dict(report) for report in skipped]
    return reports[0].merged(reports[1:]).as_dict()


def common_step(boundaries: Sequence[int | None]) -> int | None:
    """Where several readers that each paused at a step's end of their own (a batch number
    in the stream's order) pause together: the latest; None if there is nothing to agree
    (one reader, or steps of one batch)."""
    known = [b for b in boundaries if b is not None]
    if len(boundaries) < 2 or not known or min(known) == max(known):
        return None
    return max(known)


def pause_together(ask_all: Callable[[Message], Sequence[Any]]) -> None:
    """Begin a cut, whichever driver holds the readers (`ask_all`: a message to every
    reader, their replies in reader order): every reader pauses at the same step's end
    (`common_step`)."""
    until = common_step(ask_all(PauseReading()))
    if until is not None:
        ask_all(PauseReading(until))


class ReaderGroup:
    """The job's reader nodes, in reader order, for a driver holding them in-process: the
    counts summed, a cut settled once every reader's is, messages for all sent to each."""

    def __init__(self, topology: Topology, readers: Sequence[ReaderNode]):
        self.topology = topology
        self.readers = list(readers)
        self.cluster = topology.spec.cluster
        self._counted = self.totals  # each reader's count as `handed` last took it
        self.handed = sum(self._counted)  # the readers' examples handed out, summed

    @property
    def total_examples(self) -> int:
        return sum(r.total_examples for r in self.readers)

    def recount(self, r: int) -> int:
        """Reader `r` handed out a batch, or was replaced: `handed` takes its count as it is
        now (no pass over every reader); returns it."""
        total = self.readers[r].total_examples
        self.handed += total - self._counted[r]
        self._counted[r] = total
        return self.handed

    @property
    def totals(self) -> list[int]:
        """Examples each reader handed out, in reader order."""
        return [r.total_examples for r in self.readers]

    @property
    def positions(self) -> list[int]:
        """Units of its share each reader consumed (examples; slots under line shares)."""
        return [r.stream.position for r in self.readers]

    @property
    def consumed(self) -> int:
        """Units of the stream the readers consumed in this run."""
        return sum(self.positions)

    @property
    def handed_examples(self) -> list[int]:
        return [
            sum(column) for column in zip(*(r.handed_examples for r in self.readers), strict=True)
        ]

    @property
    def cut_settled(self) -> bool:
        return all(r.cut_settled for r in self.readers)

    @property
    def at_cut(self) -> bool:
        return all(r.at_cut for r in self.readers)

    @property
    def position(self) -> StreamPosition:
        """Where the stream stands: what every reader handed out, since the job's start."""
        return position_of(self.topology, self.positions)

    def of_trainer(self, trainer: int) -> ReaderNode:
        return self.readers[self.cluster.reader_of(trainer)]

    def pause(self) -> None:
        """Begin a cut: every reader pauses at the same step's end (`pause_together`)."""
        pause_together(lambda message: [r.handle(message) for r in self.readers])

    def handle_all(self, message: Message) -> None:
        """Send a message of the job's (pause, resume, stop) to every reader."""
        for reader in self.readers:
            reader.handle(message)

    def test_set(self) -> Batch | None:
        return self.readers[0].stream.source.test_set()
