"""The channel against peers that are not its own (plain sockets, no Ray): a stranger that
sends garbage or nothing is dropped within the handshake's timeout while good clients go
on; a wrong key, another protocol version and a server that cannot prove the key are
named errors; frames past the bounds are refused before anything is allocated for them;
the server listens on its host only, and `close` ends every thread it started."""

from __future__ import annotations

import logging
import pickle
import socket
import struct
import threading
import time
import tracemalloc

import numpy as np
import pytest

from recsync.runtime import timeouts
from recsync.runtime.transport import channel, frames, handshake
from recsync.runtime.transport.channel import ChannelServer, Connection
from recsync.runtime.transport.errors import (
    AuthenticationFailed,
    ChannelClosed,
    FrameError,
    ProtocolMismatch,
    RemoteError,
)
from recsync.runtime.transport.frames import read_frame, write_frame

HOST = "127.0.0.1"
SHORT_HANDSHAKE_S = 1.0


@pytest.fixture
def short_handshake(monkeypatch):
    """The handshake's timeout cut to SHORT_HANDSHAKE_S, so a test waits a second, not
    the table's HANDSHAKE_TIMEOUT_S."""
    monkeypatch.setattr(channel, "HANDSHAKE_TIMEOUT_S", SHORT_HANDSHAKE_S)


def _closed_after(sock: socket.socket, within_s: float) -> float | None:
    """Seconds until the peer closed `sock` (reading whatever it sends), or None if it
    had not within `within_s`."""
    started = time.monotonic()
    sock.settimeout(within_s)
    try:
        while sock.recv(4096):
            pass
    except ConnectionResetError:  # closed with our bytes unread
        pass
    except TimeoutError:
        return None
    return time.monotonic() - started


def _until(condition, within_s: float = 5.0) -> bool:
    deadline = time.monotonic() + within_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def _answer_as(sock: socket.socket, key: bytes, version: int) -> None:
    """A client's answer to the server's hello, of protocol `version`, proving `key`."""
    _, _, server_nonce = handshake.HELLO.unpack(sock.recv(handshake.HELLO.size))
    client_nonce = bytes(handshake.NONCE_BYTES)
    shown = handshake.proof(key, b"client", version, server_nonce, client_nonce)
    sock.sendall(handshake.ANSWER.pack(handshake.MAGIC, version, client_nonce, shown))


def test_the_handshake_timeouts_are_the_tables_and_seconds():
    assert 1.0 <= timeouts.HANDSHAKE_TIMEOUT_S <= 10.0
    assert channel.HANDSHAKE_TIMEOUT_S == timeouts.HANDSHAKE_TIMEOUT_S
    assert channel.CLIENT_HANDSHAKE_S == timeouts.CLIENT_HANDSHAKE_S


def test_a_stranger_sending_garbage_is_dropped_and_good_clients_go_on(short_handshake, caplog):
    caplog.set_level(logging.WARNING, logger=channel.__name__)
    handled: list = []
    server = ChannelServer(handled.append, HOST)
    good = Connection(server.endpoint)
    with socket.create_connection(server.endpoint[:2]) as stranger:
        stranger.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n" + bytes(range(256)) * 4)
        closed = _closed_after(stranger, 5.0)
    assert closed is not None and closed < SHORT_HANDSHAKE_S + 0.5
    with socket.create_connection(server.endpoint[:2]) as stranger:
        stranger.sendall(b"\x00\x01garbage")  # too short to answer: cut at the deadline
        closed = _closed_after(stranger, 5.0)
    assert closed is not None and SHORT_HANDSHAKE_S - 0.3 < closed < SHORT_HANDSHAKE_S + 1.0
    assert handled == []
    assert good.request("old").result(10.0) is None
    new = Connection(server.endpoint)
    assert new.request("new").result(10.0) is None
    assert handled == ["old", "new"]
    assert _until(lambda: server.serving() == 2)  # the strangers' threads ended
    assert server.close()
    reasons = [r.getMessage() for r in caplog.records]
    assert f"refused a connection from {HOST}: not the channel's protocol" in reasons[0]
    assert f"dropped the connection from {HOST} in its handshake" in reasons[1]
    assert len(reasons) == 2


