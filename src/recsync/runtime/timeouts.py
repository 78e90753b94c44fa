"""Every timeout of the Ray engine's transport and hosting, in one table: how long each
wait may last before the engine calls the other end gone, hung or not a peer. The modules
that wait import their figures from here; a change to one is a change to this file.

Grouped by who waits. Each comment says what the wait covers and why its figure."""

from __future__ import annotations

from dataclasses import dataclass

# -- transport (runtime/transport): a loop's connections to its peers' channels ----------

CONNECT_TIMEOUT_S = 30.0
"""A connection to a peer's channel opens (TCP) within this, else the peer is unreachable
(a busy machine can take seconds to accept; a dead one refuses at once)."""

HANDSHAKE_TIMEOUT_S = 5.0
"""A server closes a connection whose handshake (the client's answer to its hello: version
and proof of the key) has not come within this: a stranger that sends nothing, too little
or garbage. A real client answers at once: seconds are plenty."""

CLIENT_HANDSHAKE_S = 30.0
"""A client calls a server unreachable (a lost peer) if its side of the handshake (hello,
verdict, proof) has not come within this: longer than the server's, so that a loaded
machine, whose server thread may start late, does not pass for a lost node."""

FRAME_REST_S = 60.0
"""Once a reply began to arrive, the longest its rest may take (a frame of a few hundred
MB over a slow link still arrives within it)."""

CLOSE_WAIT_S = 5.0
"""`ChannelServer.close` waits this long for its connections' threads to end (a thread
still inside its handler ends when the handler returns)."""

REPLY_WAIT_S = 1_000.0  # the default of `[recovery] call_timeout_s`
"""The longest a loop's call waits for its reply, and an Await for its condition (servers
bound their own waits: READY_WAIT_S and a sync's quorum waits are shorter)."""

REPLACE_WAIT_S = 300.0  # the default of `[recovery] replace_wait_s`
"""The longest a caller waits for a lost node's replacement (a new actor started, its
state restored, its endpoint handed out: START_TIMEOUT_S bounds the slowest part)."""

# -- hosting (runtime/ray): the driver's and the actors' waits on Ray --------------------

RAY_CONNECT_TIMEOUT_S = 10.0
"""A TCP connection to a Ray cluster's address opens within this, else the address is
named as unreachable before Ray's own, much longer, retries."""

PING_TIMEOUT_S = 10.0
"""A started actor answers a ping within this, else it is dead or hung."""

MACHINE_ANSWER_S = 5.0
"""Before a lost node is started again on its machine, the machine runs a probe task within
this, else the job takes it for lost with the node (Ray calls a machine dead only once its
health checks fail, 15 s and more later)."""

START_TIMEOUT_S = 300.0
"""Actors start their processes and import torch within this: slow on a busy machine."""

COLLECTIVE_TIMEOUT_S = 60.0
"""The trainers of a group join their gloo collective within this."""

READY_WAIT_S = 900.0
"""The longest a request may wait while its node defers it (a serialized server not yet
ready for it: coordinator/hosting.py's `waits`)."""


@dataclass(frozen=True)
class CallWaits:
    """What a job's loops wait, as its config says (`[recovery]`): `reply_s` for a call's
    reply or an Await's condition (REPLY_WAIT_S), `replace_s` for a lost node's
    replacement (REPLACE_WAIT_S)."""

    reply_s: float = REPLY_WAIT_S
    replace_s: float = REPLACE_WAIT_S
