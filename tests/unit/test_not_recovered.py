"""The error a run ends with on a loss it does not recover from: what it names."""

from __future__ import annotations

from recsync.coordinator.recovery import Loss, Recoveries, RecoveryPolicy
from recsync.runtime.ray.errors import NodeFailure, NotRecovered


def test_a_loss_past_max_restarts_names_the_node_the_phase_and_the_recoveries():
    policy = RecoveryPolicy(max_restarts=2)
    recovered = ["trainer-1", "reader"]
    why = policy.refusal("embedding-server-0", len(recovered))
    assert why is not None
    error = NotRecovered(
        "embedding-server-0 is dead or unreachable",
        "embedding-server-0",
        "restarting after losing reader",
        why,
        recovered,
    )
    assert isinstance(error, NodeFailure) and error.lost == "embedding-server-0"
    assert str(error) == (
        "embedding-server-0 is dead or unreachable while restarting after losing reader; "
        "not recovered: recovery.max_restarts (2) reached after 2 recoveries (from losing "
        "trainer-1, reader)"
    )


def test_a_stop_before_any_recovery_says_so():
    why = RecoveryPolicy(reader="stop").refusal("reader", 0)
    assert why is not None
    error = NotRecovered("reader is dead or unreachable", "reader", "starting", why, [])
    assert str(error) == (
        "reader is dead or unreachable while starting; not recovered: recovery.reader is stop"
    )


def test_a_superseded_one_node_recovery_neither_replays_nor_loses():
    # a partial recovery interrupted by a further loss: the rollback that follows redoes it
    recoveries = Recoveries()
    recoveries.add(Loss("embedding-server-1", 3.0, 9_000, 6_400, action="superseded"))
    recoveries.add(Loss("trainer-0", 3.5, 9_100, 6_400))
    summary = recoveries.summary()
    assert summary["examples_lost"] == 0 and summary["examples_replayed"] == 2_700
