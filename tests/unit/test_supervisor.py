"""The job's rules (coordinator/supervisor.py), driven event by event: cuts, evaluation
marks, early stopping, a stop on a signal, and each recovery from a lost node."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from recsync.coordinator.checkpoint import JobState
from recsync.coordinator.cuts import CheckpointEvery
from recsync.coordinator.evaluation import EarlyStopping, Evaluations
from recsync.coordinator.recovery import RecoveryPolicy
from recsync.coordinator.spec import ClusterSpec, JobSpec, plan_for
from recsync.coordinator.supervision import (
    AbandonCut,
    AwaitScored,
    Checkpoint,
    CutSettled,
    Ended,
    Evaluate,
    Fail,
    NodeLost,
    PauseReaders,
    Progressed,
    Record,
    Replaced,
    ReplaceNode,
    Resumed,
    ResumeReaders,
    RollBack,
    Scored,
    Started,
    StopAsked,
    StopReaders,
)
from recsync.coordinator.supervisor import MAX_SCORING, Supervisor
from recsync.coordinator.topology import Topology, build_topology
from recsync.data.synthetic import SyntheticSpec
from recsync.families import strategy_config
from recsync.metrics.quality import Quality
from recsync.model.spec import ModelSpec, TableSpec
from recsync.optim.train_spec import TrainSpec
from recsync.protocol.address import Address, Role

MODEL = ModelSpec(4, tuple(TableSpec(f"C{i}", 50, 8) for i in range(2)), (16,), (16,))
DATA = SyntheticSpec(num_train=10_000, num_test=1_000, num_dense=4, table_rows=(50,) * 2)
SPEC = JobSpec(
    MODEL, TrainSpec(batch_size=64), ClusterSpec(2, 1, 2), strategy_config("easgd"), DATA
)


def topology() -> Topology:
    return build_topology(SPEC, plan_for(SPEC), None)


def supervisor(
    cuts: int = 0,
    eval_every: int = 0,
    policy: RecoveryPolicy | None = None,
    early: EarlyStopping | None = None,
) -> Supervisor:
    evaluations = Evaluations(topology(), eval_every, early)
    job = Supervisor(SPEC, evaluations, CheckpointEvery(examples=cuts), policy)
    assert job.handle(Started(topology(), 0.0)) == []
    return job


def state(position: int) -> JobState:
    return JobState(torch.zeros(1), {}, [{}, {}], [], position, 0, 0, "easgd")


def scored(examples: int, logloss: float = 0.5) -> Scored:
    stats = SimpleNamespace(total_examples=examples, loss_sum=0.5 * examples)
    reports = {Address(Role.TRAINER, 0): SimpleNamespace(stats=stats)}
    return Scored(reports, Quality(1_000, logloss, 1.0, 0.7, 1.0), 1.0)


def summary(examples: int) -> dict:
    """A run's summary as `Evaluations.final` reads it."""
    keys = ("test_auc", "test_ne", "test_logloss", "test_calibration")
    return (
        {"examples_trained": examples, "train_loss": 0.5, "test_examples": 100}
        | {k: 0.5 for k in keys}
        | {"eps": 1.0, "train_seconds": 1.0}
    )


def recorded(commands: list) -> list[int]:
    return [c.record["examples"] for c in commands if isinstance(c, Record)]


def test_a_cut_pauses_reading_takes_the_state_resumes_and_hands_it_on():
    job = supervisor(cuts=1_000)
    assert job.handle(Progressed(999, 10_000, 1.0)) == []
    assert job.handle(Progressed(1_000, 10_000, 1.5)) == [PauseReaders()]
    assert job.cutting and job.handle(Progressed(1_100, 10_000, 1.6)) == []  # one at a time
    cut = state(1_100)
    assert job.handle(CutSettled(cut, 1_100, 1.7)) == [ResumeReaders(), Checkpoint(cut)]
    assert job.last_cut is cut and job.cuts.cuts == 1 and job.cutting
    assert job.handle(Resumed()) == [] and not job.cutting
    assert job.handle(Progressed(2_099, 10_000, 2.0)) == []  # counted from the cut
    assert job.handle(Progressed(2_100, 10_000, 2.0)) == [PauseReaders()]
    assert job.handle(CutSettled(None, 0, 2.1)) == [ResumeReaders()]  # the data ran out
    assert job.cuts.cuts == 1 and job.last_cut is cut
    job.handle(Resumed())
    assert job.handle(Progressed(10_000, 10_000, 3.0)) == []  # never at the stream's end


