"""What each worker of a trainer took from its reader, for a lost reader's replacement.

Each worker logs every reply of its reader it takes: a batch's number, or that the data is
consumed. When the reader is lost, the driver asks the trainer (`CloseReceipts`, answered
by trainer/stats.py's `ReceivingTrainer`) what its workers took; the replacement reader is
built from that (coordinator/reader_replay.py): what a worker took is counted, what it
holds unpushed is still its own, anything else the lost reader drew is handed out again.
A worker may take a reply of the lost reader after that answer (a reply asked ahead of
time, or one on its way): such a reply is void, the worker drops it and asks again, and
the replacement hands that batch out.

Which of the two came first is decided by one log per worker that both append to: the
worker its entries, the driver's question a fence (the incarnations it voids). Appending to
an array is atomic (one call under the interpreter's lock), so the log's order is the
order things happened, and the worker and the answer read it alike: an entry is void if a
fence before it voids its reader's incarnation. No lock is taken: the worker's loop never
waits for the driver. An entry is one int (8 bytes a batch taken)."""

from __future__ import annotations

from array import array
from collections.abc import Iterable

from recsync.protocol.reading import HandedBatch

INCARNATIONS = 1 << 16  # an entry: (the batch's number + 1, 0: the data consumed) x this
# + the reader's incarnation; a fence: -1 - the incarnation from which replies are valid


class ReceiptLog:
    """One log per worker of what it took from its reader (module docstring)."""

    def __init__(self, num_workers: int):
        self.logs = [array("q") for _ in range(num_workers)]
        self._read = [0] * num_workers  # per worker: entries its own loop has read
        self._fence = [0] * num_workers  # per worker: the fence as its own loop read it

    def take(self, thread: int, handed: HandedBatch) -> bool:
        """Worker `thread` takes `handed`: logged (a batch, or the data consumed); False if
        it is void (a reply of a lost reader, fenced before it was logged): drop it and ask
        again."""
        incarnation = handed.reader_incarnation
        assert 0 <= incarnation < INCARNATIONS, incarnation
        log = self.logs[thread]
        if handed.paused:  # nothing to log: void if fenced now
            return incarnation >= self._fence_before(thread, len(log))
        number = -1 if handed.batch is None else handed.number
        log.append((number + 1) * INCARNATIONS + incarnation)
        at = len(log) - 1
        while log[at] < 0:  # only fences can have come after it: the worker logs alone
            at -= 1
        valid = incarnation >= self._fence_before(thread, at)
        self._read[thread] = at + 1
        return valid

    def _fence_before(self, thread: int, end: int) -> int:
        """The fence in force at entry `end` of the worker's log (read by its own loop)."""
        fence = self._fence[thread]
        for entry in self.logs[thread][self._read[thread] : end]:
            if entry < 0:
                fence = max(fence, -1 - entry)
        self._fence[thread], self._read[thread] = fence, end
        return fence

    def close(self, fence: int) -> list[tuple[list[int], bool]]:
        """Fence every worker's log at `fence` (the replacement reader's incarnation): per
        worker, the numbers of the batches it took and keeps, in order, and whether it was
        told the data is consumed."""
        taken = []
        for log in self.logs:
            log.append(-1 - fence)
            taken.append(kept(log[:]))
        return taken


def kept(log: Iterable[int]) -> tuple[list[int], bool]:
    """What a log says its worker took and kept: the batches' numbers, and whether it was
    told the data is consumed (entries a fence before them voids left out)."""
    fence, numbers, dry = 0, [], False
    for entry in log:
        if entry < 0:
            fence = max(fence, -1 - entry)
            continue
        plus_one, incarnation = divmod(entry, INCARNATIONS)
        if incarnation < fence:
            continue
        if plus_one:
            numbers.append(plus_one - 1)
        else:
            dry = True
    return numbers, dry
