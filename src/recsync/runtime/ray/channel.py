"""Direct TCP connections for the messages a node's loops send to their peers.

Ray starts, places, watches and stops every node; the messages of a training step (next
batch, lookups, pushes, pulls) go over connections of their own, because a Ray actor call
costs far more CPU at both ends than the bytes it carries (see docs/perf-log.md). A node's
`ChannelServer` answers each connection on a thread of its own, in the order its requests
came; each loop holds one `Connection` per peer, so its requests to a peer are answered in
the order it sent them. A connection opens with the server's token (random, handed out
through Ray with its endpoint): nothing is unpickled from one that does not. A frame is a
header, the pickle (protocol 5) of the value and its out-of-band buffers (numpy arrays
travel without a copy into the pickle)."""

from __future__ import annotations

import contextlib
import hmac
import pickle
import secrets
import select
import socket
import struct
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from recsync.runtime.ray.thread_cpu import CHANNEL, counted

_HEADER = struct.Struct("<BIQ")  # status, number of out-of-band buffers, pickle bytes
_OK, _ERROR = 0, 1
CONNECT_TIMEOUT_S = 30.0
FRAME_REST_S = 60.0  # once a reply began to arrive, the longest its rest may take

TOKEN_BYTES = 16

Endpoint = tuple[str, int, bytes]  # host, port, the token a connection opens with


class ChannelClosed(ConnectionError):
    """The peer's end is gone: its process died, or it could not be reached."""


class RemoteError(Exception):
    """The peer raised `cause` while handling the request."""

    def __init__(self, cause: BaseException):
        super().__init__(cause)
        self.cause = cause


def _send_all(sock: socket.socket, pieces: list[Any]) -> None:
    views = [memoryview(p).cast("B") for p in pieces]
    views = [v for v in views if v.nbytes]
    while views:
        sent = sock.sendmsg(views[:256])
        while sent:
            if sent >= views[0].nbytes:
                sent -= views[0].nbytes
                views.pop(0)
            else:
                views[0] = views[0][sent:]
                sent = 0


def _recv_exact(sock: socket.socket, size: int) -> bytearray:
    buffer = bytearray(size)
    view, got = memoryview(buffer), 0
    while got < size:
        count = sock.recv_into(view[got:])
        if not count:
            raise ChannelClosed("the connection was closed")
        got += count
    return buffer


def write_frame(sock: socket.socket, value: Any, failed: bool = False) -> None:
    """Send one value (its numpy arrays out of band)."""
    buffers: list[pickle.PickleBuffer] = []
    data = pickle.dumps(value, protocol=5, buffer_callback=buffers.append)
    raws = [b.raw() for b in buffers]
    sizes = struct.pack(f"<{len(raws)}Q", *(r.nbytes for r in raws))
    header = _HEADER.pack(_ERROR if failed else _OK, len(raws), len(data))
    _send_all(sock, [header, sizes, data, *raws])


def read_frame(sock: socket.socket) -> tuple[bool, Any]:
    """(whether the sender failed, the value) of the next frame."""
    status, count, length = _HEADER.unpack(_recv_exact(sock, _HEADER.size))
    sizes = struct.unpack(f"<{count}Q", _recv_exact(sock, 8 * count)) if count else ()
    data = _recv_exact(sock, length)
    buffers = [_recv_exact(sock, size) for size in sizes]
    return status == _ERROR, pickle.loads(data, buffers=buffers)


def _sendable(error: Exception) -> Exception:
    """`error`, or (if it does not pickle) a RuntimeError that names it."""
    try:
        pickle.dumps(error)
    except Exception:  # noqa: BLE001 - any pickling failure
        return RuntimeError(f"{type(error).__name__}: {error}")
    return error


