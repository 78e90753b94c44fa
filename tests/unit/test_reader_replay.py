"""A lost reader replaced alone (coordinator/reader_replay.py), driven event by event: the
workers' logs of what they took and the fence after which a lost reader's reply is void
(trainer/receipts.py), and the replacement's replay of the stream: batches taken counted
and not handed again, those unpushed still their worker's, those never taken handed out
first with their own token, a lost trainer's trained batches its own, the counts and the
tokens as if nothing was lost."""

from __future__ import annotations

import dataclasses
from array import array

import pytest
import torch

from recsync.coordinator.reader import ReaderNode
from recsync.coordinator.reader_replay import ReaderLedger, ReplayPlan, replay
from recsync.coordinator.recovery import RecoveryPolicy
from recsync.data.synthetic import SyntheticSpec
from recsync.families import strategy_config
from recsync.io.sources import SyntheticData
from recsync.optim.train_spec import TrainSpec
from recsync.protocol.reading import (
    CloseReceipts,
    HandedBatch,
    NextBatch,
    Park,
    PauseReading,
    Receipts,
    Requeue,
)
from recsync.trainer.receipts import ReceiptLog, kept
from recsync.trainer.stats import ReceivingTrainer, TrainerStats

DATA = SyntheticSpec(num_train=2_000, num_test=100, num_dense=4, table_rows=(50,) * 2)
TRAIN = TrainSpec(batch_size=100)
WORKERS = 2  # per trainer; two trainers


class Steps:
    """A token per batch: its step of 4 batches (as GBA's counts a batch's step)."""

    def token(self, batches_handed: int) -> int:
        return batches_handed // 4


def reader(**options) -> ReaderNode:
    return ReaderNode(SyntheticData(DATA, TRAIN), 2, num_workers=2 * WORKERS, **options)


class Trainer(ReceivingTrainer):
    """A trainer as its reader sees it: its workers take batches (logged) and push."""

    def __init__(self, index: int, incarnation: int = 0):
        self.index, self.incarnation = index, incarnation
        self.stats = TrainerStats(WORKERS)

    def push(self, thread: int) -> None:
        self.stats.count_step(thread, TRAIN.batch_size, 0.5)


def take(trainer: Trainer, reader: ReaderNode, thread: int, **ask) -> HandedBatch:
    """Worker `thread` of `trainer` asks and takes the reply (True: kept, not void)."""
    worker = trainer.index * WORKERS + thread
    request = NextBatch(
        trainer.index,
        worker=worker,
        pushed=trainer.stats.pushed(thread),
        incarnation=trainer.incarnation,
        **ask,
    )
    handed = reader.handle(request)
    assert trainer.stats.receipts.take(thread, handed)
    return handed


def lost_reply(trainer: Trainer, reader: ReaderNode, thread: int) -> HandedBatch:
    """Worker `thread` asks; the reader dies before its reply arrives."""
    request = NextBatch(
        trainer.index,
        worker=trainer.index * WORKERS + thread,
        pushed=trainer.stats.pushed(thread),
        incarnation=trainer.incarnation,
    )
    return reader.handle(request)


def replaced(trainers: list[Trainer], ledger: ReaderLedger | None = None, **options) -> ReaderNode:
    """The lost reader's replacement: its trainers' receipts, fenced, then the replay."""
    ledger = ledger or ReaderLedger()
    fence = ledger.next_incarnation(0)
    receipts = {t.index: t.handle(CloseReceipts(fence)) for t in trainers}
    incarnations = {t.index: t.incarnation for t in trainers}
    plan = ledger.plan(0, receipts, incarnations, stopped=False)
    replacement = reader(**options)
    replay(replacement, plan)
    return replacement


def same(a: HandedBatch, b: HandedBatch) -> bool:
    return a.batch is not None and b.batch is not None and torch.equal(a.batch.dense, b.batch.dense)


def test_a_worker_s_log_keeps_what_it_took_before_the_fence_and_voids_what_came_after():
    log = ReceiptLog(2)
    first = HandedBatch(object(), number=0)  # type: ignore[arg-type]
    assert log.take(0, first) and log.take(1, dataclasses.replace(first, number=1))
    assert log.close(1) == [([0], False), ([1], False)]
    late = HandedBatch(object(), number=2)  # type: ignore[arg-type]  # the lost reader's
    assert not log.take(0, late)
    assert not log.take(1, HandedBatch(None, paused=True))  # a pause of the lost reader too
    assert log.take(1, HandedBatch(None, reader_incarnation=1))  # the replacement: data out
    assert log.take(0, HandedBatch(object(), number=2, reader_incarnation=1))  # type: ignore[arg-type]
    assert log.close(2) == [([0, 2], False), ([1], True)]  # the void one left out