def test_a_silent_stranger_is_dropped_within_the_handshake_timeout(short_handshake):
    server = ChannelServer(lambda request: request, HOST)
    with socket.create_connection(server.endpoint[:2]) as stranger:
        closed = _closed_after(stranger, 5.0)
    assert closed is not None and closed < SHORT_HANDSHAKE_S + 1.0
    assert _until(lambda: server.serving() == 0)
    assert server.close()


def test_a_stranger_trickling_bytes_is_dropped_at_the_handshakes_deadline(short_handshake):
    """The timeout bounds the whole handshake, not each read."""
    server = ChannelServer(lambda request: request, HOST)
    with socket.create_connection(server.endpoint[:2]) as stranger:
        started = time.monotonic()
        with pytest.raises(OSError):
            for _ in range(40):
                stranger.sendall(handshake.MAGIC[:1])
                time.sleep(0.1)
                if _closed_after(stranger, 0.01) is not None:
                    raise ConnectionResetError
        assert time.monotonic() - started < SHORT_HANDSHAKE_S + 1.0
    assert server.close()


def test_a_server_that_never_says_hello_is_unreachable(monkeypatch):
    """A hung server, or one of the protocol before versions (which waited for a token)."""
    monkeypatch.setattr(channel, "CLIENT_HANDSHAKE_S", 0.5)
    listener = socket.create_server((HOST, 0))
    started = time.monotonic()
    connection = Connection((HOST, listener.getsockname()[1], handshake.new_key()))
    assert time.monotonic() - started < 2.0
    assert isinstance(connection.broken, ChannelClosed)
    assert "did not finish the handshake" in str(connection.broken)
    listener.close()


def test_bytes_that_came_in_time_count_when_read_late():
    """A busy process's thread may read after the deadline what came before it."""
    left, right = socket.socketpair()
    with left, right:
        left.sendall(b"in time")
        assert handshake.recv_by(right, 7, time.monotonic() - 1.0) == b"in time"
        with pytest.raises(TimeoutError, match="0 of 1 bytes"):
            handshake.recv_by(right, 1, time.monotonic() - 1.0)


def test_a_wrong_key_is_refused_with_a_named_error():
    handled: list = []
    server = ChannelServer(handled.append, HOST)
    host, port, key = server.endpoint
    wrong = Connection((host, port, bytes(len(key))))
    assert isinstance(wrong.broken, AuthenticationFailed)
    with pytest.raises(AuthenticationFailed, match="refused the endpoint's key"):
        wrong.request("anything").result(10.0)
    with pytest.raises(ChannelClosed):  # a lost peer to its callers: they wait for a new one
        Connection((host, port, b"short")).request("anything").result(10.0)
    assert handled == []
    assert server.close()


def test_a_server_that_cannot_prove_the_key_is_refused_before_any_frame():
    """A process that took a lost server's port cannot pass as it: the client never
    unpickles what it sends."""
    listener = socket.create_server((HOST, 0))

    def impostor() -> None:
        conn, _ = listener.accept()
        with conn:
            conn.sendall(handshake.HELLO.pack(handshake.MAGIC, handshake.VERSION, bytes(16)))
            conn.recv(handshake.ANSWER.size)
            conn.sendall(bytes([handshake.ACCEPTED]) + bytes(32))
            write_frame(conn, "a reply nobody asked for")
            conn.recv(1)

    thread = threading.Thread(target=impostor, daemon=True)
    thread.start()
    connection = Connection((HOST, listener.getsockname()[1], handshake.new_key()))
    assert isinstance(connection.broken, AuthenticationFailed)
    assert "could not prove" in str(connection.broken)
    thread.join(5.0)
    listener.close()


