"""The multi-host box on one machine, as a plan (pure): its names, addresses and the iproute2
and tc commands that build, shape and remove it. `ops.py` carries them out.

A box of N hosts is N Linux network namespaces (`{name}-h{i}`), each with its own network
stack and one interface, `eth0`, the inner end of a veth pair whose outer end
(`{name}-v{i}`) is a port of the box's bridge (`{name}-br`). The bridge holds the box's
gateway address (`{prefix}.1`), so this machine's own namespace reaches every host; host i
has `{prefix}.{10 + i}`. A host's link is its veth pair: shaping it puts a token bucket
(tc tbf) on both ends' egress, the inner end for what the host sends and the outer end for
what it receives, so the link carries at most the rate each way (full duplex, as a switch
port). Every name starts with the box's name, so `down` finds what a box made, also after a
crash that lost its state file.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass

from recsync.errors import ConfigError

DEFAULT_NAME = "rsbox"
DEFAULT_SUBNET = "10.213.0.0/24"
INNER_DEVICE = "eth0"  # a host's interface inside its namespace
FIRST_HOST = 10  # host i's address: the subnet's address 10 + i
RAY_PORT = 6379
MAX_HOSTS = 64
NAME_PATTERN = re.compile(r"[a-z][a-z0-9]{0,5}")  # devices' names are at most 15 characters
TBF_LATENCY_MS = 50  # a shaped link queues at most this long before it drops (a switch port)
TBF_MIN_BURST_BYTES = 16 * 1514  # the bucket: at least 16 full frames...
TBF_BURST_S = 0.004  # ...or 4 ms at the rate, whichever is more (rate / HZ at least)

Command = list[str]


@dataclass(frozen=True)
class Link:
    """How one host's link is shaped: `mbit` megabits a second each way (None: not
    shaped), and, where the kernel has netem, `delay_ms` added each way and `loss` the
    fraction of frames dropped."""

    mbit: float | None = None
    delay_ms: float = 0.0
    loss: float = 0.0

    def __post_init__(self) -> None:
        if self.mbit is not None and not self.mbit > 0:
            raise ConfigError(f"a link's rate must be > 0 Mbit/s, got {self.mbit}")
        if not self.delay_ms >= 0:
            raise ConfigError(f"a link's delay must be >= 0 ms, got {self.delay_ms}")
        if not 0.0 <= self.loss < 1.0:
            raise ConfigError(f"a link's loss must be a fraction in [0, 1), got {self.loss}")

    @property
    def needs_netem(self) -> bool:
        return bool(self.delay_ms or self.loss)

    def describe(self) -> str:
        rate = "unshaped" if self.mbit is None else f"{self.mbit:g} Mbit/s each way"
        extra = [f"+{self.delay_ms:g} ms" if self.delay_ms else "", f"{self.loss:.2%} lost"]
        return ", ".join([rate, *(e for e in extra if e and not e.startswith("0.00%"))])


@dataclass(frozen=True)
class BoxPlan:
    """A box: `num_hosts` hosts named after `name` on the /24 `subnet`, each Ray node
    advertising `cpus_per_host` CPUs (they share this machine's cores)."""

    num_hosts: int
    name: str = DEFAULT_NAME
    subnet: str = DEFAULT_SUBNET
    cpus_per_host: int = 1
    object_store_mb: int = 256

    def __post_init__(self) -> None:
        if not 1 <= self.num_hosts <= MAX_HOSTS:
            raise ConfigError(f"a box has 1 to {MAX_HOSTS} hosts, got {self.num_hosts}")
        if not NAME_PATTERN.fullmatch(self.name):
            raise ConfigError(
                f"box name {self.name!r}: 1 to 6 lowercase letters or digits, a letter first "
                "(it prefixes every device's name, which Linux caps at 15 characters)"
            )
        try:
            net = ipaddress.IPv4Network(self.subnet)
        except ValueError as error:
            raise ConfigError(f"box subnet {self.subnet!r}: {error}") from None
        if net.prefixlen != 24:
            raise ConfigError(f"box subnet {self.subnet!r}: give a /24, e.g. {DEFAULT_SUBNET}")
        if self.cpus_per_host < 1:
            raise ConfigError(f"cpus per host must be >= 1, got {self.cpus_per_host}")
        if self.object_store_mb < 80:
            raise ConfigError(f"object store: at least 80 MB a host, got {self.object_store_mb}")

    @property
    def bridge(self) -> str:
        return f"{self.name}-br"

    def namespace(self, host: int) -> str:
        return f"{self.name}-h{host}"

    def outer_device(self, host: int) -> str:
        """The bridge's end of host `host`'s link (in this machine's own namespace)."""
        return f"{self.name}-v{host}"

    def _address(self, offset: int) -> str:
        return str(ipaddress.IPv4Network(self.subnet)[offset])

    @property
    def gateway(self) -> str:
        return self._address(1)

    def ip(self, host: int) -> str:
        return self._address(FIRST_HOST + host)

    @property
    def hosts(self) -> range:
        return range(self.num_hosts)

    @property
    def head_address(self) -> str:
        """What `recsync train --address` takes: the Ray head's GCS on host 0."""
        return f"{self.ip(0)}:{RAY_PORT}"

    def host_of(self, name_or_index: str) -> int:
        """A host by its index, its namespace's name or its address."""
        for host in self.hosts:
            if name_or_index in (str(host), self.namespace(host), self.ip(host)):
                return host
        known = ", ".join(f"{h} ({self.namespace(h)}, {self.ip(h)})" for h in self.hosts)
        raise ConfigError(f"no host {name_or_index!r} in box {self.name!r}; its hosts: {known}")

    def build_commands(self) -> list[Command]:
        """iproute2 commands that make the bridge and every host (not shaped)."""
        prefix = ipaddress.IPv4Network(self.subnet).prefixlen
        commands = [
            ["ip", "link", "add", self.bridge, "type", "bridge"],
            ["ip", "addr", "add", f"{self.gateway}/{prefix}", "dev", self.bridge],
            ["ip", "link", "set", self.bridge, "up"],
        ]
        for host in self.hosts:
            ns, outer, inner = self.namespace(host), self.outer_device(host), f"{self.name}-i{host}"
            commands += [
                ["ip", "netns", "add", ns],
                ["ip", "link", "add", outer, "type", "veth", "peer", "name", inner],
                ["ip", "link", "set", inner, "netns", ns],
                ["ip", "-n", ns, "link", "set", inner, "name", INNER_DEVICE],
                ["ip", "link", "set", outer, "master", self.bridge, "up"],
                ["ip", "-n", ns, "addr", "add", f"{self.ip(host)}/{prefix}", "dev", INNER_DEVICE],
                ["ip", "-n", ns, "link", "set", INNER_DEVICE, "up"],
                ["ip", "-n", ns, "link", "set", "lo", "up"],
            ]
        return commands

    def shape_commands(self, host: int, link: Link) -> list[Command]:
        """tc commands that shape host `host`'s link both ways (or clear it)."""
        ends = [
            ["ip", "netns", "exec", self.namespace(host), "tc"],  # what the host sends
            ["tc"],  # the bridge's end: what the host receives
        ]
        devices = [INNER_DEVICE, self.outer_device(host)]
        commands = []
        for tc, device in zip(ends, devices, strict=True):
            if link.mbit is None and not link.needs_netem:
                commands.append([*tc, "qdisc", "del", "dev", device, "root"])
            else:
                commands.append([*tc, "qdisc", "replace", "dev", device, "root", *qdisc(link)])
        return commands

    def teardown_commands(self, namespaces: list[str], devices: list[str]) -> list[Command]:
        """Commands that remove the box's namespaces and devices found on the machine (by
        their names: whatever a crashed `up` left)."""
        mine = [ns for ns in namespaces if ns.startswith(f"{self.name}-h")]
        links = [d for d in devices if d.startswith(f"{self.name}-")]
        commands = [["ip", "netns", "del", ns] for ns in mine]
        commands += [["ip", "link", "del", d] for d in links if d != self.bridge]
        if self.bridge in devices:
            commands.append(["ip", "link", "del", self.bridge])
        return commands


def qdisc(link: Link) -> list[str]:
    """The root qdisc's kind and parameters of a shaped link: tbf for a rate alone, netem
    (with its own rate) where a delay or a loss is asked for."""
    if link.needs_netem:
        spec = ["netem"]
        if link.delay_ms:
            spec += ["delay", f"{link.delay_ms:g}ms"]
        if link.loss:
            spec += ["loss", f"{link.loss * 100:g}%"]
        if link.mbit is not None:
            spec += ["rate", f"{link.mbit:g}mbit"]
        return spec
    assert link.mbit is not None
    burst = max(TBF_MIN_BURST_BYTES, int(link.mbit * 1e6 / 8 * TBF_BURST_S))
    rate, latency = f"{link.mbit:g}mbit", f"{TBF_LATENCY_MS}ms"
    return ["tbf", "rate", rate, "burst", str(burst), "latency", latency]