def test_each_mark_the_stream_went_past_is_evaluated_once_and_recorded_in_order():
    job = supervisor(eval_every=500)
    assert job.handle(Progressed(500, None, 1.0)) == []  # at the mark, not past it yet
    assert job.handle(Progressed(700, None, 1.5)) == [Evaluate(1.5, 500)]
    assert job.handle(Progressed(1_300, None, 2.1)) == [Evaluate(2.1, 1_000)]
    assert job.handle(Progressed(1_600, None, 2.5, trained=1_500)) == [Evaluate(2.5, 1_500)]
    assert list(job.scoring) == [500, 1_000, 1_500]  # each under way: none dropped
    assert recorded(job.handle(scored(700))) == [700]
    assert recorded(job.handle(scored(1_300))) == [1_300]
    assert recorded(job.handle(scored(1_500))) == [1_500]
    assert not job.scoring and len(job.evaluations.records) == 3
    job.evaluations.final(end := summary(1_600))
    assert "evaluation_marks_merged" not in end


def test_marks_passed_at_once_are_one_snapshot_one_record_and_counted():
    # a poll late under load: the model is the same for the marks it passed
    job = supervisor(eval_every=500)
    assert job.handle(Progressed(1_700, None, 2.0)) == [Evaluate(2.0, 1_500)]
    assert job.handle(Progressed(1_800, None, 2.1)) == []  # 500 and 1,000 are not due again
    assert recorded(job.handle(scored(1_700))) == [1_700]
    assert job.handle(Progressed(2_100, None, 2.5)) == [Evaluate(2.5, 2_000)]
    assert recorded(job.handle(scored(2_100))) == [2_100]
    job.evaluations.final(end := summary(2_400))
    assert end["evaluation_marks_merged"] == 2


def test_marks_queue_while_scoring_and_beyond_the_bound_wait_for_the_oldest():
    job = supervisor(eval_every=100)
    for i in range(MAX_SCORING):
        assert job.handle(Progressed(100 * (i + 1) + 1, None, 1.0)) == [
            Evaluate(1.0, 100 * (i + 1))
        ]
    beyond = (MAX_SCORING + 1) * 100
    assert job.handle(Progressed(beyond + 1, None, 2.0)) == [AwaitScored(), Evaluate(2.0, beyond)]
    assert len(job.scoring) == MAX_SCORING + 1  # until the driver fed the one awaited
    job.handle(scored(150))
    assert len(job.scoring) == MAX_SCORING


def test_the_end_waits_for_every_evaluation_and_a_mark_at_the_end_is_the_last_record():
    job = supervisor(eval_every=500)
    assert job.handle(Progressed(1_000, 1_000, 3.0)) == [Evaluate(3.0, 500)]  # not 1,000
    assert job.handle(Ended()) == [AwaitScored()]
    unscored = Scored({}, None, 3.0)  # no held-out example yet: no record
    assert job.handle(unscored) == [] and not job.scoring and not job.evaluations.records
    assert job.handle(Ended()) == []


def test_a_rollback_evaluates_again_only_the_marks_it_dropped_unscored():
    job = supervisor(eval_every=500, policy=RecoveryPolicy())
    assert job.handle(Progressed(600, None, 1.0)) == [Evaluate(1.0, 500)]
    assert recorded(job.handle(scored(600))) == [600]
    assert job.handle(Progressed(1_100, None, 2.0)) == [Evaluate(2.0, 1_000)]
    [rollback] = job.handle(NodeLost("trainer-1", 1_150, True, 2.1))
    assert isinstance(rollback, RollBack) and not job.scoring
    job.handle(Started(topology(), 3.0))  # from the job's start: no cut
    assert job.handle(Progressed(600, None, 3.5)) == []  # 500 was recorded
    assert job.handle(Progressed(1_001, None, 4.0)) == [Evaluate(4.0, 1_000)]