@pytest.mark.parametrize(
    ("hello", "theirs"),
    [
        (handshake.HELLO.pack(handshake.MAGIC, handshake.VERSION + 1, bytes(16)), 2),
        (b"SSH-2.0-OpenSSH_9.6\r\n\x00", None),
    ],
    ids=["version-2", "not-recsync"],
)
def test_a_server_of_another_protocol_is_a_named_error(hello, theirs):
    listener = socket.create_server((HOST, 0))

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            conn.sendall(hello)
            conn.recv(1)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    port = listener.getsockname()[1]
    with pytest.raises(ProtocolMismatch) as raised:
        Connection((HOST, port, handshake.new_key()))
    assert raised.value.ours == handshake.VERSION == 1 and raised.value.theirs == theirs
    assert f"{HOST}:{port} speaks" in str(raised.value)
    assert "this process speaks version 1" in str(raised.value)
    if theirs is not None:
        assert "version 2" in str(raised.value)
    thread.join(5.0)
    listener.close()


def test_a_client_of_another_version_is_told_and_closed():
    handled: list = []
    server = ChannelServer(handled.append, HOST)
    host, port, key = server.endpoint
    with socket.create_connection((host, port)) as other:
        _answer_as(other, key, handshake.VERSION + 1)  # knows the key, speaks version 2
        other.settimeout(5.0)
        assert other.recv(1) == bytes([handshake.REFUSED_VERSION])
        assert _closed_after(other, 5.0) is not None
    assert handled == []
    assert server.close()


def test_a_client_of_this_version_with_the_key_is_served_over_plain_sockets():
    """The same path as above with the version right: what makes the refusal the
    version's doing."""
    server = ChannelServer(lambda request: request * 2, HOST)
    host, port, key = server.endpoint
    with socket.create_connection((host, port)) as client:
        _answer_as(client, key, handshake.VERSION)
        client.settimeout(5.0)
        assert client.recv(33)[0] == handshake.ACCEPTED
        write_frame(client, 21)
        assert read_frame(client) == (False, 42)
    assert server.close()


def _header(status: int, count: int, length: int, sizes: tuple[int, ...] = ()) -> bytes:
    return frames.HEADER.pack(status, count, length) + struct.pack(f"<{len(sizes)}Q", *sizes)


@pytest.mark.parametrize(
    "header",
    [
        _header(frames.OK, 0, 2**60),  # a pickle of an exabyte
        _header(frames.OK, 2**32 - 1, 10),  # four billion buffers
        _header(frames.OK, 2, 10, (2**40, 2**40)),  # buffers of a terabyte each
        _header(frames.OK, 1, 10, (frames.MAX_FRAME_BYTES,)),  # just past the bound, total
        _header(7, 0, 10),  # a status that is neither OK nor ERROR
    ],
    ids=["huge-pickle", "many-buffers", "huge-buffers", "total-past-bound", "bad-status"],
)
def test_a_header_past_the_bounds_is_refused_before_allocating(header):
    left, right = socket.socketpair()
    with left, right:
        left.sendall(header)
        left.shutdown(socket.SHUT_WR)
        tracemalloc.start()
        try:
            with pytest.raises(FrameError):
                read_frame(right)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert peak < 1 << 20  # no buffer was made for the claimed sizes


def test_a_frame_that_does_not_load_is_a_frame_error():
    left, right = socket.socketpair()
    with left, right:
        data = b"\x80\x05garbage, not a pickle"
        left.sendall(frames.HEADER.pack(frames.OK, 0, len(data)) + data)
        with pytest.raises(FrameError, match="does not load"):
            read_frame(right)


def test_an_authenticated_peers_oversized_frame_closes_its_connection_only(caplog):
    caplog.set_level(logging.WARNING, logger=channel.__name__)
    handled: list = []
    server = ChannelServer(handled.append, HOST)
    bad, good = Connection(server.endpoint), Connection(server.endpoint)
    bad.sock.sendall(_header(frames.OK, 0, 2**60))
    assert _closed_after(bad.sock, 5.0) is not None
    assert good.request("still served").result(10.0) is None
    assert handled == ["still served"]
    assert server.close()
    (reason,) = [r.getMessage() for r in caplog.records]
    assert f"closed the connection from {HOST}: a frame of" in reason