def test_a_fence_that_lands_between_the_worker_s_log_and_its_check_is_decided_by_order():
    # the driver's question and the worker's take on two threads: whichever entry comes
    # first in the log, worker and answer read it alike (no lock)
    log = ReceiptLog(1)

    class FencedRightAfter(array):
        def append(self, entry) -> None:
            super().append(entry)
            if entry >= 0:
                answers.append(log.close(1))  # the driver's fence, after the worker's entry

    answers: list = []
    log.logs[0] = FencedRightAfter("q")
    assert log.take(0, HandedBatch(object(), number=7))  # type: ignore[arg-type]
    assert answers == [[([7], False)]]  # the answer has it: the worker trains it
    log = ReceiptLog(1)
    log.close(1)  # the fence first: the reply is void, and the answer does not have it
    assert not log.take(0, HandedBatch(object(), number=7))  # type: ignore[arg-type]
    assert kept(log.logs[0]) == ([], False)


def test_a_trainer_answers_for_its_workers_and_the_processes_answers_join():
    trainer = Trainer(1)
    trainer.stats.receipts.take(0, HandedBatch(object(), number=3))  # type: ignore[arg-type]
    trainer.push(0)
    receipts = trainer.handle(CloseReceipts(1))
    assert receipts.received == {2: [3], 3: []} and receipts.pushed == {2: 1, 3: 0}
    other = Receipts({2: [], 3: [4, 6]}, [3], {2: 1, 3: 1})  # worker 3's own process
    joined = receipts.joined(other)
    assert joined.received == {2: [3], 3: [4, 6]} and joined.dry == [3]
    assert joined.pushed == {2: 1, 3: 1}


def test_the_replacement_counts_what_was_taken_keeps_what_is_held_and_hands_out_the_rest():
    lost = reader(tokens=Steps())
    one, two = Trainer(0), Trainer(1)
    first = [take(t, lost, w, with_token=True) for t in (one, two) for w in (0, 1)]  # 0-3
    one.push(0)  # worker 0 trained batch 0: its pushes left
    fourth = take(one, lost, 0, with_token=True)  # batch 4 (its request says 1 pushed)
    never = lost_reply(one, lost, 1)  # batch 5 drawn, its reply lost with the reader
    sixth = take(two, lost, 0, with_token=True)  # batch 6
    assert [h.number for h in (*first, fourth, never, sixth)] == list(range(7))
    new = replaced([one, two], tokens=Steps())
    assert new.incarnation == 1 and new.stream.batches_handed == 7 and new.total_examples == 700
    assert new.handed_examples == [300, 300] and new.stream.position == 700
    handouts = new.handouts
    assert [h.number for h in handouts.again] == [5]
    held = {w: [h.number for h in q] for w, q in handouts.held.items()}
    assert held == {0: [4], 1: [1], 2: [2, 6], 3: [3]} and handouts.trained[0] == [0]
    # worker 3 asks first: it gets batch 5, the same one, with its own token; then 7
    again = take(two, new, 1, with_token=True)
    assert again.number == 5 and same(again, never) and again.token == 5 // 4
    assert again.reader_incarnation == 1
    nxt = take(two, new, 1, with_token=True)
    assert nxt.number == 7 and nxt.token == 7 // 4
    # the stream from here is the one the lost reader would have handed out
    go_on = [lost_reply(one, lost, 0) for _ in range(3)]
    assert [b.number for b in go_on] == [7, 8, 9] and same(nxt, go_on[0])


