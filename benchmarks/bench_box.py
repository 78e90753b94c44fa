"""Network-bound jobs on the multi-host box, measured on the engine and predicted by the
simulator side by side (needs root and iproute2: `recsync box`).

A box of 4 hosts (network namespaces, each its own address, link and Ray node) is built;
for each scenario its links are shaped, measured with `recsync calibrate --network` into
the cost profile (each host's link rate, the latency between hosts, how unevenly messages
share a link) on top of this machine's CPU prices (`recsync calibrate`, or --profile), and
each point is trained on the engine (`recsync train --address` on host 0; `--repeats`
runs, the median steady examples/s) and simulated with that profile (`recsync simulate`,
the same config: the nodes on the same hosts by the same placement rule and pins). Prints a
JSON line a point and writes every point, the profiles and the box's settings to --out
(reports/network/results.json); the docs' results page renders it (`report`).

Scenarios (each host's link in Mbit/s each way; the slow ones bound the job, not the cores):
- fig5: S-EASGD against FR-EASGD-5 as trainers grow (1, 2, 3 of 2 worker threads), the
  sync server alone on a 25 Mbit/s host (ShadowSync Fig. 5's shape);
- psp: PSP's partial push and pull (c = 2 of 4 workers, b = 50% of 4 dense blocks) against
  full push and pull, two of the dense servers on a 50 Mbit/s host;
- hierarchical: two groups (a trainer and a group server each) on two hosts of 50 Mbit/s,
  against all of the job on one host;
- straggler: async against sync, trainers on two hosts of 100 Mbit/s, then one of them
  slowed 10x (a network straggler).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from recsync.tools.box import ops
from recsync.tools.box.counters import counters
from recsync.tools.box.plan import BoxPlan, Link

ROOT = Path(__file__).resolve().parents[1]
RECSYNC = str(Path(sys.executable).with_name("recsync"))
BOX = BoxPlan(4, name="rsbb", subnet="10.216.0.0/24")
FAST = 1000.0  # Mbit/s: the links not capped (a 1 Gbit/s cluster)
BASE = ["data.synthetic.num_test=2000", "run.eval_every=0", "run.checkpoint.every_seconds=0"]
ON_HOST_0 = ["cluster.placement.reader=[0]", "cluster.placement.embedding_server=[0]"]


@dataclass(frozen=True)
class Point:
    """One configuration: its name, what it varies, the job's overrides."""

    name: str
    label: dict[str, Any]
    overrides: list[str]


@dataclass(frozen=True)
class Scenario:
    """Points run on the box with every host's link at `links` (Mbit/s)."""

    name: str
    what: str
    links: tuple[float, ...]
    points: list[Point] = field(default_factory=list)


def _fig5() -> Scenario:
    pins = [*ON_HOST_0, "cluster.placement.sync_server=[1]", "cluster.placement.trainer=[2, 3]"]
    points = []
    for trainers in (1, 2, 3):
        for label, strategy in (
            ("S-EASGD", ["strategy.name=easgd"]),
            (
                "FR-EASGD-5",
                [
                    "strategy.name=easgd",
                    "strategy.timing.mode=fixed",
                    "strategy.timing.every_iterations=5",
                ],
            ),
        ):
            examples = 200_000 if label == "S-EASGD" else 40_000
            points.append(
                Point(
                    f"fig5-{label}-{trainers}t",
                    {"strategy": label, "trainers": trainers},
                    [
                        *strategy,
                        f"cluster.num_trainers={trainers}",
                        *pins,
                        f"data.synthetic.num_train={examples}",
                    ],
                )
            )
    return Scenario(
        "fig5",
        "S-EASGD against FR-EASGD-5 as trainers grow; the sync server alone on a 25 Mbit/s "
        "host (reader and embedding servers on host 0, trainers on hosts 2 and 3)",
        (FAST, 25.0, FAST, FAST),
        points,
    )


def _psp() -> Scenario:
    common = [
        *ON_HOST_0,
        "strategy.name=psp",
        "cluster.num_dense_servers=4",
        "cluster.placement.dense_server=[1, 0]",
        "cluster.placement.trainer=[2, 3]",
        "data.synthetic.num_train=40000",
    ]
    full = Point("psp-full", {"push": "all 4", "pull": "100%"}, common)
    partial = Point(
        "psp-partial",
        {"push": "2 of 4", "pull": "50%"},
        [
            *common,
            "strategy.push_count=2",
            "strategy.push_wait_s=0.02",
            "strategy.pull_fraction=0.5",
            "strategy.pull_wait_s=0.02",
        ],
    )
    return Scenario(
        "psp",
        "PSP's partial push and pull against full push and pull; 4 dense servers, two of "
        "them on a 50 Mbit/s host (the others with the reader and embedding servers on "
        "host 0), trainers on hosts 2 and 3",
        (FAST, 50.0, FAST, FAST),
        [full, partial],
    )


