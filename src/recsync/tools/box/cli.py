"""`recsync box` (also `python -m recsync.tools.box`): a multi-host Ray cluster on this
machine, each host a network namespace with its own address and a shaped link (plan.py),
to run jobs across real links without a second machine. Needs root and iproute2."""

from __future__ import annotations

import json
import os
from typing import Annotated

import typer
from rich.console import Console

from recsync.errors import RecsyncError
from recsync.tools.box import ops
from recsync.tools.box.counters import counters
from recsync.tools.box.plan import DEFAULT_NAME, DEFAULT_SUBNET, BoxPlan, Link

box_app = typer.Typer(
    help="A multi-host Ray cluster on this machine (network namespaces, shaped links).",
    rich_markup_mode=None,
    no_args_is_help=True,
)
NameOption = Annotated[str, typer.Option("--name", help="The box's name (prefixes its devices).")]
console = Console(emoji=False, highlight=False)


def _fail(error: RecsyncError) -> None:
    console.print(f"[red]error:[/red] {error}", markup=True)
    raise typer.Exit(1)


def _say(line: str) -> None:
    console.print(line, markup=False, soft_wrap=True)


def _link(mbit: float | None, delay_ms: float, loss: float) -> Link:
    return Link(mbit if mbit else None, delay_ms, loss)


@box_app.command()
def up(
    hosts: Annotated[
        int, typer.Option("--hosts", min=1, help="Hosts to build (network namespaces).")
    ] = 3,
    link_mbit: Annotated[
        float,
        typer.Option("--link-mbit", min=0, help="Every link's rate each way, Mbit/s; 0: unshaped."),
    ] = 0.0,
    cpus: Annotated[
        int, typer.Option("--cpus", min=1, help="CPUs each host's Ray node advertises.")
    ] = 1,
    name: NameOption = DEFAULT_NAME,
    subnet: Annotated[
        str, typer.Option("--subnet", help="The box's IPv4 /24 subnet.")
    ] = DEFAULT_SUBNET,
    no_ray: Annotated[
        bool, typer.Option("--no-ray", help="Build the hosts and links only, no Ray.")
    ] = False,
) -> None:
    """Build the box and start Ray on it.

    Its hosts are network namespaces on a bridge (--hosts of them), each link shaped to
    --link-mbit, with a Ray head on host 0 and a Ray worker node on every other host; prints
    the address to train on."""
    try:
        plan = BoxPlan(hosts, name=name, subnet=subnet, cpus_per_host=cpus)
        with console.status(f"building box {name!r} ({hosts} hosts)"):
            state = ops.up(plan, _link(link_mbit, 0.0, 0.0), start_ray=not no_ray)
    except RecsyncError as error:
        _fail(error)
    _show(state)
    if state.ray_address:
        _say("")
        _say(f"Ray address: {state.ray_address}")
        _say(
            f"train on it (the driver runs on host 0): recsync box exec 0 --name {name} -- "
            f"recsync train --address {state.ray_address} -c job.toml"
        )
    _say(f"remove it: recsync box down --name {name}")


def _show(state: ops.BoxState) -> None:
    plan = state.plan
    _say(f"box {plan.name!r}: {plan.num_hosts} hosts on bridge {plan.bridge} ({plan.subnet})")
    for host in plan.hosts:
        role = "" if not state.ray_address else (" Ray head" if host == 0 else " Ray node")
        link = state.links.get(host, Link()).describe()
        if host in state.emulated:
            link += " (delay and loss: recsync's frames only)"
        _say(
            f"  host {host}  {plan.namespace(host):<10} {plan.ip(host):<15} link {link};"
            f"{role} ({plan.cpus_per_host} CPU)"
        )


@box_app.command()
def down(name: NameOption = DEFAULT_NAME) -> None:
    """Remove the box and everything it runs.

    Every process in its hosts (their Ray nodes), its namespaces, links, qdiscs, bridge and
    folder, found by name (also what a crash left)."""
    try:
        removed = ops.down(name)
    except RecsyncError as error:
        _fail(error)
    _say(f"box {name!r}: " + ("removed " + ", ".join(removed) if removed else "nothing to remove"))


@box_app.command()
def shape(
    host: Annotated[
        str, typer.Argument(metavar="HOST", help="A host: its index, namespace or address.")
    ],
    mbit: Annotated[
        float, typer.Option("--mbit", min=0, help="Rate each way, Mbit/s; 0: unshaped.")
    ] = 0.0,
    delay_ms: Annotated[
        float,
        typer.Option(
            "--delay-ms",
            min=0,
            help="Delay added each way, ms (netem; on a kernel without it, to recsync's own "
            "frames the host sends).",
        ),
    ] = 0.0,
    loss: Annotated[
        float,
        typer.Option(
            "--loss",
            min=0,
            help="Fraction of packets lost, in [0, 1) (netem; on a kernel without it, of "
            "recsync's own frames, each then held back by TCP's retransmission timeout).",
        ),
    ] = 0.0,
    name: NameOption = DEFAULT_NAME,
) -> None:
    """Change one host's link while the box (and a job on it) runs."""
    try:
        state = ops.load(name)
        index = state.plan.host_of(host)
        state = ops.shape(name, index, _link(mbit, delay_ms, loss))
    except RecsyncError as error:
        _fail(error)
    _say(f"host {index} ({state.plan.ip(index)}): link {state.links[index].describe()}")
    if index in state.emulated:
        _say(f"  {ops.NO_NETEM}")


@box_app.command()
def status(
    name: NameOption = DEFAULT_NAME,
    as_json: Annotated[bool, typer.Option("--json", help="The state and counters as JSON.")] = (
        False
    ),
) -> None:
    """Show the box's hosts, links, Ray address and traffic.

    Each link's counters: bytes and packets each way, as the kernel counted them in the
    host's namespace."""
    try:
        state = ops.load(name)
        counted = counters(state)
    except RecsyncError as error:
        _fail(error)
    if as_json:
        print(json.dumps({**state.to_json(), "counters": counted}, indent=2))
        return
    _show(state)
    for host, c in counted.items():
        _say(
            f"  host {host} link: sent {c['tx_bytes']:,} bytes ({c['tx_packets']:,} packets), "
            f"received {c['rx_bytes']:,} bytes ({c['rx_packets']:,} packets)"
        )
    if state.ray_address:
        _say(f"Ray address: {state.ray_address}")


@box_app.command(
    "exec", context_settings={"allow_extra_args": True, "ignore_unknown_options": True}
)
def exec_(
    ctx: typer.Context,
    host: Annotated[
        str, typer.Argument(metavar="HOST", help="A host: its index, namespace or address.")
    ],
    name: NameOption = DEFAULT_NAME,
) -> None:
    """Run a command on one host of the box.

    The command after `--` runs in the host's namespace, with the box's Ray settings, e.g.
    `recsync box exec 0 -- recsync train --address ADDRESS`."""
    try:
        state = ops.load(name)
        index = state.plan.host_of(host)
    except RecsyncError as error:
        _fail(error)
    argv = list(ctx.args)
    if not argv:
        _fail(RecsyncError("give the command to run after --"))
    command = ops.in_host(state.plan, index, argv)
    os.execvp(command[0], command)
