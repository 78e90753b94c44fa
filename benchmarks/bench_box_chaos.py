"""A long run under a seeded random schedule of host, link and process faults on the
multi-host box (needs root and iproute2: `recsync box`).

The box of bench_box_faults.py (5 hosts: 0 the Ray head and the driver, 1 the servers, 2
the reader, 3 and 4 the trainers, placement pinned). A short run measures the job's
examples/s; the data is sized from it to train for `--minutes` undisturbed; the job is
trained once undisturbed and once under the schedule: `--faults` faults drawn from
`--seed`, spaced by exponential gaps (some a second or two apart, so that one lands during
the recovery from another), each of:

- a host lost (every process of a server, reader or trainer host killed at once), brought
  back (a new Ray node) 20 to 60 s later;
- a host's link down for 5, 30 or 120 s;
- a host's link cut 100x, or 2% of its frames dropped and all delayed 20 ms, for 60 s;
- one node's process killed (a trainer, a server or the reader), or the evaluator's.

A run that stops with a named error is resumed (`--resume`) and the schedule goes on.
Prints, and writes to --out (reports/faults/chaos.json, chaos.md beside it): the faults
injected, the losses the job recovered from, its stops and resumes, the examples handed out
against the data and against those trained, the examples whose updates were lost since the
last cut, any raw traceback, and the AUC against the undisturbed run's.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import signal
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench_box_faults import BOX, FAST, READER, RECSYNC, SERVERS, TRAINERS, Watched, overrides
from bench_box_faults import train_args as _train_args
from recsync.tools.box import ops
from recsync.tools.box.plan import Link

ROOT = Path(__file__).resolve().parents[1]
HOSTS = (SERVERS, READER, *TRAINERS)
KINDS = ("host", "link_down", "slow_link", "lossy_link", "process", "evaluator")
WEIGHTS = (3, 3, 1, 1, 3, 1)


@dataclass(frozen=True)
class Fault:
    """One scheduled fault: `at_s` seconds after the run's first checkpoint."""

    at_s: float
    kind: str
    host: int
    seconds: float  # how long it lasts (a lost host: until it is brought back)


def schedule(seed: int, count: int, span_s: float) -> list[Fault]:
    """`count` faults over about `span_s` seconds: exponential gaps, a fifth of them 1-2 s
    after the one before."""
    rng = random.Random(seed)
    faults, at = [], 0.0
    mean_gap = span_s / count
    for _ in range(count):
        close = rng.random() < 0.2
        at += rng.uniform(1.0, 2.0) if close else max(5.0, rng.expovariate(1 / mean_gap))
        kind = rng.choices(KINDS, WEIGHTS)[0]
        host = rng.choice(HOSTS)
        seconds = {
            "host": rng.uniform(20.0, 60.0),
            "link_down": rng.choice((5.0, 30.0, 120.0)),
            "slow_link": 60.0,
            "lossy_link": 60.0,
        }.get(kind, 0.0)
        faults.append(Fault(round(at, 1), kind, host, round(seconds, 1)))
    return faults