def _hierarchical() -> Scenario:
    common = [
        "strategy.name=hierarchical",
        "strategy.groups=2",
        "cluster.num_dense_servers=1",
        "data.synthetic.num_train=60000",
    ]
    split = Point(
        "ht-split",
        {"groups": "on hosts 2 and 3 (50 Mbit/s)"},
        [
            *common,
            *ON_HOST_0,
            "cluster.placement.trainer=[2, 3]",
            "cluster.placement.group_server=[2, 3]",
            "cluster.placement.sync_server=[1]",
        ],
    )
    together = Point(
        "ht-one-host",
        {"groups": "all on host 2"},
        [
            *common,
            *(
                f"cluster.placement.{role}=[2]"
                for role in ("reader", "embedding_server", "sync_server", "group_server", "trainer")
            ),
        ],
    )
    return Scenario(
        "hierarchical",
        "hierarchical training, 2 groups of one trainer and one group server: the groups "
        "split over two 50 Mbit/s hosts (their cross-group sync through host 1, their "
        "lookups to host 0), against the whole job on one host",
        (FAST, FAST, 50.0, 50.0),
        [split, together],
    )


def _straggler(slow: bool) -> Scenario:
    pins = [
        *ON_HOST_0,
        "cluster.placement.dense_server=[1]",
        "cluster.placement.trainer=[2, 3]",
        "data.synthetic.num_train=40000",
    ]
    tag = "slow" if slow else "even"
    points = [
        Point(
            f"{name}-{tag}",
            {"strategy": name, "host 3": "10 Mbit/s" if slow else "100 Mbit/s"},
            [f"strategy.name={name}", *pins],
        )
        for name in ("async", "sync")
    ]
    return Scenario(
        f"straggler-{tag}",
        "async against sync, the reader and embedding servers on host 0, the dense server "
        "on host 1, a trainer on each of hosts 2 and 3, every link 100 Mbit/s"
        + ("; host 3's link slowed 10x (10 Mbit/s)" if slow else ""),
        (100.0, 100.0, 100.0, 10.0 if slow else 100.0),
        points,
    )


SCENARIOS = {
    s.name: s for s in (_fig5(), _psp(), _hierarchical(), _straggler(False), _straggler(True))
}


def _run(command: list[str], timeout_s: float = 900) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s)
    if done.returncode != 0:
        raise RuntimeError(
            f"{' '.join(command[-12:])} failed:\n{done.stdout[-1500:]}{done.stderr[-1500:]}"
        )
    return done


def _sets(overrides: list[str]) -> list[str]:
    return [arg for o in [*BASE, *overrides] for arg in ("--set", o)]


HEADERS_A_PACKET = 66  # Ethernet 14, IPv4 20, TCP 20 and its timestamps 12
SEGMENT_PAYLOAD = 1448  # a full TCP segment's payload at an MTU of 1,500 (timestamps on)


def engine_run(state: ops.BoxState, point: Point, runs: Path, repeat: int) -> dict[str, Any]:
    """One engine run's summary, with `link_check`: each host's link bytes (the kernel's
    counters in its namespace, less the headers) against what the summary says its nodes
    sent and received."""
    name = f"{point.name}-{repeat}"
    args = ["train", "--address", state.plan.head_address, "--name", name, "--force"]
    args += ["--no-progress", "--set", f"run.runs_dir={runs}", *_sets(point.overrides)]
    before = counters(state)
    _run(ops.in_host(state.plan, 0, [RECSYNC, *args]))
    after = counters(state)
    summary: dict[str, Any] = json.loads((runs / name / "summary.json").read_text())
    summary["link_check"] = link_check(state, summary, before, after)
    return summary


