"""Direct TCP connections for the messages a node's loops send to their peers.

Ray starts, places, watches and stops every node; the messages of a training step (next
batch, lookups, pushes, pulls) go over connections of their own, because a Ray actor call
costs far more CPU at both ends than the bytes it carries (see docs/perf-log.md). A node's
`ChannelServer` listens on its node's own address and answers each connection on a thread
of its own, in the order its requests came; each loop holds one `Connection` per peer, so
its requests to a peer are answered in the order it sent them. A connection opens with a
handshake (handshake.py: the protocol's version, and proofs of the server's key, which
travels in the endpoint, never on the wire); frames (frames.py) are read only from a peer
that passed it."""

from __future__ import annotations

import contextlib
import logging
import pickle
import select
import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from recsync.runtime.thread_cpu import CHANNEL, counted
from recsync.runtime.timeouts import (
    CLIENT_HANDSHAKE_S,
    CLOSE_WAIT_S,
    CONNECT_TIMEOUT_S,
    FRAME_REST_S,
    HANDSHAKE_TIMEOUT_S,
)
from recsync.runtime.transport import handshake, traffic
from recsync.runtime.transport.errors import (
    ChannelClosed,
    FrameError,
    ProtocolMismatch,
    RemoteError,
)
from recsync.runtime.transport.frames import read_frame, write_frame

Endpoint = tuple[str, int, bytes]  # host, port, the server's key (handed out through Ray)
REPLY_WHILE_SENDING_S = 60.0  # a reply that began to arrive while sending: its rest
ACCEPT_RETRY_S = 0.1  # after a failed accept (out of file descriptors): not a busy loop
log = logging.getLogger(__name__)


def _sendable(error: Exception) -> Exception:
    """`error`, or (if it does not pickle) a RuntimeError that names it."""
    try:
        pickle.dumps(error)
    except Exception:  # noqa: BLE001 - any pickling failure
        return RuntimeError(f"{type(error).__name__}: {error}")
    return error


