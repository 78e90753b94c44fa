"""A reader's share of the training stream: its batches in order, counted as they are drawn,
up to a limit, with its position in the share (what a checkpoint records) and each batch's
number as one reader would count it (GBA's token is that number over a step's batches)."""

from __future__ import annotations

from collections.abc import Iterator

from recsync.data.batch import Batch
from recsync.data.shares import Deal
from recsync.io.background import BackgroundBatches
from recsync.io.shared_text import SharedTextData
from recsync.io.sources import SyntheticData


class ReaderStream:
    """Reader `index`'s share of the stream (`deal`: how the readers share it; None: one
    reader), drawn batch by batch. Of each global step of `batches_per_step` batches it
    draws `step_share` (None: a step does not split evenly among the readers; the batch's
    number is then its place in the stream's order, `Deal.sequence`). With `limit`, no
    batch that would take the examples drawn past it is drawn."""

    def __init__(
        self,
        source: SyntheticData | SharedTextData,
        limit: int | None,
        deal: Deal | None,
        index: int,
        batches_per_step: int,
        step_share: int | None,
    ):
        self.source = source
        self.limit = limit
        self.deal, self.index = deal, index
        self.batches_per_step = batches_per_step
        self.step_share = batches_per_step if step_share is None else step_share
        self.steps_split = step_share is not None or batches_per_step == 1
        self._batches: Iterator[Batch] = iter(source.train_batches())
        self.batches_handed = 0  # batches drawn
        self.total_examples = 0  # their examples
        self.position = 0  # units of its share consumed (`ReaderReport.consumed`)
        self.exhausted = False  # its share ran out, or the limit was reached

    @property
    def shared(self) -> bool:
        """One of several readers (its batches are numbered in the stream's order)."""
        return self.deal is not None and self.deal.num_readers > 1

    def sequence(self) -> int:
        """The number of the batch it draws next, as one reader would count: step by step
        of its own share, or (a step that does not split among the readers) in the stream's
        order."""
        if self.deal is None or not self.shared:
            return self.batches_handed
        if self.steps_split:
            step, within = divmod(self.batches_handed, self.step_share)
            return step * self.batches_per_step + within
        batch_size = self.source.train.batch_size
        return self.deal.sequence(self.index, self.total_examples, batch_size)

    def draw(self) -> Batch | None:
        """The stream's next batch, counted as drawn (its number: `batches_handed` before);
        None once its share ran out or the limit is reached."""
        if self.exhausted:
            return None
        batch = next(self._batches, None)
        if batch is None:  # its share ran out: every unit of it consumed
            self.position = self.source.position_at_end(self.total_examples)
        limit = self.limit
        if (
            batch is not None
            and limit is not None
            and self.total_examples + batch.batch_size > limit
        ):
            batch = None  # it stays in the stream: not drawn
        if batch is None:
            self.exhausted = True
            return None
        self.batches_handed += 1
        self.total_examples += batch.batch_size
        self.position = self.source.position_after(self.total_examples)
        return batch

    def stop(self) -> int:
        """Draw nothing more; the examples drawn."""
        self.limit = self.total_examples
        return self.total_examples

    def total(self) -> int | None:
        """The examples the job's stream holds for its readers (None: not known): the
        source's, less its ranges handed out before the resumed job started."""
        total = self.source.total_examples
        if total is not None and self.deal is not None:
            total -= self.deal.base.handed - self.deal.base.prefix
        return total

    def helper_cpu_seconds(self) -> float:
        """What its background producer spent making the stream (0.0 reading inline)."""
        batches = self._batches
        return batches.cpu_seconds() if isinstance(batches, BackgroundBatches) else 0.0

    def storage_retries(self) -> int:
        """Its background producer's retried reads (the reads of a reader reading inline
        are its process's: the driver counts those)."""
        batches = self._batches
        return batches.storage_retries() if isinstance(batches, BackgroundBatches) else 0

    def close(self) -> None:
        batches = self._batches
        if isinstance(batches, BackgroundBatches):
            batches.close()
