"""A node actor's calls in flight (runtime/ray/in_flight.py): releasing its node waits for
the call under way, refuses the calls after it with a NodeFailure naming the node as lost,
gives up (False) while a call does not end, and a node hosted again takes calls."""

from __future__ import annotations

import threading
import time

import pytest

from recsync.runtime.ray.errors import NodeFailure
from recsync.runtime.ray.in_flight import InFlight


def test_release_waits_for_the_call_under_way_then_refuses_later_ones():
    in_flight, inside, leave = InFlight(), threading.Event(), threading.Event()
    done: list[str] = []

    def a_call() -> None:
        with in_flight.call():
            inside.set()
            leave.wait(5)
            done.append("answered")

    caller = threading.Thread(target=a_call)
    caller.start()
    inside.wait(5)
    assert in_flight.close("reader-0", timeout_s=0.05) is False  # the call is under way
    threading.Timer(0.1, leave.set).start()
    started = time.monotonic()
    assert in_flight.close("reader-0", timeout_s=5) is True
    assert done == ["answered"] and time.monotonic() - started >= 0.05
    caller.join()
    with pytest.raises(NodeFailure, match="reader-0 was released") as refused, in_flight.call():
        pass
    assert refused.value.lost == "reader-0"
    in_flight.reopen()  # a later job's node hosted in the process
    with in_flight.call():
        pass