class ChannelServer:
    """Answers requests with `handle(request)`: a thread per connection, its requests in
    order; an exception `handle` raises goes back to the caller."""

    def __init__(self, handle: Callable[[Any], Any], host: str):
        self._handle = handle
        self._token = secrets.token_bytes(TOKEN_BYTES)
        self._listener = socket.create_server(("", 0))
        self.endpoint: Endpoint = (host, self._listener.getsockname()[1], self._token)
        self._open: set[socket.socket] = set()  # live connections, closed by `close`
        self._guard = threading.Lock()
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self) -> None:
        """Stop answering: no new connection, and every open one closed (its thread ends)."""
        with self._guard:
            self._closed = True
            sockets = [self._listener, *self._open]
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)  # wakes a thread blocked on it
            sock.close()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            with self._guard:
                if self._closed:
                    conn.close()
                    return
                self._open.add(conn)
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(
                target=counted(CHANNEL, self._serve), args=(conn,), daemon=True
            ).start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            self._answer(conn)
        finally:
            with self._guard:
                self._open.discard(conn)

    def _answer(self, conn: socket.socket) -> None:
        with conn:
            try:
                token = _recv_exact(conn, TOKEN_BYTES)
            except OSError:
                return
            if not hmac.compare_digest(bytes(token), self._token):
                return
            while True:
                try:
                    _, request = read_frame(conn)
                except OSError:  # the caller closed its end (or died)
                    return
                try:
                    reply, failed = self._handle(request), False
                except Exception as error:  # noqa: BLE001 - sent back to the caller
                    reply, failed = _sendable(error), True
                try:
                    write_frame(conn, reply, failed)
                except OSError:
                    return


class Ticket:
    """A request on its way: done once its reply (or the connection's end) came."""

    __slots__ = ("connection", "done", "failed", "value")

    def __init__(self, connection: Connection):
        self.connection = connection
        self.done, self.failed = False, False
        self.value: Any = None

    def settle(self, failed: bool, value: Any) -> None:
        self.done, self.failed, self.value = True, failed, value

    def result(self, timeout: float) -> Any:
        """The reply; raises RemoteError (the peer raised), ChannelClosed, TimeoutError."""
        deadline = time.monotonic() + timeout
        while not self.done:
            self.connection.read_reply(deadline - time.monotonic())
        if self.failed:
            if isinstance(self.value, ChannelClosed):
                raise self.value
            raise RemoteError(self.value)
        return self.value


class Connection:
    """One loop's connection to one peer (used by one thread): requests go out in order,
    their replies come back in that order."""

    def __init__(self, endpoint: Endpoint):
        self.endpoint = endpoint
        self.waiting: deque[Ticket] = deque()
        self.broken: ChannelClosed | None = None
        host, port, token = endpoint
        try:
            self.sock = socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S)
            self.sock.sendall(token)
        except OSError as error:
            self.broken = ChannelClosed(f"cannot connect to {host}:{port}: {error}")
            return
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.settimeout(None)

    def request(self, value: Any) -> Ticket:
        ticket = Ticket(self)
        if self.broken is None:
            try:
                write_frame(self.sock, value)
            except OSError as error:
                self._break(error)
        if self.broken is not None:
            ticket.settle(True, self.broken)
        else:
            self.waiting.append(ticket)
        return ticket

    def read_reply(self, timeout: float | None) -> None:
        """Read the reply of the oldest request waiting (raises TimeoutError if none came
        within `timeout` seconds: the connection is then unusable)."""
        assert self.waiting, "no request waits for a reply"
        if timeout is not None and timeout <= 0:
            raise TimeoutError(f"no reply from {self.endpoint[0]}:{self.endpoint[1]}")
        self.sock.settimeout(timeout)
        try:
            failed, value = read_frame(self.sock)
        except TimeoutError:
            self._break(ChannelClosed(f"{self.endpoint[0]}:{self.endpoint[1]} timed out"))
            raise
        except OSError as error:
            self._break(error)
            return
        self.waiting.popleft().settle(failed, value)

    def _break(self, error: BaseException) -> None:
        self.broken = error if isinstance(error, ChannelClosed) else ChannelClosed(str(error))
        while self.waiting:
            self.waiting.popleft().settle(True, self.broken)
        self.sock.close()

    def close(self) -> None:
        if self.broken is None:
            self.sock.close()


def wait(tickets: list[Ticket], need: int, timeout: float) -> bool:
    """Wait until `need` of `tickets` are done or `timeout` seconds passed; whether they are."""
    deadline = time.monotonic() + timeout
    while sum(t.done for t in tickets) < need:
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        open_ = {id(t.connection.sock): t.connection for t in tickets if not t.done}
        socks = [c.sock for c in open_.values()]
        readable, _, _ = select.select(socks, [], [], left)
        for sock in readable:
            open_[id(sock)].read_reply(FRAME_REST_S)
    return True
