"""How a connection to a channel opens: both ends show the protocol's magic and version,
and each proves it holds the server's key without sending it.

1. The server sends its hello: MAGIC, its VERSION, a fresh random nonce.
2. The client checks the magic and version (ProtocolMismatch, naming both, if either
   differs) and answers: MAGIC, VERSION, a nonce of its own, and its proof,
   HMAC-SHA256(key, "client" | magic | version | both nonces).
3. The server checks the magic, the version and the proof (`hmac.compare_digest`). It
   answers REFUSED_VERSION or REFUSED_KEY and closes, or ACCEPTED and its own proof
   (the same HMAC over "server" | ...), which the client checks in turn: a process that
   took a lost server's port cannot pass as it, so neither end ever unpickles a frame from
   a peer that does not hold the key.

Each end runs its steps under one deadline (runtime/timeouts.py): a server drops a peer
that sends nothing, too little or garbage within HANDSHAKE_TIMEOUT_S; a client gives a
server CLIENT_HANDSHAKE_S. The key is random per server and reaches its clients inside
the server's endpoint, handed out through Ray."""

from __future__ import annotations

import hmac
import secrets
import socket
import struct
import time

from recsync.runtime.transport.errors import AuthenticationFailed, ChannelClosed, ProtocolMismatch

MAGIC = b"RSCH"  # recsync channel
VERSION = 1  # 0 was the token sent in clear, before versions; bump on any change of format
KEY_BYTES = 32
NONCE_BYTES = 16
HELLO = struct.Struct(f"<4sH{NONCE_BYTES}s")  # magic, version, server nonce
ANSWER = struct.Struct(f"<4sH{NONCE_BYTES}s32s")  # magic, version, client nonce, proof
ACCEPTED, REFUSED_KEY, REFUSED_VERSION = 0, 1, 2
_PROOF_BYTES = 32
LATE_READ_S = 1e-3  # past the deadline, how long a read waits for bytes not there yet


class Refused(Exception):
    """The server's side: the peer did not open the connection as the protocol says."""


def new_key() -> bytes:
    """A fresh random key for a server."""
    return secrets.token_bytes(KEY_BYTES)


def proof(key: bytes, side: bytes, version: int, server_nonce: bytes, client_nonce: bytes) -> bytes:
    """What `side` (b"client" or b"server") sends to show it holds `key`."""
    signed = side + MAGIC + struct.pack("<H", version) + server_nonce + client_nonce
    return hmac.digest(key, signed, "sha256")


def recv_by(sock: socket.socket, size: int, deadline: float) -> bytes:
    """The next `size` bytes, all by `deadline` (time.monotonic); TimeoutError if not,
    ChannelClosed if the peer closed first. Bytes that arrived by the deadline count even
    if this thread reads them late (a busy process): past it, only what is there already
    is read."""
    buffer = bytearray(size)
    view, got = memoryview(buffer), 0
    while got < size:
        sock.settimeout(max(deadline - time.monotonic(), LATE_READ_S))
        try:
            count = sock.recv_into(view[got:])
        except TimeoutError:
            raise TimeoutError(f"{got} of {size} bytes of the handshake came in time") from None
        if not count:
            raise ChannelClosed("the connection was closed during the handshake")
        got += count
    return bytes(buffer)


def admit(sock: socket.socket, key: bytes, deadline: float) -> None:
    """The server's side. Returns once the peer proved it holds `key`; raises Refused (the
    peer was told why, where it speaks the protocol) or OSError (it left, or ran out of
    time). The caller closes the connection on either."""
    server_nonce = secrets.token_bytes(NONCE_BYTES)
    sock.settimeout(max(deadline - time.monotonic(), 1e-3))
    sock.sendall(HELLO.pack(MAGIC, VERSION, server_nonce))
    magic, version, client_nonce, shown = ANSWER.unpack(recv_by(sock, ANSWER.size, deadline))
    if magic != MAGIC:
        raise Refused("not the channel's protocol")
    if version != VERSION:
        sock.sendall(bytes([REFUSED_VERSION]))
        raise Refused(f"version {version}, not {VERSION}")
    if not hmac.compare_digest(shown, proof(key, b"client", VERSION, server_nonce, client_nonce)):
        sock.sendall(bytes([REFUSED_KEY]))
        raise Refused("the wrong key")
    sock.sendall(bytes([ACCEPTED]) + proof(key, b"server", VERSION, server_nonce, client_nonce))


def join(sock: socket.socket, key: bytes, where: str, deadline: float) -> None:
    """The client's side, to the server at `where` (host:port). Returns once both ends
    proved they hold `key`; raises ProtocolMismatch, AuthenticationFailed (the server
    refused the key or could not prove it holds it), or OSError (it left, or ran out of
    time). The caller closes the connection on any."""
    magic, version, server_nonce = HELLO.unpack(recv_by(sock, HELLO.size, deadline))
    if magic != MAGIC:
        raise ProtocolMismatch(where, VERSION, None)
    if version != VERSION:
        raise ProtocolMismatch(where, VERSION, version)
    client_nonce = secrets.token_bytes(NONCE_BYTES)
    shown = proof(key, b"client", VERSION, server_nonce, client_nonce)
    sock.settimeout(max(deadline - time.monotonic(), 1e-3))
    sock.sendall(ANSWER.pack(MAGIC, VERSION, client_nonce, shown))
    verdict = recv_by(sock, 1, deadline)[0]
    if verdict == REFUSED_KEY:
        raise AuthenticationFailed(f"{where} refused the endpoint's key (not its server)")
    if verdict != ACCEPTED:
        raise ProtocolMismatch(where, VERSION, None)
    expected = proof(key, b"server", VERSION, server_nonce, client_nonce)
    if not hmac.compare_digest(recv_by(sock, _PROOF_BYTES, deadline), expected):
        raise AuthenticationFailed(f"{where} could not prove it holds the endpoint's key")