def test_early_stopping_stops_reading_once():
    job = supervisor(eval_every=500, early=EarlyStopping(patience=1))
    for handed in (501, 1_001, 1_501):
        assert len(job.handle(Progressed(handed, None, 1.0))) == 1
    assert [type(c) for c in job.handle(scored(500, 0.5))] == [Record]
    assert job.handle(scored(1_000, 0.6))[1:] == [StopReaders("early stopping")]
    assert job.handle(scored(1_500, 0.7))[1:] == []
    assert job.stop_reason == "early stopping"


def test_a_signal_stops_reading_once_and_again_after_a_rollback():
    job = supervisor(policy=RecoveryPolicy(reader="rollback"))
    assert job.handle(StopAsked("SIGTERM")) == [StopReaders("SIGTERM")]
    assert job.handle(StopAsked("SIGTERM")) == []
    [rollback] = job.handle(NodeLost("reader", 640, True, 3.0))
    assert isinstance(rollback, RollBack)
    assert job.handle(Started(topology(), 4.0)) == [StopReaders("SIGTERM")]  # a new reader
    job.handle(Ended())
    assert job.handle(StopAsked("SIGINT")) == []


def test_a_rollback_goes_back_to_the_last_cut_and_counts_the_replay():
    job = supervisor(cuts=1_000, policy=RecoveryPolicy())
    [rollback] = job.handle(NodeLost("trainer-1", 700, True, 2.0))
    assert isinstance(rollback, RollBack) and rollback.spec is SPEC  # no cut: the start
    assert (rollback.loss.position, rollback.loss.back_to, rollback.loss.replayed) == (700, 0, 700)
    job.handle(Started(topology(), 2.5))
    job.handle(Progressed(1_000, None, 3.0))
    job.handle(CutSettled(state(1_024), 1_024, 3.1))
    [rollback] = job.handle(NodeLost("sync-server-0", 1_500, False, 4.0, in_flight=False))
    assert isinstance(rollback, RollBack) and rollback.spec.start_example == 1_024
    assert not job.cutting and job.before == 1_024  # the cut under way is dropped
    assert (rollback.loss.back_to, rollback.loss.replayed, rollback.loss.exact) == (
        1_024,
        476,
        False,
    )
    assert [loss.action for loss in job.recoveries.losses] == ["rollback", "rollback"]


def test_a_lost_shard_alone_comes_back_from_the_last_cut():
    job = supervisor(cuts=1_000, policy=RecoveryPolicy(embedding_server="partial"))
    assert job.replaceable() == frozenset({Role.EMBEDDING_SERVER, Role.READER})
    job.handle(Progressed(1_000, None, 1.0))
    cut = state(1_000)
    job.handle(CutSettled(cut, 1_000, 1.0))
    [replace] = job.handle(NodeLost("embedding-server-1", 1_800, True, 2.0))
    assert isinstance(replace, ReplaceNode) and replace.action == "partial" and replace.back is cut
    assert (replace.loss.back_to, replace.loss.lost, replace.loss.replayed) == (1_000, 800, 0)
    assert job.replacing and job.handle(Replaced()) == [] and not job.replacing


def test_a_lost_trainer_alone_restarts_and_replays_what_it_held():
    job = supervisor(policy=RecoveryPolicy(trainer="restart"))
    [replace] = job.handle(NodeLost("trainer-0", 900, True, 2.0))
    assert isinstance(replace, ReplaceNode) and replace.action == "restart"
    assert replace.back is None and replace.loss.back_to == replace.loss.position == 900
    replace.loss.replayed_examples = 128  # what the driver requeued
    assert job.recoveries.examples_replayed == 128


def test_a_trainer_whose_machine_does_not_answer_rolls_back_as_it_may_push_on_once_healed():
    job = supervisor(policy=RecoveryPolicy(trainer="restart"))
    [command] = job.handle(NodeLost("trainer-0", 900, True, 2.0, machine_answers=False))
    assert isinstance(command, RollBack) and command.loss.action == "rollback"
    job = supervisor(policy=RecoveryPolicy())  # a reader's late replies are fenced
    [replace] = job.handle(NodeLost("reader", 900, True, 2.0, machine_answers=False))
    assert isinstance(replace, ReplaceNode) and replace.action == "restart"


