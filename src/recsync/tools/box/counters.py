"""A box's link counters, read by the kernel in each host's own namespace."""

from __future__ import annotations

import json

from recsync.tools.box.ops import BoxState, run
from recsync.tools.box.plan import INNER_DEVICE


def counters(state: BoxState) -> dict[int, dict[str, int]]:
    """Each host's link counters, read by the kernel in the host's own namespace: bytes
    and packets it sent (tx) and received (rx) on its interface, and the TCP segments it
    sent and sent again (a shaped link that drops costs retransmissions, on the link too)."""
    found = {}
    for host in state.plan.hosts:
        ns = state.plan.namespace(host)
        listed = json.loads(run(["ip", "-j", "-s", "-n", ns, "link", "show", INNER_DEVICE]).stdout)
        stats = listed[0]["stats64"]
        tcp = _tcp_counters(run(["ip", "netns", "exec", ns, "cat", "/proc/net/snmp"]).stdout)
        found[host] = {
            "tx_bytes": stats["tx"]["bytes"],
            "tx_packets": stats["tx"]["packets"],
            "rx_bytes": stats["rx"]["bytes"],
            "rx_packets": stats["rx"]["packets"],
            "tcp_out_segments": tcp.get("OutSegs", 0),
            "tcp_retransmitted_segments": tcp.get("RetransSegs", 0),
        }
    return found


def _tcp_counters(snmp: str) -> dict[str, int]:
    """The Tcp: counters of /proc/net/snmp (a line of names, then a line of values)."""
    rows = [line.split()[1:] for line in snmp.splitlines() if line.startswith("Tcp:")]
    if len(rows) < 2:
        return {}
    return {name: int(value) for name, value in zip(rows[0], rows[1], strict=False)}