class Chaos:
    """Carries out a schedule on the box while a run goes on; what it did, timed."""

    def __init__(self, state: ops.BoxState, faults: list[Fault], seed: int):
        self.state, self.faults = state, faults
        self.rng = random.Random(seed + 1)
        self.done: list[dict[str, Any]] = []
        self.repairs: list[int] = []  # hosts whose Ray node ended behind a long partition
        self.down_hosts: set[int] = set()
        self.lock = threading.Lock()
        self.timers: list[threading.Timer] = []
        self.stop = threading.Event()

    def run(self, origin: float) -> None:
        for fault in self.faults:
            if self.stop.wait(max(0.0, origin + fault.at_s - time.monotonic())):
                return
            self.inject(fault, time.monotonic() - origin)

    def _later(self, seconds: float, action: Any) -> None:
        timer = threading.Timer(seconds, action)
        timer.daemon = True
        self.timers.append(timer)
        timer.start()

    def inject(self, fault: Fault, at: float) -> None:
        record: dict[str, Any] = {**asdict(fault), "at_s": round(at, 1)}
        with self.lock:
            host = fault.host
            if fault.kind == "host":
                if host in self.down_hosts:
                    record["skipped"] = "the host is down already"
                else:
                    record["processes_killed"] = ops.stop_host(self.state, host)
                    self.down_hosts.add(host)
                    self._later(fault.seconds, lambda: self._host_back(host))
            elif fault.kind == "link_down":
                ops.link_up(self.state, host, False)
                self._later(fault.seconds, lambda: self._link_back(host))
            elif fault.kind in ("slow_link", "lossy_link"):
                link = (
                    Link(FAST / 100)
                    if fault.kind == "slow_link"
                    else Link(FAST, delay_ms=20.0, loss=0.02)
                )
                ops.shape(BOX.name, host, link)
                self._later(fault.seconds, lambda: self._heal_link(host))
            elif fault.kind == "process":
                record["killed"] = self._kill_one(host, "ray::NodeActor")
            elif fault.kind == "evaluator":
                record["killed"] = self._kill_one(0, "ray::Evaluator")
        self.done.append(record)
        print(json.dumps({"fault": record}), flush=True)

    def _host_back(self, host: int) -> None:
        with self.lock:
            ops.start_host(self.state, host)
            self.down_hosts.discard(host)

    def _link_back(self, host: int) -> None:
        """The link up again; if Ray called the host dead meanwhile (its node then ends
        itself), the host comes back with a new node, as a repaired machine would."""
        ops.link_up(self.state, host, True)
        time.sleep(10.0)
        with self.lock:
            if host not in self.down_hosts and host not in ops.alive_hosts(self.state):
                ops.start_host(self.state, host)
                self.repairs.append(host)

    def _heal_link(self, host: int) -> None:
        with self.lock:
            ops.shape(BOX.name, host, Link(FAST))

    def _kill_one(self, host: int, title: str) -> str | None:
        """SIGKILL one process of `host` whose title starts with `title` (its command line)."""
        found = []
        for pid in sorted(ops.host_processes(self.state, host)):
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
            except OSError:
                continue
            if cmdline.startswith(title):
                found.append((pid, cmdline.split("\0")[0]))
        if not found:
            return None
        pid, name = self.rng.choice(found)
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            return None
        return name

    def heal_all(self) -> None:
        """Every link up and unshaped, every host back."""
        self.stop.set()
        for timer in self.timers:
            timer.cancel()
        for host in HOSTS:
            ops.link_up(self.state, host, True)
            ops.shape(BOX.name, host, Link(FAST))
        for host in sorted(self.down_hosts):
            ops.start_host(self.state, host)
        self.down_hosts.clear()


RESUME_WAIT_S = 180.0
RAW_ERROR = re.compile(r"^\s*\w+(Error|Exception): ", re.M)  # a raw exception's last line