@pytest.mark.parametrize("sent", [_header(frames.OK, 0, 100) + b"x" * 10, b"\x00\x01"])
def test_an_authenticated_peers_stalled_frame_closes_its_connection_in_time(
    monkeypatch, caplog, sent
):
    """A frame that began (a truncated frame, half a header) must come whole within the
    frame's rest time, else its connection is closed, said, and its thread ends; an idle
    connection between frames is not."""
    caplog.set_level(logging.WARNING, logger=channel.__name__)
    monkeypatch.setattr(channel, "FRAME_REST_S", 0.5)
    server = ChannelServer(lambda request: request, HOST)
    stalled, idle = Connection(server.endpoint), Connection(server.endpoint)
    stalled.sock.sendall(sent)
    closed = _closed_after(stalled.sock, 5.0)
    assert closed is not None and 0.4 < closed < 1.5
    time.sleep(0.5)  # the idle one waited past the rest time between frames
    assert idle.request("still served").result(10.0) == "still served"
    assert _until(lambda: server.serving() == 1)
    assert server.close()
    (reason,) = [r.getMessage() for r in caplog.records]
    assert f"closed the connection from {HOST}: a frame stalled for 0.5 s" in reason


def test_a_value_past_the_bounds_is_refused_before_sending(monkeypatch):
    monkeypatch.setattr(frames, "MAX_FRAME_BYTES", 1 << 16)
    left, right = socket.socketpair()
    with left, right:
        with pytest.raises(FrameError, match="bytes"):
            write_frame(left, np.zeros(1 << 16, dtype=np.uint8))
        right.setblocking(False)
        with pytest.raises(BlockingIOError):  # nothing was sent
            right.recv(1)
    server = ChannelServer(lambda size: np.zeros(size, dtype=np.uint8), HOST)
    connection = Connection(server.endpoint)
    with pytest.raises(RemoteError) as raised:  # a reply past the bounds: the error instead
        connection.request(1 << 17).result(10.0)
    assert isinstance(raised.value.cause, FrameError)
    assert connection.request(16).result(10.0).nbytes == 16  # the connection goes on
    assert server.close()


def test_arrays_still_cross_after_the_handshake():
    server = ChannelServer(lambda arrays: [a * 2 for a in arrays], HOST)
    connection = Connection(server.endpoint)
    arrays = [np.arange(100_000, dtype=np.float32), np.ones((64, 16)), np.zeros(0)]
    for reply, sent in zip(connection.request(arrays).result(10.0), arrays, strict=True):
        np.testing.assert_array_equal(reply, sent * 2)
    assert pickle.loads(pickle.dumps(server.endpoint))[:2] == server.endpoint[:2]
    assert server.close()


def test_the_server_listens_on_its_host_only():
    server = ChannelServer(lambda request: request, HOST)
    host, port, _ = server.endpoint
    assert host == HOST
    assert server._listener.getsockname()[:2] == (HOST, port)
    with pytest.raises(ConnectionRefusedError):  # another loopback address of this machine
        socket.create_connection(("127.0.0.2", port), timeout=5.0)
    assert server.close()


def test_close_ends_every_thread_and_the_port_refuses(short_handshake):
    before = set(threading.enumerate())
    server = ChannelServer(lambda request: request, HOST)
    host, port, _ = server.endpoint
    connections = [Connection(server.endpoint) for _ in range(3)]
    for connection in connections:
        assert connection.request("up").result(10.0) == "up"
    silent = socket.create_connection((host, port))  # mid-handshake when the server closes
    assert _until(lambda: server.serving() == 4)
    assert server.close(wait_s=5.0)
    assert server.serving() == 0
    assert set(threading.enumerate()) - before == set()  # acceptor, connections: ended
    with pytest.raises(ChannelClosed):
        connections[0].request("down").result(10.0)
    assert _closed_after(silent, 5.0) is not None
    silent.close()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection((host, port), timeout=5.0)


def test_close_waits_for_a_handler_then_its_thread_ends():
    release = threading.Event()
    server = ChannelServer(lambda request: release.wait(10.0), HOST)
    connection = Connection(server.endpoint)
    ticket = connection.request("held")
    assert _until(lambda: server.serving() == 1)
    time.sleep(0.1)  # the request is inside the handler
    assert not server.close(wait_s=0.2)  # still handling
    release.set()
    assert _until(lambda: server.serving() == 0)
    with pytest.raises(ChannelClosed):
        ticket.result(10.0)