def _listen(host: str) -> socket.socket:
    """A listening socket on `host` only (an IPv4 or IPv6 address), on a free port."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    return socket.create_server((host, 0), family=family)


class ChannelServer:
    """Answers requests with `handle(request)`: listens on `host` (the node's own address,
    the one its endpoint names), a thread per connection, its requests in order; an
    exception `handle` raises goes back to the caller. `close` ends it."""

    def __init__(self, handle: Callable[[Any], Any], host: str, key: bytes | None = None):
        self._handle = handle
        self._key = handshake.new_key() if key is None else key
        self._listener = _listen(host)
        self.endpoint: Endpoint = (host, self._listener.getsockname()[1], self._key)
        self._lock = threading.Lock()
        self._serving: dict[socket.socket, threading.Thread] = {}
        self._closed = False
        self._acceptor = threading.Thread(target=self._accept, daemon=True, name="channel-accept")
        self._acceptor.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                if self._closed or self._listener.fileno() < 0:
                    return
                time.sleep(ACCEPT_RETRY_S)  # a connection reset before it was accepted, or
                continue  # the process is out of file descriptors: the next may do
            thread = threading.Thread(
                target=counted(CHANNEL, self._serve), args=(conn,), daemon=True
            )
            with self._lock:
                if self._closed:
                    conn.close()
                    return
                self._serving[conn] = thread
            thread.start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            with conn:
                peer = "a peer gone already"
                try:
                    peer = str(conn.getpeername()[0])
                    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                    handshake.admit(conn, self._key, time.monotonic() + HANDSHAKE_TIMEOUT_S)
                    conn.settimeout(None)
                except handshake.Refused as refused:  # a stranger, or another version
                    log.warning("%s: refused a connection from %s: %s", self.name, peer, refused)
                    return
                except OSError as error:  # it went, or did not finish its handshake in time
                    why = f"in its handshake: {error}"
                    log.warning("%s: dropped the connection from %s %s", self.name, peer, why)
                    return
                self._answer(conn, peer)
        finally:
            with self._lock:
                self._serving.pop(conn, None)

    @property
    def name(self) -> str:
        return f"channel {self.endpoint[0]}:{self.endpoint[1]}"

    def _answer(self, conn: socket.socket, peer: str) -> None:
        while True:
            conn.settimeout(FRAME_REST_S)  # a frame that began comes whole within it
            try:
                _, request = read_frame(conn, wait_idle=True)
            except FrameError as error:  # broke the format: closed before any allocation
                log.warning("%s: closed the connection from %s: %s", self.name, peer, error)
                return
            except TimeoutError:
                why = f"a frame stalled for {FRAME_REST_S:g} s"
                log.warning("%s: closed the connection from %s: %s", self.name, peer, why)
                return
            except OSError:  # the caller closed its end (or died)
                return
            conn.settimeout(None)  # a reply waits for a busy caller to read it
            try:
                reply, failed = self._handle(request), False
            except Exception as error:  # noqa: BLE001 - sent back to the caller
                reply, failed = _sendable(error), True
            try:
                try:
                    sent = write_frame(conn, reply, failed)
                except FrameError as error:  # past the bounds, nothing sent: say so instead
                    sent = write_frame(conn, error, True)
            except OSError:
                return
            traffic.count(peer, sent)

    def serving(self) -> int:
        """How many connections have a thread of their own now (handshakes included)."""
        with self._lock:
            return len(self._serving)

    def close(self, wait_s: float = CLOSE_WAIT_S) -> bool:
        """Stop accepting, close the listener and every connection; whether every
        connection's thread ended within `wait_s` seconds (one inside `handle` ends once
        `handle` returns: its reply then finds the connection closed)."""
        with self._lock:
            self._closed = True
            serving = list(self._serving.items())
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes the accepting thread
        self._listener.close()
        for conn, _ in serving:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)  # wakes a thread reading it
        deadline = time.monotonic() + wait_s
        for thread in [self._acceptor, *(thread for _, thread in serving)]:
            thread.join(max(deadline - time.monotonic(), 0.0))
        return not any(t.is_alive() for t in [self._acceptor, *(t for _, t in serving)])


class Ticket:
    """A request on its way: done once its reply (or the connection's end) came."""

    __slots__ = ("connection", "done", "failed", "local", "value")

    def __init__(self, connection: Connection):
        self.connection = connection
        self.done, self.failed, self.local = False, False, False
        self.value: Any = None

    def settle(self, failed: bool, value: Any, local: bool = False) -> None:
        """The reply came (`failed`: the peer raised `value`), or, `local`, the connection
        broke with `value` (ChannelClosed, FrameError)."""
        self.done, self.failed, self.local, self.value = True, failed, local, value

    def result(self, timeout: float) -> Any:
        """The reply; raises RemoteError (the peer raised), ChannelClosed (its subclass
        AuthenticationFailed), FrameError, TimeoutError."""
        deadline = time.monotonic() + timeout
        while not self.done:
            self.connection.read_reply(deadline - time.monotonic())
        if self.local:
            raise self.value
        if self.failed:
            raise RemoteError(self.value)
        return self.value


class Connection:
    """One loop's connection to one peer (used by one thread): requests go out in order,
    their replies come back in that order. A peer that cannot be reached, or refuses the
    endpoint's key, leaves it `broken` (its requests fail with that); a peer of another
    protocol version raises ProtocolMismatch here."""

    def __init__(self, endpoint: Endpoint):
        self.endpoint = endpoint
        self.waiting: deque[Ticket] = deque()
        self.broken: ChannelClosed | FrameError | None = None
        host, port, key = endpoint
        where = f"{host}:{port}"
        try:
            self.sock = socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S)
        except OSError as error:
            self.broken = ChannelClosed(f"cannot connect to {where}: {error}")
            return
        try:
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            handshake.join(self.sock, key, where, time.monotonic() + CLIENT_HANDSHAKE_S)
            self.sock.settimeout(None)
        except ChannelClosed as error:
            self._break(error)
        except OSError as error:
            self._break(ChannelClosed(f"{where} did not finish the handshake: {error}"))
        except ProtocolMismatch:
            self.sock.close()
            raise

    def request(self, value: Any) -> Ticket:
        """Send `value`; its ticket. FrameError (nothing sent) for a value past the bounds."""
        ticket = Ticket(self)
        if self.broken is None:
            try:
                sent = write_frame(self.sock, value, on_readable=self._read_while_sending)
                traffic.count(self.endpoint[0], sent)
            except OSError as error:
                self._break(error)
        if self.broken is not None:
            ticket.settle(True, self.broken, local=True)
        else:
            self.waiting.append(ticket)
        return ticket

    def read_reply(self, timeout: float | None) -> None:
        """Read the reply of the oldest request waiting (raises TimeoutError if none came
        within `timeout` seconds: the connection is then unusable)."""
        assert self.waiting, "no request waits for a reply"
        where = f"{self.endpoint[0]}:{self.endpoint[1]}"
        if timeout is not None and timeout <= 0:
            raise TimeoutError(f"no reply from {where}")
        self.sock.settimeout(timeout)
        try:
            failed, value = read_frame(self.sock)
        except TimeoutError:
            self._break(ChannelClosed(f"{where} timed out"))
            raise
        except FrameError as error:
            self._break(FrameError(f"{where} sent {error}"))
            return
        except OSError as error:
            self._break(error)
            return
        self.waiting.popleft().settle(failed, value)

    def _read_while_sending(self) -> None:
        """The peer sent something while this connection waited to send: the reply of an
        earlier request (one the loop went on without, a partial pull's late block), read
        and kept for its ticket. Anything else is the peer's end: the connection breaks."""
        if not self.waiting:
            raise ChannelClosed(f"{self.endpoint[0]}:{self.endpoint[1]} sent unasked or closed")
        self.read_reply(REPLY_WHILE_SENDING_S)
        if self.broken is not None:
            raise ChannelClosed(str(self.broken))

    def _break(self, error: BaseException) -> None:
        if isinstance(error, (ChannelClosed, FrameError)):
            self.broken = error
        else:
            self.broken = ChannelClosed(str(error))
        while self.waiting:
            self.waiting.popleft().settle(True, self.broken, local=True)
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