def link_check(
    state: ops.BoxState,
    summary: dict[str, Any],
    before: dict[int, dict[str, int]],
    after: dict[int, dict[str, int]],
) -> dict[str, dict[str, int]]:
    """Per host: the payload its link carried each way and what the summary counts."""
    checked = {}
    for host in state.plan.hosts:
        entry = summary["hosts"].get(state.plan.ip(host))
        if entry is None:
            continue
        carried = {}
        for way in ("tx", "rx"):
            nbytes = after[host][f"{way}_bytes"] - before[host][f"{way}_bytes"]
            packets = after[host][f"{way}_packets"] - before[host][f"{way}_packets"]
            carried[way] = nbytes - HEADERS_A_PACKET * packets
        segments = "tcp_retransmitted_segments"
        resent = SEGMENT_PAYLOAD * (after[host][segments] - before[host][segments])
        checked[state.plan.ip(host)] = {
            "link_sent": carried["tx"] - resent,  # less what TCP sent again (drops)
            "link_received": carried["rx"],
            "retransmitted": resent,
            "counted_sent": entry["sent_bytes"] + entry.get("control_sent_bytes", 0),
            "counted_received": entry["received_bytes"] + entry.get("control_received_bytes", 0),
        }
    return checked


LINK_CHECKED_BYTES = 20_000_000  # a host's way checked where the summary counts this many


def link_difference(check: dict[str, int], way: str) -> float:
    """How far one host's link bytes `way` ("sent" or "received") are from what the
    summary counts, relative to it. Received: the link's payload. Sent: TCP sent some
    segments again, and a segment dropped by the host's own shaped link never reached its
    interface's counter while one dropped further on crossed it twice; the counters do not
    say which, so what was sent lies between the link's payload less every segment sent
    again and the link's payload: the distance to that range (0 inside it)."""
    counted = check[f"counted_{way}"]
    if way == "received":
        return abs(check["link_received"] - counted) / counted
    low, high = check["link_sent"], check["link_sent"] + check["retransmitted"]
    return max(low - counted, counted - high, 0) / counted


def largest_link_difference(
    checked: dict[str, dict[str, int]], way: str, at_least: int = LINK_CHECKED_BYTES
) -> float:
    """The largest `link_difference`, over hosts carrying `at_least` bytes `way` (below
    that, Ray's fixed costs of a job's start, a node's spec with its initial state among
    them, weigh in)."""
    differences = [
        link_difference(c, way) for c in checked.values() if c[f"counted_{way}"] >= at_least
    ]
    return max(differences, default=0.0)


def _checks(row: dict[str, Any]) -> list[dict[str, dict[str, int]]]:
    """Every engine run's link check of a point (a results file of an earlier version
    kept only its median run's)."""
    return row.get("link_checks") or [row["link_check"]]


def sim_run(point: Point, profile: Path, runs: Path) -> dict[str, Any]:
    name = f"{point.name}-sim"
    _run(
        [
            RECSYNC,
            "simulate",
            "--profile",
            str(profile),
            "--name",
            name,
            "--force",
            "--no-progress",
            "--set",
            f"run.runs_dir={runs}",
            *_sets(point.overrides),
        ]
    )
    return json.loads((runs / name / "summary.json").read_text())


def network_profile(state: ops.BoxState, cpu_profile: Path, out: Path) -> dict[str, Any]:
    out.write_text(cpu_profile.read_text())
    _run(
        ops.in_host(
            state.plan,
            0,
            [
                RECSYNC,
                "calibrate",
                "--network",
                "--address",
                state.plan.head_address,
                "--out",
                str(out),
            ],
        )
    )
    import tomllib

    machines: dict[str, Any] = tomllib.loads(out.read_text())["cost"]["machines"]
    return machines


def _figures(summary: dict[str, Any]) -> dict[str, Any]:
    return {
        "eps_steady": round(summary["eps_steady"], 1),
        "eps_whole_run": round(summary["eps"], 1),
        "sync_gap": summary.get("average_sync_gap"),
        "host_sent_bytes": {ip: h["sent_bytes"] for ip, h in summary.get("hosts", {}).items()},
    }


