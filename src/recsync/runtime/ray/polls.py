"""The readers' progress as the driver polls it while the job trains: how many examples
they handed out and when, the rate between the last two polls, and how long to wait for
the next poll (sooner as the next evaluation mark nears, so that each mark's snapshot is
taken close to it)."""

from __future__ import annotations

POLL_EVERY_S = 0.5  # the reader's progress, unless an evaluation mark is nearer
POLL_NEAR_MARK_S = 0.01  # the shortest wait between polls as a mark nears
POLL_UNTIL_RATE_S = 0.05  # between polls while evaluations are asked and no rate is known


class Polls:
    """What the polls saw: `handed` examples handed out since the job's first start at
    the last poll, `polled_s` seconds into training then, `rate` examples a second between
    the last two polls, and every poll's (seconds, examples handed out in this start)."""

    def __init__(self) -> None:
        self.polled_s = 0.0
        self.handed = 0
        self.rate = 0.0
        self.progress: list[tuple[float, int]] = []

    def polled(self, handed: int, seconds: float, before: int) -> None:
        """A poll `seconds` into training found `handed` examples handed out (`before` of
        them before this start)."""
        if seconds > self.polled_s:
            self.rate = (handed - self.handed) / (seconds - self.polled_s)
        self.handed, self.polled_s = handed, seconds
        self.progress.append((seconds, handed - before))

    def wait_s(self, next_mark: int | None) -> float:
        """Seconds to the next poll (`next_mark`: the next evaluation mark, None: none is
        asked). Until a rate is known, soon: a fast job may pass its first marks within one
        long wait."""
        if next_mark is None:
            return POLL_EVERY_S
        if self.rate <= 0:
            return POLL_UNTIL_RATE_S
        # half the time to the mark at the last rate: a job speeding up (its processes warm,
        # its cores freed) still meets the mark, not the one after it too, in one wait
        to_mark = (next_mark - self.handed) / self.rate
        return min(POLL_EVERY_S, max(POLL_NEAR_MARK_S, to_mark / 2))