def test_a_one_node_action_rolls_back_a_loss_while_the_job_starts():
    job = supervisor(policy=RecoveryPolicy(trainer="restart"))
    [command] = job.handle(NodeLost("trainer-0", 0, True, 0.0, in_flight=False))
    assert isinstance(command, RollBack) and command.loss.action == "rollback"


def test_a_loss_during_a_one_node_recovery_rolls_back_and_supersedes_it():
    job = supervisor(policy=RecoveryPolicy(embedding_server="partial"))
    [replace] = job.handle(NodeLost("embedding-server-0", 600, True, 1.0))
    assert isinstance(replace, ReplaceNode)
    [rollback] = job.handle(NodeLost("trainer-1", 600, True, 1.2, in_flight=False))
    assert isinstance(rollback, RollBack) and not job.replacing
    assert [loss.action for loss in job.recoveries.losses] == ["superseded", "rollback"]
    assert job.recoveries.summary()["examples_lost"] == 0


def test_a_lost_reader_alone_is_replaced_and_abandons_the_cut_under_way():
    job = supervisor(cuts=1_000, policy=RecoveryPolicy())  # reader = restart: the default
    assert job.replaceable() == frozenset({Role.READER})
    job.handle(Progressed(1_000, None, 1.0))
    cut = state(1_000)
    job.handle(CutSettled(cut, 1_000, 1.0))
    job.handle(Resumed())
    assert job.handle(Progressed(2_100, None, 2.0)) == [PauseReaders()]  # the next cut
    replace, abandon = job.handle(NodeLost("reader", 2_200, False, 2.5))
    assert isinstance(replace, ReplaceNode) and replace.action == "restart"
    assert abandon == AbandonCut() and not job.cutting and job.replacing
    loss = replace.loss  # nothing handed out twice, nothing lost
    assert (loss.position, loss.back_to, loss.replayed, loss.lost) == (2_200, 2_200, 0, 0)
    assert job.handle(Progressed(3_500, None, 3.0)) == []  # no cut while it is replaced
    assert job.handle(Replaced()) == [] and not job.replacing
    assert job.handle(Progressed(3_600, None, 3.1)) == [PauseReaders()]
    assert job.recoveries.summary()["examples_replayed"] == 0


def test_a_loss_while_a_reader_is_replaced_rolls_back_and_supersedes_it():
    job = supervisor(policy=RecoveryPolicy(trainer="restart"))
    [replace] = job.handle(NodeLost("reader", 640, True, 1.0))  # no cut under way
    assert isinstance(replace, ReplaceNode) and replace.node == "reader"
    [rollback] = job.handle(NodeLost("trainer-0", 700, True, 1.1))
    assert isinstance(rollback, RollBack) and rollback.spec is SPEC and not job.replacing
    assert [loss.action for loss in job.recoveries.losses] == ["superseded", "rollback"]
    assert job.recoveries.examples_replayed == 700  # the rollback's, from the start


def test_max_restarts_reached_or_a_stop_fails_naming_the_last_cut():
    job = supervisor(cuts=1_000, policy=RecoveryPolicy(max_restarts=1, reader="stop"))
    job.handle(Progressed(1_000, None, 1.0))
    cut = state(1_000)
    job.handle(CutSettled(cut, 1_000, 1.0))
    [fail] = job.handle(NodeLost("reader", 1_200, True, 2.0))
    assert fail == Fail("reader", "recovery.reader is stop", 2.0, [], cut)
    job.handle(NodeLost("trainer-1", 1_200, True, 2.0))
    [fail] = job.handle(NodeLost("trainer-0", 1_100, True, 3.0))
    assert isinstance(fail, Fail) and fail.why == "recovery.max_restarts (1) reached"
    assert fail.recovered_from == ["trainer-1"] and fail.last_cut is cut


def test_without_a_policy_every_loss_fails_and_a_bad_policy_is_refused():
    [fail] = supervisor().handle(NodeLost("trainer-0", 10, True, 1.0))
    assert isinstance(fail, Fail) and fail.why is None
    evaluations = Evaluations(topology(), 0)
    allreduce = JobSpec(MODEL, SPEC.train, SPEC.cluster, strategy_config("ma"), DATA)
    with pytest.raises(ValueError, match="trainer = restart"):
        Supervisor(allreduce, evaluations, None, RecoveryPolicy(trainer="restart"))
