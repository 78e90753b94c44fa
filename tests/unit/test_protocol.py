"""The protocol: one byte count for every message and reply, addresses, and what a driver or
node does with an effect or message it does not know (an error, never a silent no-op)."""

from __future__ import annotations

import threading
from dataclasses import dataclass

import pytest
import torch

from recsync.coordinator.hosting import HostedNode
from recsync.data.batch import Batch
from recsync.families.gradient.messages import PushDenseGradient
from recsync.protocol.address import READER, Address, Role
from recsync.protocol.effects import Loop, Notify, UnhandledEffect
from recsync.protocol.messages import (
    HEADER_BYTES,
    Fused,
    Lookup,
    MayStart,
    Pooled,
    PushRowGradients,
    PushRows,
    wire_bytes,
)
from recsync.protocol.node import LoopSpec, Node
from recsync.protocol.reading import HandedBatch, NextBatch
from recsync.runtime.ray.loops import LoopDriver
from recsync.runtime.sim.clock import Clock
from recsync.runtime.sim.cost import CostModel, WorkerSpeeds
from recsync.runtime.sim.dispatch import EffectDispatch
from recsync.runtime.sim.host import SimHost
from recsync.runtime.sim.network import Machine, Network
from recsync.runtime.sim.runner import LoopRunner
from recsync.runtime.sim.transport import Transport


def batch(examples: int, features: int) -> Batch:
    ids = torch.arange(examples * features)
    offsets = torch.arange(examples * features + 1)
    return Batch(torch.zeros(examples, 3), ids, offsets, torch.zeros(examples))


def test_a_message_counts_its_tensors_and_a_message_without_any_a_header():
    rows, offsets = torch.arange(10), torch.arange(6)
    assert wire_bytes(Lookup(rows, offsets, None)) == 10 * 8 + 6 * 8
    assert wire_bytes(Lookup(rows, offsets, torch.ones(10))) == 10 * 8 + 6 * 8 + 10 * 4
    assert wire_bytes(PushRows(rows, torch.zeros(10, 4))) == 10 * 8 + 40 * 4
    push, lookup = PushRows(rows, torch.zeros(10, 4)), Lookup(rows, offsets, None)
    both = Fused(push, lookup)
    assert wire_bytes(both) == wire_bytes(push) + wire_bytes(lookup)
    assert both.kind == "PushSparse+Lookup" and both.answered and both.mutates
    assert both.may_wait and both.reply_delayable and not both.control
    start = Fused(PushDenseGradient(0, 3, torch.zeros(7)), MayStart(0, 2))
    assert start.retained and not start.control and wire_bytes(start) == 7 * 4 + HEADER_BYTES
    assert wire_bytes(PushDenseGradient(0, 3, torch.zeros(7))) == 7 * 4
    assert wire_bytes(NextBatch(1)) == wire_bytes(MayStart(0, None)) == HEADER_BYTES
    assert wire_bytes(None) == wire_bytes(True) == HEADER_BYTES


def test_a_reply_counts_its_nested_payloads():
    handed = HandedBatch(batch(4, 2), token=7)
    # dense 4 x 3 floats, 8 ids and 9 offsets (int64), 4 labels
    assert wire_bytes(handed) == 12 * 4 + 8 * 8 + 9 * 8 + 4 * 4
    assert wire_bytes(HandedBatch(None)) == HEADER_BYTES


def test_row_versions_are_payload_too():
    """A gradient strategy's lookup replies and row pushes carry the rows' versions."""
    pooled = torch.zeros(5, 4)
    assert wire_bytes(Pooled(pooled)) == 20 * 4
    assert wire_bytes(Pooled(pooled, torch.zeros(9, dtype=torch.int64), 3)) == 20 * 4 + 9 * 8
    push = PushRowGradients(0, 0, torch.arange(3), torch.zeros(3, 2), torch.arange(3))
    assert wire_bytes(push) == 3 * 8 + 6 * 4 + 3 * 8


def test_addresses_name_nodes_and_are_keys():
    assert READER.name == "reader" and str(Address(Role.EMBEDDING_SERVER, 2)) == (
        "embedding-server-2"
    )
    assert {Address(Role.TRAINER, 1): 1}[Address(Role.TRAINER, 1)] == 1
    assert Role.EMBEDDING_SERVER.plural == "embedding_servers" and Role.READER.plural == "reader"


class Mute(Node):
    """A node that answers nothing and runs one loop yielding what it is given."""

    name = "mute"

    def __init__(self, effect: object):
        self.effect = effect

    def loops(self) -> list[LoopSpec]:
        return [LoopSpec(self._loop(), 0)]

    def _loop(self) -> Loop:
        yield Notify("any")
        yield self.effect  # type: ignore[misc]

    def report(self) -> None:
        return None


@dataclass
class Teleport:
    """An effect no driver knows."""

    label: str = "Teleport"


def test_a_node_refuses_a_message_it_does_not_answer_by_name():
    with pytest.raises(UnhandledEffect, match="mute cannot answer NextBatch"):
        Mute(None).handle(NextBatch(0))


def test_the_simulator_refuses_an_effect_it_has_no_handler_for():
    clock, cost = Clock(), CostModel()
    network = Network(clock, cost, lambda: 0.0)
    node = Mute(Teleport())
    host = SimHost(Address(Role.TRAINER, 0), node, Machine("trainer-0"))
    transport = Transport(clock, network, {host.address: host})
    dispatch = EffectDispatch(clock, network, transport, WorkerSpeeds(cost, 1, 0), 1, {})
    spec = node.loops()[0]
    runner = LoopRunner(clock, host, 0, spec.loop, dispatch, None, print, print)
    runner.start()
    with pytest.raises(UnhandledEffect, match="the simulator has no handler for Teleport"):
        clock.run()


def test_the_ray_engine_refuses_an_effect_it_has_no_handler_for():
    node = Mute(Teleport())
    driver = LoopDriver("mute", {}, 0.0, HostedNode(node), threading.Lock())
    with pytest.raises(UnhandledEffect, match="the Ray engine has no handler for Teleport"):
        driver.drive(node.loops()[0])