def test_every_batch_of_the_stream_is_handed_out_once_across_the_loss():
    lost = reader()
    one, two = Trainer(0), Trainer(1)
    taken: list[int] = []
    for _ in range(3):
        for t in (one, two):
            for w in (0, 1):
                taken.append(take(t, lost, w).number)
                t.push(w)
    lost_reply(two, lost, 1)  # batch 12, never delivered
    new = replaced([one, two])
    while True:
        handed = take(two, new, 1)
        if handed.batch is None:
            break
        taken.append(handed.number)
        two.push(1)
    assert sorted(taken) == list(range(DATA.num_train // TRAIN.batch_size))
    report = new.report()
    assert report.total_examples == DATA.num_train == sum(report.handed_examples)
    assert new.exhausted and report.handed_at_stop == DATA.num_train


def test_a_lost_trainer_s_batches_stay_its_own_or_go_out_once():
    lost, ledger = reader(), ReaderLedger()
    one, two = Trainer(0), Trainer(1)
    take(one, lost, 0)  # batch 0
    take(two, lost, 0)  # batch 1
    one.push(0)
    take(one, lost, 0)  # batch 2 (batch 0 pushed)
    take(one, lost, 1)  # batch 3
    requeued = lost.handle(Requeue(0, range(0, 2)))  # trainer 0 lost: 2 and 3 go out again
    assert (requeued.examples, requeued.trained) == (200, [0])
    assert ledger.requeued(0, 0, requeued) == 200
    one = Trainer(0, incarnation=1)
    assert take(two, lost, 1).number == 2  # batch 2 again; batch 3 still waits
    new = replaced([one, two], ledger)
    handouts = new.handouts
    assert not handouts.again and handouts.incarnation == [1, 0]  # 3: past what was taken
    report = new.report()
    assert report.previous_examples == [100, 0] and report.requeued_examples == [0, 0]
    assert report.handed_examples == [100, 200]  # trainer 0: what its lost one trained
    assert take(one, new, 0).number == 3  # drawn again; the new incarnation is current
    # trainer 1 lost after the replacement: what it held goes out again, once more
    two.push(0)
    assert take(two, new, 0).number == 4  # its request says batch 1's pushes left
    requeued = new.handle(Requeue(1, range(2, 4)))
    assert (requeued.examples, requeued.trained) == (200, [1])  # 4 and 2 go out again
    assert new.report().previous_examples == [100, 100]


def test_a_lost_trainer_s_parks_stand_no_more_its_next_incarnation_parks_again():
    # trainer 1 (workers 2, 3) parks for a cut, is lost and restarted: the cut waits for
    # its new loops' pushes, not for the dead ones' parks
    node = reader(batches_per_step=4)
    one, two = Trainer(0), Trainer(1)
    for trainer, thread in ((one, 0), (one, 1), (two, 0), (two, 1)):
        take(trainer, node, thread)  # a step of 4 batches
    node.handle(PauseReading())
    assert take(two, node, 0).paused and take(two, node, 1).paused
    node.handle(Park(2))
    node.handle(Park(3))
    node.handle(Requeue(1, range(2, 4)))  # trainer 1 lost: its batches 2 and 3 again
    one.push(0)
    one.push(1)
    assert take(one, node, 0).number == 2 and take(one, node, 1).number == 3
    one.push(0)
    one.push(1)
    assert take(one, node, 0).paused and take(one, node, 1).paused
    node.handle(Park(0))
    node.handle(Park(1))
    assert not node.at_cut  # workers 2 and 3 have not parked since
    two = Trainer(1, incarnation=1)
    assert take(two, node, 0).paused and take(two, node, 1).paused
    node.handle(Park(2))
    assert not node.at_cut
    node.handle(Park(3))
    assert node.at_cut


def test_workers_told_the_data_is_consumed_stay_out_and_a_stop_holds():
    small = dataclasses.replace(DATA, num_train=300)
    lost = ReaderNode(SyntheticData(small, TRAIN), 2, num_workers=4)
    trainers = [Trainer(0), Trainer(1)]
    for t in trainers:
        for w in (0, 1):
            take(t, lost, w)  # three batches, then the data is consumed
    fence = ReaderLedger()
    receipts = {t.index: t.handle(CloseReceipts(1)) for t in trainers}
    plan = fence.plan(0, receipts, {0: 0, 1: 0}, stopped=False)
    assert plan.dry == frozenset({3})
    new = ReaderNode(SyntheticData(small, TRAIN), 2, num_workers=4)
    replay(new, plan)
    assert new.out == {3} and not new.exhausted  # the others were not told yet
    everyone = dataclasses.replace(plan, incarnation=2, dry=frozenset(range(4)))
    out = ReaderNode(SyntheticData(small, TRAIN), 2, num_workers=4)
    replay(out, everyone)
    assert out.exhausted and out.handed_at_stop == 300
    stopped = ReaderNode(SyntheticData(DATA, TRAIN), 2, num_workers=4)
    replay(stopped, ReplayPlan(1, {0: 0}, {0: 0}, {0: [0, 1]}, {0: 2}, stopped=True))
    assert stopped.stopped and stopped.handle(NextBatch(0, worker=0, pushed=2)).batch is None


def test_a_cut_its_lost_reader_was_taking_is_abandoned_by_the_replacement():
    lost = reader(batches_per_step=4)
    one, two = Trainer(0), Trainer(1)
    take(one, lost, 0)
    lost.handle(PauseReading())  # it hands out the step's rest, then pauses
    assert lost_reply(two, lost, 0).number == 1  # lost on its way
    assert take(two, lost, 1).number == 2 and take(one, lost, 1).number == 3
    assert take(one, lost, 0).paused  # worker 0 parks
    new = replaced([one, two], batches_per_step=4)
    assert not new.pausing and new.handle(Park(0)) is None  # its Park, sent again: ignored
    handed = take(one, new, 0, parked=0)  # and its request, answered
    assert handed.batch is not None and not handed.paused


def test_a_reader_alone_replaced_suits_every_family_and_a_wrong_action_names_the_key():
    for name in ("easgd", "ma", "async", "gba", "sync", "allreduce", "hierarchical"):
        RecoveryPolicy(reader="restart").check(strategy_config(name))
    assert RecoveryPolicy().reader == "restart"
    with pytest.raises(ValueError, match="reader must be one of"):
        RecoveryPolicy(reader="partial")