def _wait_for_hosts(state: ops.BoxState, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while set(ops.alive_hosts(state)) != set(HOSTS) and time.monotonic() < deadline:
        time.sleep(2.0)


def train(runs: Path, name: str, sets: list[str], resume_from: str | None = None) -> Watched:
    return Watched([RECSYNC, *_train_args(runs, name, sets, resume_from)])


def summary_of(runs: Path, name: str) -> dict[str, Any] | None:
    path = runs / name / "summary.json"
    return json.loads(path.read_text()) if path.is_file() else None


def chaos_run(
    state: ops.BoxState, sets: list[str], faults: list[Fault], seed: int, runs: Path
) -> dict[str, Any]:
    chaos = Chaos(state, faults, seed)
    name, stops, outputs = "chaos", [], []
    resumable: str | None = None
    driver = train(runs, name, sets)
    started = time.monotonic()
    while not (runs / name / "checkpoint.pt").exists() and driver.process.poll() is None:
        time.sleep(0.2)
    scheduler = threading.Thread(target=chaos.run, args=(time.monotonic(),), daemon=True)
    scheduler.start()
    while True:
        code = driver.wait(timeout_s=7200)
        outputs.append(driver.output)
        if code == 0:
            break
        stops.append({"exit": code, "said": driver.output.strip().splitlines()[-3:]})
        if (runs / name / "checkpoint.pt").exists():
            resumable = name
        if len(stops) > 10 or resumable is None:
            break
        # as a user would: look, wait for the lost machines to be back, then resume
        time.sleep(5.0)
        _wait_for_hosts(state, RESUME_WAIT_S)
        name = f"chaos-resumed-{len(stops)}"
        driver = train(runs, name, sets, resume_from=resumable)
    wall = time.monotonic() - started
    chaos.heal_all()
    scheduler.join(timeout=5)
    text = "\n".join(outputs)
    last = summary_of(runs, name)
    return {
        "wall_s": round(wall, 1),
        "faults": chaos.done,
        "nodes_restarted_after_partitions": chaos.repairs,
        "faults_injected": sum("skipped" not in f for f in chaos.done),
        "faults_scheduled": len(faults),
        "stops": stops,
        "resumes": len(stops),
        "said": [
            line for line in text.splitlines() if line.startswith(("lost ", "recovered ", "every"))
        ],
        "traceback": "Traceback" in text or RAW_ERROR.search(text) is not None,
        "summary": last,
    }


def _undisturbed(args: Any, examples: int, runs: Path, sets: list[str]) -> dict[str, Any]:
    if args.undisturbed_from is not None:
        earlier = json.loads(args.undisturbed_from.read_text())
        same = (earlier["examples"], earlier["family"]) == (examples, args.family)
        assert same, f"{args.undisturbed_from} ran {earlier['examples']} {earlier['family']}"
        return {**earlier["undisturbed"], "from": str(args.undisturbed_from.name)}
    undisturbed = train(runs, "undisturbed", sets)
    assert undisturbed.wait(7200) == 0, undisturbed.output[-2000:]
    base = summary_of(runs, "undisturbed")
    assert base is not None
    return base


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--family", default="replica", choices=["replica", "gradient"])
    parser.add_argument("--minutes", type=float, default=16.0)
    parser.add_argument("--faults", type=int, default=24)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--examples", type=int, default=None, help="skip the sizing run")
    parser.add_argument("--noise", type=float, default=0.005)
    parser.add_argument("--out", type=Path, default=ROOT / "reports" / "faults" / "chaos.json")
    parser.add_argument("--render", type=Path, metavar="FILE", help="only rewrite the report")
    parser.add_argument(
        "--undisturbed-from",
        type=Path,
        metavar="FILE",
        help="take the undisturbed run from an earlier record of the same examples and "
        "family (the report says so) instead of training it again",
    )
    args = parser.parse_args()
    if args.render is not None:
        (args.render.parent / "chaos.md").write_text(report(json.loads(args.render.read_text())))
        return
    started = time.time()
    with tempfile.TemporaryDirectory(prefix="bench-box-chaos-") as tmp:
        runs = Path(tmp)
        ops.down(BOX.name)
        state = ops.up(BOX, Link(FAST))
        try:
            examples = args.examples
            if examples is None:
                sizing = train(runs, "sizing", overrides(args.family, 300_000, 100_000))
                assert sizing.wait(900) == 0, sizing.output[-2000:]
                eps = summary_of(runs, "sizing")["eps_steady"]  # type: ignore[index]
                examples = int(eps * args.minutes * 60 / 100_000) * 100_000
            cut_every = max(50_000, examples // 100 // 10_000 * 10_000)
            sets = [*overrides(args.family, examples, cut_every), "recovery.max_restarts=1000"]
            base = _undisturbed(args, examples, runs, sets)
            faults = schedule(args.seed, args.faults, span_s=args.minutes * 60 * 0.6)
            found = chaos_run(state, sets, faults, args.seed, runs)
        finally:
            ops.down(BOX.name)
    last = found["summary"] or {}
    recovery = last.get("recovery", {})
    trained = last.get("examples_trained")
    final = last.get("checkpoint", {})
    if found["resumes"] and final:
        # a resumed run counts its own examples: the final cut's position is every example
        # handed out once and covered by the model (the rest of an interrupted run's
        # hand-outs went back with its rollback to the checkpoint it resumed from)
        trained = final["data_position"]
    results = {
        "family": args.family,
        "seed": args.seed,
        "examples": examples,
        "cut_every": cut_every,
        "undisturbed": {
            k: base[k]
            for k in ("test_auc", "train_seconds", "examples_trained", "from")
            if k in base
        },
        **{k: v for k, v in found.items() if k != "summary"},
        "recoveries": sum(line.startswith("recovered ") for line in found["said"]),
        "losses": len(recovery.get("losses", [])),
        "examples_trained": trained,
        "examples_unaccounted": None if trained is None else examples - trained,
        "final_data_position": final.get("data_position"),
        "final_in_flight_examples": final.get("in_flight_examples"),
        "examples_replayed": recovery.get("examples_replayed"),
        "updates_lost_examples": recovery.get("examples_lost"),
        "evaluator_restarts": recovery.get("evaluator_restarts"),
        "test_auc": last.get("test_auc"),
        "auc_delta": None
        if "test_auc" not in last
        else round(last["test_auc"] - base["test_auc"], 4),
        "noise": args.noise,
        "total_wall_s": round(time.time() - started, 1),
    }
    results["ok"] = (
        results["examples_unaccounted"] == 0
        and not results["traceback"]
        and results["auc_delta"] is not None
        and abs(results["auc_delta"]) <= args.noise
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1) + "\n")
    (args.out.parent / "chaos.md").write_text(report(results))
    print(json.dumps({k: results[k] for k in ("faults_injected", "ok", "auc_delta")}), flush=True)


def report(r: dict[str, Any]) -> str:
    lines = [
        "# A run under a random schedule of faults on the box",
        "",
        f"The target is a run of at least 15 minutes under at least 20 faults; this one ran "
        f"{r['wall_s'] / 60:.1f} minutes under chaos and {r['faults_injected']} faults were "
        f"injected before it ended"
        + (
            " (short of the target: more examples, `--examples`, make it longer)."
            if r["wall_s"] < 900 or r["faults_injected"] < 20
            else "."
        ),
        "",
        f"Generated by `benchmarks/bench_box_chaos.py --family {r['family']} --seed {r['seed']}`"
        f" ({r['examples']:,} examples, a cut every {r['cut_every']:,}).",
        ""
        if "from" not in r["undisturbed"]
        else f"The undisturbed run is the one of the earlier record `{r['undisturbed']['from']}` "
        "(the same job and data, trained undisturbed on earlier code: the changes since "
        "touched recovery, not the math).",
        "",
        "| measure | value |",
        "|---|---|",
        f"| wall time under chaos | {r['wall_s'] / 60:.1f} min |",
        f"| undisturbed train time | {r['undisturbed']['train_seconds'] / 60:.1f} min |",
        f"| faults injected (scheduled) | {r['faults_injected']} ({r['faults_scheduled']}) |",
        f"| losses recovered from | {r['losses']} (recovery lines: {r['recoveries']}) |",
        f"| evaluator restarts | {r['evaluator_restarts']} |",
        f"| stops, then resumes | {r['resumes']} |",
        f"| examples: data, trained | {r['examples']:,}, {r['examples_trained']} |",
        f"| examples unaccounted | {r['examples_unaccounted']} |",
        f"| examples replayed (rolled back) | {r['examples_replayed']} |",
        f"| examples whose updates were lost | {r['updates_lost_examples']} |",
        f"| raw traceback | {'yes' if r['traceback'] else 'none'} |",
        f"| AUC: undisturbed, chaos, difference | {r['undisturbed']['test_auc']:.4f}, "
        f"{r['test_auc'] if r['test_auc'] is None else round(r['test_auc'], 4)}, "
        f"{r['auc_delta']} (band +-{r['noise']}) |",
        f"| verdict | {'nothing unaccounted, AUC within the band' if r['ok'] else 'MISSED'} |",
        "",
        "## The schedule as carried out",
        "",
        "| at (s) | fault | host | lasts (s) | note |",
        "|---|---|---|---|---|",
    ]
    for f in r["faults"]:
        note = f.get("skipped") or f.get("killed") or f.get("processes_killed") or ""
        lines.append(f"| {f['at_s']} | {f['kind']} | {f['host']} | {f['seconds']} | {note} |")
    lines += ["", "## What the job said", ""] + [f"- {line}" for line in r["said"]]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
