"""The channel's frames: a header, the sizes of the out-of-band buffers, the pickle
(protocol 5) of the value, and the buffers (numpy arrays travel without a copy into the
pickle). The header is checked against the format's bounds before anything is allocated
for the frame: a peer's sizes never make this process allocate more than MAX_FRAME_BYTES,
and only an authenticated peer's frames reach here (handshake.py), so only those are
unpickled."""

from __future__ import annotations

import pickle
import select
import socket
import struct
from collections.abc import Callable
from typing import Any

from recsync.runtime.transport.errors import ChannelClosed, FrameError
from recsync.runtime.transport.faults import hold_frame

HEADER = struct.Struct("<BIQ")  # status, number of out-of-band buffers, pickle bytes
OK, ERROR = 0, 1
MAX_BUFFERS = 1 << 16  # out-of-band buffers (numpy arrays) a frame may carry
MAX_FRAME_BYTES = 1 << 32  # 4 GiB: a frame's pickle and buffers together
_SIZE = struct.Struct("<Q")


def send_all(
    sock: socket.socket, pieces: list[Any], on_readable: Callable[[], None] | None = None
) -> None:
    """Send every piece (anything with the buffer protocol), gathered, in order. With
    `on_readable`, never wait on a full send buffer while the peer has something for us:
    while the socket cannot take more, `on_readable()` reads what the peer sent (a peer
    writing a large reply reads no request meanwhile; if neither side read, both would
    wait on each other's full buffers forever)."""
    views = [memoryview(p).cast("B") for p in pieces]
    views = [v for v in views if v.nbytes]
    flags = 0 if on_readable is None else socket.MSG_DONTWAIT
    if on_readable is not None:
        sock.settimeout(None)  # a socket with a timeout waits out a full buffer itself
    while views:
        try:
            sent = sock.sendmsg(views[:256], [], flags)
        except BlockingIOError:
            assert on_readable is not None
            readable, _, _ = select.select([sock], [sock], [])
            if readable:
                on_readable()
                sock.settimeout(None)
            continue
        while sent:
            if sent >= views[0].nbytes:
                sent -= views[0].nbytes
                views.pop(0)
            else:
                views[0] = views[0][sent:]
                sent = 0


def recv_exact(sock: socket.socket, size: int, wait_idle: bool = False) -> bytearray:
    """The next `size` bytes (ChannelClosed if the peer closed before). On a socket with
    a timeout, TimeoutError once the peer sent nothing more for that long, unless
    `wait_idle` and none of them had come yet (a peer between frames may be idle)."""
    buffer = bytearray(size)
    view, got = memoryview(buffer), 0
    while got < size:
        try:
            count = sock.recv_into(view[got:])
        except TimeoutError:
            if wait_idle and not got:
                continue
            raise
        if not count:
            raise ChannelClosed("the connection was closed")
        got += count
    return buffer


def _check(count: int, total: int) -> None:
    if count > MAX_BUFFERS:
        raise FrameError(f"a frame of {count} buffers (at most {MAX_BUFFERS})")
    if total > MAX_FRAME_BYTES:
        raise FrameError(f"a frame of {total} bytes (at most {MAX_FRAME_BYTES})")


def write_frame(
    sock: socket.socket,
    value: Any,
    failed: bool = False,
    on_readable: Callable[[], None] | None = None,
) -> int:
    """Send one value (its numpy arrays out of band); the bytes sent. A value past the
    bounds raises FrameError before anything is sent."""
    buffers: list[pickle.PickleBuffer] = []
    data = pickle.dumps(value, protocol=5, buffer_callback=buffers.append)
    raws = [b.raw() for b in buffers]
    _check(len(raws), len(data) + sum(r.nbytes for r in raws))
    sizes = struct.pack(f"<{len(raws)}Q", *(r.nbytes for r in raws))
    header = HEADER.pack(ERROR if failed else OK, len(raws), len(data))
    hold_frame()  # a lossy or slow link emulated (faults.py; off unless asked)
    send_all(sock, [header, sizes, data, *raws], on_readable)
    return len(header) + len(sizes) + len(data) + sum(r.nbytes for r in raws)


def read_frame(sock: socket.socket, wait_idle: bool = False) -> tuple[bool, Any]:
    """(whether the sender failed, the value) of the next frame; FrameError for a frame
    past the bounds (checked before reading its body) or one that does not load. On a
    socket with a timeout: TimeoutError if a frame stalls that long (`wait_idle`: once it
    began; before, it may be as long as it likes in coming)."""
    status, count, length = HEADER.unpack(recv_exact(sock, HEADER.size, wait_idle))
    if status not in (OK, ERROR):
        raise FrameError(f"a frame of status {status} (neither OK nor ERROR)")
    _check(count, length)
    sizes = struct.unpack(f"<{count}Q", recv_exact(sock, _SIZE.size * count)) if count else ()
    _check(count, length + sum(sizes))
    data = recv_exact(sock, length)
    buffers = [recv_exact(sock, size) for size in sizes]
    try:
        value = pickle.loads(data, buffers=buffers)
    except Exception as error:  # noqa: BLE001 - any failure to load is the frame's
        raise FrameError(f"a frame that does not load: {type(error).__name__}: {error}") from None
    return status == ERROR, value
