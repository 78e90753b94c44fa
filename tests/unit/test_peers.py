"""A loop's directory of its peers' endpoints (runtime/transport/peers.py): a lost node's
callers get its replacement's endpoint once it is repointed, or None once
its wait for a replacement passed without one (the Ray loops then name the node as
lost)."""

from __future__ import annotations

import threading
import time

import torch

from recsync.protocol.address import Address, Role
from recsync.protocol.messages import Lookup
from recsync.runtime import timeouts
from recsync.runtime.timeouts import CallWaits
from recsync.runtime.transport.peers import Peers, Sent

SHARD = Address(Role.EMBEDDING_SERVER, 1)
OLD, NEW = ("10.0.0.1", 4000, b"k" * 32), ("10.0.0.2", 4001, b"n" * 32)


def _sent_to(target: Address, incarnation: int) -> Sent:
    message = Lookup(torch.tensor([1]), torch.tensor([0, 1]), None)
    return Sent(None, target, message, incarnation)  # type: ignore[arg-type]


def test_the_wait_for_a_replacement_is_the_tables_unless_the_job_says_otherwise():
    assert Peers({}).waits.replace_s == timeouts.REPLACE_WAIT_S
    assert Peers({}, waits=CallWaits(replace_s=5.0)).waits.replace_s == 5.0


def test_a_caller_gets_the_replacements_endpoint_once_repointed():
    directory = Peers({SHARD: OLD}, frozenset({Role.EMBEDDING_SERVER}))
    assert directory[SHARD] == (OLD, 0)
    threading.Timer(0.1, directory.replace, args=(SHARD, NEW)).start()
    assert directory.successor(_sent_to(SHARD, 0)) == (NEW, 1)
    assert directory[SHARD] == (NEW, 1)


def test_no_replacement_within_the_wait_is_none():
    directory = Peers({SHARD: OLD}, waits=CallWaits(replace_s=0.2))
    started = time.perf_counter()
    assert directory.successor(_sent_to(SHARD, 0)) is None
    assert 0.2 <= time.perf_counter() - started < 2.0