def run_scenario(
    state: ops.BoxState, scenario: Scenario, cpu_profile: Path, work: Path, repeats: int
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    for host, mbit in enumerate(scenario.links):
        ops.shape(state.plan.name, host, Link(mbit))
    profile = work / f"{scenario.name}.toml"
    machines = network_profile(state, cpu_profile, profile)
    rows = []
    for point in scenario.points:
        runs = work / point.name
        engine = [engine_run(state, point, runs, r) for r in range(repeats)]
        sim = sim_run(point, profile, runs)
        steady = [e["eps_steady"] for e in engine]
        row = {
            "scenario": scenario.name,
            "point": point.name,
            **point.label,
            "engine_eps_steady": [round(x, 1) for x in steady],
            "engine_median": round(statistics.median(steady), 1),
            "engine_spread": round((max(steady) - min(steady)) / statistics.median(steady), 3),
            "sim_eps_steady": round(sim["eps_steady"], 1),
            "ratio": round(sim["eps_steady"] / statistics.median(steady), 3),
            "engine": _figures(sorted(engine, key=lambda e: e["eps_steady"])[len(engine) // 2]),
            "link_check": sorted(engine, key=lambda e: e["eps_steady"])[len(engine) // 2][
                "link_check"
            ],
            "link_checks": [e["link_check"] for e in engine],
            "sim": _figures(sim),
        }
        print(json.dumps(row), flush=True)
        rows.append(row)
    return {
        "name": scenario.name,
        "what": scenario.what,
        "links_mbit": scenario.links,
        "machines": machines,
    }, rows


TARGET = 0.2  # the simulated examples/s within 20% of the engine's at every point
ADVISE_LINKS = 100.0  # Mbit/s of every link while the advice is checked


def advise_check(
    state: ops.BoxState, cpu_profile: Path, work: Path, repeats: int
) -> dict[str, Any]:
    """`recsync advise` on the box's cluster file (its hosts, sharing this machine's cores,
    every link at ADVISE_LINKS and measured), its fastest and slowest candidates then
    trained on the box (benchmarks/bench_advise_vs_engine.py run on host 0)."""
    for host in state.plan.hosts:
        ops.shape(state.plan.name, host, Link(ADVISE_LINKS))
    profile = work / "advise.toml"
    network_profile(state, cpu_profile, profile)
    cluster = work / "box-cluster.toml"
    cluster.write_text(
        f"[machines]\ncount = {state.plan.num_hosts}\ncores = {os.cpu_count()}\n"
        f'shared = true\nprofile = "{profile}"\n\n'
        "[grid]\ntrainers = [1, 2]\nembedding_servers = [1, 2]\n"
    )
    out = work / "advise_check.json"
    check = ROOT / "benchmarks" / "bench_advise_vs_engine.py"
    argv = [sys.executable, str(check), "--address", state.plan.head_address, "--cluster"]
    argv += [str(cluster), "--repeats", str(repeats), "--out", str(out), "--no-render"]
    _run(ops.in_host(state.plan, 0, argv), timeout_s=3600)
    found: dict[str, Any] = json.loads(out.read_text())
    found["links_mbit"] = ADVISE_LINKS
    print(json.dumps({"advise_check": found["check"]}), flush=True)
    return found


def cpu_prices(given: Path | None, work: Path) -> Path:
    """This machine's CPU prices: the given profile, or `recsync calibrate`'s (minutes)."""
    if given is not None:
        return given
    out = work / "cpu_profile.toml"
    _run([RECSYNC, "calibrate", "--out", str(out), "--no-progress"], timeout_s=1800)
    return out


def summarize(
    scenarios: list[dict[str, Any]], rows: list[dict[str, Any]], cpu: str, repeats: int
) -> dict[str, Any]:
    return {
        "box": {
            "hosts": BOX.num_hosts,
            "cpus_per_host": BOX.cpus_per_host,
            "cores": os.cpu_count(),
            "fast_mbit": FAST,
        },
        "repeats": repeats,
        "cpu_profile": cpu,
        "scenarios": scenarios,
        "points": rows,
        **derived(rows),
        "advise_check": None,
    }


def derived(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """What the report states over every point, from the points' own figures."""
    return {
        "max_abs_error": round(max(abs(r["ratio"] - 1) for r in rows), 3),
        "max_link_difference": {
            way: round(max(largest_link_difference(c, way) for r in rows for c in _checks(r)), 4)
            for way in ("sent", "received")
        },
        "retransmitted": max(
            c["retransmitted"] / max(c["counted_sent"], 1)
            for r in rows
            for checked in _checks(r)
            for c in checked.values()
            if c["counted_sent"] >= LINK_CHECKED_BYTES
        ),
    }


def write(results: dict[str, Any], out: Path, started: float) -> None:
    """The results file, its report and plot beside it."""
    results["wall_s"] = round(time.time() - started, 1)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=1) + "\n")
    (out.parent / "report.md").write_text(report(results))
    plot(results, out.parent / "engine_vs_sim.png")
    print(json.dumps({k: results[k] for k in ("max_abs_error", "wall_s")}), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--scenarios", nargs="*", choices=list(SCENARIOS), default=None)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--profile",
        type=Path,
        default=None,
        help="CPU prices (a `recsync calibrate` profile); default: measure",
    )
    parser.add_argument("--out", type=Path, default=ROOT / "reports" / "network" / "results.json")
    parser.add_argument(
        "--advise", action="store_true", help="also check `recsync advise` on the box"
    )
    parser.add_argument(
        "--render", type=Path, metavar="FILE", help="only rewrite the report of a results FILE"
    )
    args = parser.parse_args()
    if args.render is not None:
        results = json.loads(args.render.read_text())
        results.update(derived(results["points"]))
        args.render.write_text(json.dumps(results, indent=1) + "\n")
        (args.render.parent / "report.md").write_text(report(results))
        plot(results, args.render.parent / "engine_vs_sim.png")
        return
    chosen = [SCENARIOS[n] for n in (args.scenarios or list(SCENARIOS))]
    started = time.time()
    with tempfile.TemporaryDirectory(prefix="bench-box-") as tmp:
        work = Path(tmp)
        cpu_profile = cpu_prices(args.profile, work)
        ops.down(BOX.name)
        state = ops.up(BOX, Link(FAST))
        try:
            scenarios, rows = [], []
            for scenario in chosen:
                described, found = run_scenario(state, scenario, cpu_profile, work, args.repeats)
                scenarios.append(described)
                rows += found
            results = summarize(scenarios, rows, cpu_profile.read_text(), args.repeats)
            write(results, args.out, started)  # kept should the advice check fail
            if args.advise:
                results["advise_check"] = advise_check(state, cpu_profile, work, args.repeats)
                write(results, args.out, started)
        finally:
            ops.down(BOX.name)


def report(results: dict[str, Any]) -> str:
    """The report: each scenario's points, engine against simulator, with what misses."""
    lines = [
        "# The network on real links: engine against simulator (benchmarks/bench_box.py)",
        "",
        f"A box of {results['box']['hosts']} hosts on this {results['box']['cores']}-core "
        "machine: each host a network namespace with its own address, a Ray node and a "
        "link shaped with tc (tbf) both ways. Each scenario's links were measured with "
        "`recsync calibrate --network` into the cost profile the simulator ran with, on top "
        "of this machine's CPU prices (`recsync calibrate`). Engine: the median steady "
        f"examples/s of {results['repeats']} runs (`spread`: their range over the median); "
        "simulator: one run of the same config, its nodes on the same hosts by the same "
        "placement rule and pins. `ratio` = simulated / engine; the target is within "
        f"{TARGET:.0%} at every point. Largest miss: {results['max_abs_error']:.1%}.",
        "",
        "The engine runs' bytes per host were also checked against the kernel's counters in "
        "the host's namespace (the interface's bytes less 66 bytes of headers a packet, "
        "against the summary's sent and received bytes of the host's nodes, every host and "
        f"way carrying over {LINK_CHECKED_BYTES / 1e6:.0f} MB). Shaped links drop packets "
        "and TCP sends them again: the most one host's TCP sent again came to "
        f"{results['retransmitted']:.0%} of the payload its nodes sent (1,448 bytes a "
        "segment; a segment its own link drops again and again counts each time). A segment "
        "its own link dropped never reached its interface's counter, one dropped further on "
        "crossed it twice, and the counters do not say which: what a host sent is checked "
        "against the range between its link's bytes less every segment sent again and its "
        f"link's bytes. The largest difference over {_runs_checked(results)} was "
        f"{results['max_link_difference']['sent']:.2%} sent (beyond that range) and "
        f"{results['max_link_difference']['received']:.2%} received. The summary does not "
        "count Ray's own traffic beyond the reports (host 0, the head's, sends the most), "
        "and a link's received bytes also hold segments that came twice (sent again by the "
        "other end after a delay on a slow link).",
        "",
    ]
    for scenario in results["scenarios"]:
        m = scenario["machines"]
        links = ", ".join(f"{r * 8 / 1e6:.0f}" for r in m["link_bytes_s"])
        lines += [
            f"## {scenario['name']}",
            "",
            f"{scenario['what']}. Links shaped (Mbit/s): "
            f"{', '.join(f'{x:g}' for x in scenario['links_mbit'])}; measured payload rates: "
            f"{links}; latency a host boundary adds {m['latency_s'] * 1e6:.0f} us; spread of "
            f"messages sharing a link (sigma of log rate) {m['flow_spread']:.2f}.",
            "",
            "| point | engine ex/s (runs) | spread | simulated ex/s | ratio | sync gap "
            "engine / sim | MB sent off hosts engine / sim |",
            "| --- | --- | --- | --- | --- | --- | --- |",
        ]
        for row in (r for r in results["points"] if r["scenario"] == scenario["name"]):
            runs = ", ".join(f"{x:,.0f}" for x in row["engine_eps_steady"])
            gap = row["engine"]["sync_gap"], row["sim"]["sync_gap"]
            gap_text = "-" if gap[0] is None else f"{gap[0]:.1f} / {gap[1]:.1f}"
            lines.append(
                f"| {row['point']} | {row['engine_median']:,.0f} ({runs}) | "
                f"{row['engine_spread']:.1%} | {row['sim_eps_steady']:,.0f} | "
                f"{row['ratio']:.3f} | {gap_text} | {_sent_mb(row['engine'])} / "
                f"{_sent_mb(row['sim'])} |"
            )
        lines.append("")
    lines += ["![engine against simulator](engine_vs_sim.png)", ""]
    lines += _misses(results)
    advised = results.get("advise_check")
    if advised:
        check = advised["check"]
        top, bottom = check["top"], check["bottom"]
        held = "held" if check["ranking_held"] else "did not hold"
        lines += [
            "## `recsync advise` on the box",
            "",
            f"The advice for the default job on the box's cluster file (its "
            f"{results['box']['hosts']} hosts sharing the machine's cores, every link at "
            f"{advised['links_mbit']:g} Mbit/s as measured; every strategy at 1 and 2 trainers "
            f"and 1 and 2 embedding servers, speed only: {advised['ranked']} candidates "
            f"ranked in {advised['advise_s']:.0f} s), its fastest and slowest candidates then "
            f"trained on the box, {advised['repeats']} runs each: the ranking {held}.",
            "",
            "| candidate | rank | predicted ex/s | engine ex/s (runs) | predicted / engine |",
            "| --- | --- | --- | --- | --- |",
        ]
        for run in (top, bottom):
            runs = ", ".join(f"{x:,.0f}" for x in run["engine_eps_each"])
            lines.append(
                f"| {run['label']} | {run['rank']} | {run['predicted_eps']:,.0f} | "
                f"{run['engine_eps']:,.0f} ({runs}) | {run['predicted_over_engine']:.3f} |"
            )
        lines.append("")
    return "\n".join(lines)


def _runs_checked(results: dict[str, Any]) -> str:
    every = all("link_checks" in r for r in results["points"])
    return "all runs" if every else "each point's median run (the runs this file kept)"


def _misses(results: dict[str, Any]) -> list[str]:
    """The points outside the target, each with what tells its cause apart: the engine's
    own spread over its runs, and the bytes each driver sent off each host."""
    missed = [r for r in results["points"] if abs(r["ratio"] - 1) > TARGET]
    if not missed:
        return [f"Every point is within {TARGET:.0%}.", ""]
    lines = ["## Outside the target", ""]
    for row in missed:
        engine, sim = row["engine"]["host_sent_bytes"], row["sim"]["host_sent_bytes"]
        hosts = ", ".join(
            f"{ip} {engine.get(ip, 0) / 1e6:,.0f} / {sim.get(ip, 0) / 1e6:,.0f}"
            for ip in sorted(set(engine) | set(sim))
            if engine.get(ip, 0) or sim.get(ip, 0)
        )
        low, high = min(row["engine_eps_steady"]), max(row["engine_eps_steady"])
        within = " (the simulated figure lies within the engine's own runs)" * (
            low <= row["sim_eps_steady"] <= high
        )
        lines.append(
            f"- {row['point']}: simulated / engine {row['ratio']:.3f}; the engine's runs "
            f"{low:,.0f} to {high:,.0f} ex/s, a spread of {row['engine_spread']:.1%}{within}; "
            f"MB sent off each host, engine / simulated: {hosts or 'none'}."
        )
    return [*lines, ""]


def _sent_mb(measured: dict[str, Any]) -> str:
    return f"{sum(measured['host_sent_bytes'].values()) / 1e6:,.0f}"


def plot(results: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = results["points"]
    fig, ax = plt.subplots(figsize=(max(6, 0.8 * len(rows)), 4))
    xs = range(len(rows))
    ax.bar([x - 0.2 for x in xs], [r["engine_median"] for r in rows], 0.4, label="engine")
    ax.bar([x + 0.2 for x in xs], [r["sim_eps_steady"] for r in rows], 0.4, label="simulator")
    ax.set_xticks(list(xs), [r["point"] for r in rows], rotation=45, ha="right")
    ax.set_ylabel("steady examples/s")
    ax.set_yscale("log")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    main()
