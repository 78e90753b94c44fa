"""The loops' connections to their peers (no Ray): frames carry any value with its numpy
arrays, replies come back in order, a peer's error and a peer's death reach the caller,
and waiting for some of several replies stops at its deadline. Strangers, wrong keys,
other versions and frames past the bounds: test_channel_hardening.py."""

from __future__ import annotations

import multiprocessing
import socket
import threading
import time

import numpy as np
import pytest

from recsync.protocol.messages import Lookup
from recsync.runtime.transport import wire
from recsync.runtime.transport.channel import (
    ChannelClosed,
    ChannelServer,
    Connection,
    RemoteError,
    wait,
)
from recsync.runtime.transport.frames import read_frame, write_frame


def _echo(request):
    if request == "boom":
        raise ValueError("row out of range [0, 10)")
    if isinstance(request, tuple) and request[0] == "sleep":
        time.sleep(request[1])
        return request[1]
    return request


def test_a_frame_carries_arrays_of_every_layout():
    left, right = socket.socketpair()
    values = {
        "ids": np.arange(100_000, dtype=np.int64),
        "empty": np.zeros((0, 16), dtype=np.float32),
        "strided": np.arange(60, dtype=np.float32).reshape(6, 10)[:, ::3],
        "fortran": np.asfortranarray(np.arange(12.0).reshape(3, 4)),
        "scalar": 7,
    }
    sender = threading.Thread(target=write_frame, args=(left, values))
    sender.start()  # 800 KB do not fit in a socket's buffer: read while it writes
    failed, got = read_frame(right)
    sender.join()
    assert not failed
    for name, value in values.items():
        np.testing.assert_array_equal(got[name], value)
    assert got["ids"].flags.writeable
    left.close()
    right.close()


def test_each_frames_arrays_are_writable_buffers_of_their_own():
    """What lets a server keep a message's tensors without copying them (`NodeActor.call`,
    `owned`): writing to one frame's array changes neither the sender's nor the next's."""
    left, right = socket.socketpair()
    sent = np.arange(1_000, dtype=np.float32)
    write_frame(left, {"grads": sent})
    write_frame(left, {"grads": sent})
    first, second = read_frame(right)[1]["grads"], read_frame(right)[1]["grads"]
    first += 1.0
    np.testing.assert_array_equal(second, sent)
    np.testing.assert_array_equal(sent, np.arange(1_000, dtype=np.float32))
    assert not np.shares_memory(first, second)
    left.close()
    right.close()


def test_a_message_crosses_as_the_wire_encodes_it():
    server = ChannelServer(_echo, "127.0.0.1")
    connection = Connection(server.endpoint)
    rows = np.array([3, 1, 4], dtype=np.int64)
    message = wire.encode(Lookup(wire.decode(rows), wire.decode(np.array([0, 3])), None, 5))
    reply = wire.decode(connection.request(message).result(10.0))
    assert isinstance(reply, Lookup) and reply.min_version == 5
    assert reply.rows.tolist() == [3, 1, 4]
    connection.close()


def test_replies_come_back_in_the_order_of_the_requests():
    server = ChannelServer(_echo, "127.0.0.1")
    connection = Connection(server.endpoint)
    tickets = [connection.request(("sleep", 0.0)), *[connection.request(i) for i in range(20)]]
    assert tickets[5].result(10.0) == 4  # reads the replies before it too
    assert all(t.done for t in tickets[:6]) and not tickets[-1].done
    assert [t.result(10.0) for t in tickets[1:]] == list(range(20))
    connection.close()


def test_the_peers_error_reaches_the_caller_and_the_connection_goes_on():
    server = ChannelServer(_echo, "127.0.0.1")
    connection = Connection(server.endpoint)
    with pytest.raises(RemoteError) as raised:
        connection.request("boom").result(10.0)
    assert isinstance(raised.value.cause, ValueError)
    assert "row out of range" in str(raised.value.cause)
    assert connection.request("after").result(10.0) == "after"
    connection.close()


def _serve_then_die(port_queue) -> None:
    def handle(request):
        if request == "die":
            import os

            os._exit(3)
        return request

    server = ChannelServer(handle, "127.0.0.1")
    port_queue.put(server.endpoint)
    time.sleep(60)


def test_a_dead_peer_fails_every_waiting_request_and_refuses_new_ones():
    context = multiprocessing.get_context("spawn")
    endpoints = context.Queue()
    process = context.Process(target=_serve_then_die, args=(endpoints,), daemon=True)
    process.start()
    endpoint = endpoints.get(timeout=60)
    connection = Connection(endpoint)
    assert connection.request("alive").result(10.0) == "alive"
    waiting = [connection.request("die"), connection.request("never answered")]
    for ticket in waiting:
        with pytest.raises(ChannelClosed):
            ticket.result(10.0)
    process.join(10)
    with pytest.raises(ChannelClosed):
        connection.request("again").result(10.0)
    with pytest.raises(ChannelClosed, match="cannot connect"):
        Connection(endpoint).request("anew").result(10.0)


def test_a_peer_that_does_not_answer_times_out():
    server = ChannelServer(_echo, "127.0.0.1")
    connection = Connection(server.endpoint)
    started = time.perf_counter()
    with pytest.raises(TimeoutError):
        connection.request(("sleep", 5.0)).result(0.2)
    assert time.perf_counter() - started < 2.0
    assert connection.broken is not None  # a reply half read would garble the next


def test_wait_returns_once_enough_replies_came_or_at_its_deadline():
    server = ChannelServer(_echo, "127.0.0.1")
    slow, fast = Connection(server.endpoint), Connection(server.endpoint)
    tickets = [slow.request(("sleep", 3.0)), fast.request(("sleep", 0.0))]
    started = time.perf_counter()
    assert wait(tickets, 1, 10.0)
    assert tickets[1].done and not tickets[0].done
    assert not wait(tickets, 2, 0.2)
    assert time.perf_counter() - started < 2.0
    assert wait(tickets, 2, 10.0) and tickets[0].result(1.0) == 3.0
    slow.close()
    fast.close()


def test_a_caller_sending_while_large_replies_wait_unread_never_deadlocks():
    """A loop that went on without some replies (a partial pull) and keeps sending large
    messages on the same connection: the server, writing a large reply, reads nothing;
    were the caller only writing, both would wait on full buffers forever. The caller
    reads the waiting replies while its send waits, and every reply is kept."""
    reply = np.zeros(1 << 20, dtype=np.float32)  # 4 MiB, far past a socket's buffers
    server = ChannelServer(lambda payload: reply, "127.0.0.1")
    connection = Connection(server.endpoint)
    payload = np.ones(1 << 20, dtype=np.float32)
    tickets: list = []

    def send_without_reading() -> None:
        for _ in range(12):
            tickets.append(connection.request(payload))

    sender = threading.Thread(target=send_without_reading, daemon=True)
    sender.start()
    sender.join(timeout=60)
    assert not sender.is_alive(), "the caller and the server wait on each other's buffers"
    assert all(t.result(60.0).nbytes == reply.nbytes for t in tickets)
    connection.close()
    server.close()
