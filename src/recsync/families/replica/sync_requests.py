"""Fixed-rate syncs of a collective replica strategy: worker threads ask, the trainer's one
sync thread serves every request made so far with one round (a collective must be joined
by one thread per trainer, in the same order on every trainer)."""

from __future__ import annotations


class SyncRequests:
    """Counters shared by a trainer's worker threads and its sync thread."""

    def __init__(self) -> None:
        self.requested = 0  # requests made
        self.served = 0  # requests whose round has completed
        self.covering = 0  # requests the round in progress serves

    def request(self) -> int:
        """A worker asks for a sync; returns its ticket."""
        self.requested += 1
        return self.requested

    @property
    def pending(self) -> bool:
        return self.requested != self.served

    def start_round(self) -> None:
        self.covering = self.requested

    def end_round(self) -> None:
        self.served = self.covering

    def is_served(self, ticket: int) -> bool:
        return self.served >= ticket
