"""Host and link faults on the multi-host box, for a strategy of each family (needs root
and iproute2: `recsync box`).

A box of 5 hosts: host 0 the Ray head and the driver (no node), host 1 the servers
(embedding, sync, dense or group: pinned), host 2 the reader (pinned), hosts 3 and 4 the
trainers (pinned). For each family (replica: S-EASGD; gradient: async; all-reduce;
hierarchical) a run undisturbed, then one run per fault, each injected once the run's first
checkpoint (a cut) is on disk:

- trainer_host, server_host, reader_host: every process of host 3, 1 or 2 killed at once
  (SIGKILL: its Ray node, its actors, its shared memory), the host brought back after
  the run;
- link_5s, link_30s, link_120s: host 3's link down for that long, then up;
- slow_link: host 3's link cut 100x (tbf) for 60 s;
- lossy_link: 2% of host 3's frames dropped (a resend after a 0.2 s timeout, doubling)
  and every frame delayed 20 ms, for 60 s (this kernel has no netem: recsync's own
  transport injects it, runtime/transport/faults.py);
- second_fault: host 3 killed, then host 2 (the reader's) 2 s after the job says it lost
  the first;
- evaluator: the evaluator actor's process killed (a helper the driver starts).

A run that stops (a named error) is resumed with `--resume`. Each run's line says what
was injected and when, what the job said (its loss and recovery lines, timed from the
injection), how it ended, the examples trained against the data's, the examples replayed
and lost by its own accounting, and its AUC against the undisturbed run's. Writes every run
to --out (reports/faults/matrix.json) and the table beside it (matrix.md).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from recsync.tools.box import ops
from recsync.tools.box.plan import BoxPlan, Link

ROOT = Path(__file__).resolve().parents[1]
RECSYNC = str(Path(sys.executable).with_name("recsync"))
BOX = BoxPlan(5, name="rsbf", subnet="10.217.0.0/24")
FAST = 1000.0  # Mbit/s
SERVERS, READER, TRAINERS = 1, 2, (3, 4)
VICTIM = 3  # the trainer host whose link or machine goes
FAMILIES = {
    "replica": (["strategy.name=easgd"], ["sync_server"]),
    "gradient": (["strategy.name=async"], ["dense_server"]),
    "allreduce": (["strategy.name=allreduce", "cluster.workers_per_trainer=1"], []),
    "hierarchical": (
        ["strategy.name=hierarchical", "strategy.groups=2", "cluster.num_dense_servers=1"],
        ["group_server"],
    ),
}
FAULTS = (
    "trainer_host",
    "server_host",
    "reader_host",
    "link_5s",
    "link_30s",
    "link_120s",
    "slow_link",
    "lossy_link",
    "second_fault",
    "evaluator",
)


def overrides(family: str, examples: int, cut_every: int) -> list[str]:
    strategy, server_roles = FAMILIES[family]
    pins = [f"cluster.placement.{role}=[{SERVERS}]" for role in ["embedding_server", *server_roles]]
    pins += [f"cluster.placement.reader=[{READER}]", f"cluster.placement.trainer={list(TRAINERS)}"]
    return [
        *strategy,
        *pins,
        f"data.synthetic.num_train={examples}",
        "data.synthetic.num_test=20000",
        f"run.eval_every={examples // 4}",
        "run.eval_examples=5000",
        f"run.checkpoint.every_examples={cut_every}",
        "run.checkpoint.every_seconds=0",
        "recovery.max_restarts=6",
    ]


class Watched:
    """A driver process on host 0, its output read line by line with the time each came."""

    def __init__(self, argv: list[str]):
        wide = ["env", "COLUMNS=250"]  # a line a message, as the terminal is not a tty here
        self.process = subprocess.Popen(
            ops.in_host(BOX, 0, [*wide, *argv]),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.lines: list[tuple[float, str]] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append((time.monotonic(), line.rstrip()))

    def said(self, word: str) -> float | None:
        """When the first line holding `word` came (None: none yet)."""
        return next((t for t, line in list(self.lines) if word in line), None)

    def wait(self, timeout_s: float) -> int:
        try:
            code = self.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            code = self.process.wait()
        self._reader.join(timeout=10)
        return code

    @property
    def output(self) -> str:
        return "\n".join(line for _, line in self.lines)


def kill_evaluator(state: ops.BoxState) -> int:
    """SIGKILL the evaluator actor's process (on the driver's host); how many were killed."""
    killed = 0
    for pid in ops.host_processes(state, 0):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if cmdline.startswith("ray::Evaluator"):
            os.kill(pid, signal.SIGKILL)
            killed += 1
    return killed


def inject(state: ops.BoxState, fault: str, driver: Watched) -> dict[str, Any]:
    """Carry out `fault` on the running box; what was done, with its times (monotonic)."""
    done: dict[str, Any] = {"at": time.monotonic()}
    if fault.endswith("_host"):
        host = {"trainer_host": VICTIM, "server_host": SERVERS, "reader_host": READER}[fault]
        done["processes_killed"] = ops.stop_host(state, host)
        done["lost_hosts"] = [host]
    elif fault.startswith("link_"):
        seconds = float(fault.removeprefix("link_").removesuffix("s"))
        ops.link_up(state, VICTIM, False)
        try:
            time.sleep(seconds)
        finally:
            ops.link_up(state, VICTIM, True)
        done["healed_at"] = time.monotonic()
    elif fault in ("slow_link", "lossy_link"):
        link = Link(FAST / 100) if fault == "slow_link" else Link(FAST, delay_ms=20.0, loss=0.02)
        ops.shape(BOX.name, VICTIM, link)
        try:
            time.sleep(60.0)
        finally:
            ops.shape(BOX.name, VICTIM, Link(FAST))
        done["healed_at"] = time.monotonic()
    elif fault == "second_fault":
        done["processes_killed"] = ops.stop_host(state, VICTIM)
        deadline = time.monotonic() + 120
        while driver.said("lost ") is None and time.monotonic() < deadline:
            if driver.process.poll() is not None:
                break  # the job stopped on the first (then the second is lost on its own)
            time.sleep(0.1)
        time.sleep(2.0)
        done["second_at"] = time.monotonic()
        done["processes_killed"] += ops.stop_host(state, READER)
        done["lost_hosts"] = [VICTIM, READER]
    elif fault == "evaluator":
        deadline = time.monotonic() + 60
        killed = 0
        while not killed and time.monotonic() < deadline:
            killed = kill_evaluator(state)
            time.sleep(0.2)
        done["processes_killed"] = killed
    else:
        raise ValueError(f"no fault {fault!r}")
    return done


def train_args(runs: Path, name: str, sets: list[str], resume_from: str | None = None) -> list[str]:
    """`recsync train`'s arguments for run `name` under `runs` (resumed from the run
    `resume_from` there)."""
    args = ["train", "--address", BOX.head_address, "--name", name, "--force", "--no-progress"]
    if resume_from is not None:
        args += ["--resume", str(runs / resume_from)]
    args += ["--set", f"run.runs_dir={runs}"]
    return args + [a for s in sets for a in ("--set", s)]


def one_run(
    state: ops.BoxState, family: str, fault: str | None, sets: list[str], runs: Path, repeat: int
) -> dict[str, Any]:
    name = f"{family}-{fault or 'undisturbed'}-{repeat}"
    driver = Watched([RECSYNC, *train_args(runs, name, sets)])
    started = time.monotonic()
    row: dict[str, Any] = {"family": family, "fault": fault or "none"}
    at = started  # the fault's time (the run's start if none was injected)
    if fault is not None:
        checkpoint = runs / name / "checkpoint.pt"
        while not checkpoint.exists() and driver.process.poll() is None:
            time.sleep(0.2)
        time.sleep(3.0)
        if driver.process.poll() is not None:
            row["note"] = "the run ended before the fault"
        else:
            done = inject(state, fault, driver)
            row["injected_s"] = round(done["at"] - started, 1)
            row["processes_killed"] = done.get("processes_killed")
            row["healed_after_s"] = (
                round(done["healed_at"] - done["at"], 1) if "healed_at" in done else None
            )
            row["lost_hosts"] = done.get("lost_hosts", [])
            at = done["at"]
    code = driver.wait(timeout_s=1500)
    output = driver.output
    row["exit"] = code
    row["wall_s"] = round(time.monotonic() - started, 1)
    row["said"] = [
        f"{t - at:+.1f} s {line}" if "injected_s" in row else line
        for t, line in driver.lines
        if line.startswith(("lost ", "recovered ", "every machine pinned", "error", "Error"))
        or "resume" in line
    ]
    row["traceback"] = "Traceback" in output
    if code != 0:
        row["error_tail"] = output.strip().splitlines()[-6:]
        for host in sorted(
            set(row.get("lost_hosts", [])) | (set(BOX.hosts) - ops.alive_hosts(state))
        ):
            ops.start_host(state, host)
        row["lost_hosts_back"] = True
        resumed = Watched([RECSYNC, *train_args(runs, f"{name}-resumed", sets, resume_from=name)])
        row["resume_exit"] = resumed.wait(timeout_s=1500)
        row["resume_traceback"] = "Traceback" in resumed.output
        name = f"{name}-resumed"
    summary_path = runs / name / "summary.json"
    if summary_path.is_file():
        summary = json.loads(summary_path.read_text())
        recovery = summary.get("recovery", {})
        row.update(
            examples_trained=summary["examples_trained"],
            test_auc=summary["test_auc"],
            losses=[
                {k: loss[k] for k in ("node", "action", "position", "back_to", "replayed")}
                for loss in recovery.get("losses", [])
            ],
            examples_replayed=recovery.get("examples_replayed", 0),
            examples_lost=recovery.get("examples_lost", 0),
            evaluator_restarts=recovery.get("evaluator_restarts", 0),
            pings=recovery.get("pings"),
            node_hosts_after=summary.get("node_hosts"),
        )
    log = runs / name / "ray.log"
    if log.is_file():  # the nodes' channels say why they closed a connection
        text = log.read_text(errors="replace")
        row["connections_refused_or_closed"] = sum(
            text.count(f"{what} the connection from") for what in ("dropped", "closed")
        ) + text.count("refused a connection from")
    return row


def hosts_back(state: ops.BoxState, row: dict[str, Any]) -> None:
    """Every host without a Ray node now (lost, or called dead by Ray while its link was
    down: its node then ends itself) comes back with a new one for the next run."""
    missing = sorted(set(BOX.hosts) - ops.alive_hosts(state))
    if row.get("lost_hosts") and not row.get("lost_hosts_back"):
        missing = sorted(set(missing) | set(row["lost_hosts"]))
    row["hosts_restarted_after"] = missing
    for host in missing:
        ops.start_host(state, host)


def verdicts(rows: list[dict[str, Any]], examples: int, noise: float) -> None:
    """Each run's checks, against the mean AUC of its family's undisturbed runs: within
    noise is within the larger of `noise` and the undisturbed runs' own spread."""
    undisturbed: dict[str, list[float]] = {}
    for r in rows:
        if r["fault"] == "none" and "test_auc" in r:
            undisturbed.setdefault(r["family"], []).append(r["test_auc"])
    for row in rows:
        aucs = undisturbed.get(row["family"])
        band = max(noise, max(aucs) - min(aucs)) if aucs else noise
        row["auc_band"] = round(band, 4)
        row["every_example_trained"] = row.get("examples_trained") == examples
        row["auc_delta"] = (
            round(row["test_auc"] - sum(aucs) / len(aucs), 4)
            if aucs and "test_auc" in row
            else None
        )
        row["ok"] = (
            row["every_example_trained"]
            and not row["traceback"]
            and not row.get("resume_traceback")
            and row["auc_delta"] is not None
            and abs(row["auc_delta"]) <= band
        )


def recovered_s(row: dict[str, Any]) -> str:
    """Seconds from the fault to the job's last 'recovered' line ('-': none said)."""
    times = [line.split(" s ", 1)[0] for line in row.get("said", []) if " recovered " in line]
    return times[-1].lstrip("+") if times else "-"


def spreads(rows: list[dict[str, Any]]) -> str:
    """Each family's undisturbed AUCs, max - min."""
    found: dict[str, list[float]] = {}
    for r in rows:
        if r["fault"] == "none" and "test_auc" in r:
            found.setdefault(r["family"], []).append(r["test_auc"])
    return ", ".join(f"{f} {max(a) - min(a):.4f} ({len(a)} runs)" for f, a in found.items())


def report(results: dict[str, Any]) -> str:
    lines = [
        "# Host and link faults on the box, by family",
        "",
        f"Generated by `benchmarks/bench_box_faults.py` ({results['examples']:,} examples a run,"
        f" a cut every {results['cut_every']:,}, links at {FAST:.0f} Mbit/s; "
        f"{results['wall_s'] / 60:.0f} min). Hosts: 0 the Ray head and the driver, "
        f"{SERVERS} the servers, {READER} the reader, {TRAINERS} the trainers.",
        "",
        results.get("note", ""),
        "",
        f"A run is ok if it trained every example once, printed no raw traceback and its AUC is "
        f"within noise of the mean of its family's undisturbed runs: within +-{results['noise']}"
        f" or their own spread (max - min, same seed), whichever is larger: "
        f"{spreads(results['runs'])}. `recovered` is the time "
        "from the fault to the job's line saying it recovered; `ping max` the longest round "
        "of the driver's pings in the run.",
        "",
        "| family | fault | exit | losses (action) | trained | replayed | recovered (s) "
        "| ping max (s) | AUC | dAUC | ok |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results["runs"]:
        losses = ", ".join(f"{x['node']} ({x['action']})" for x in r.get("losses", [])) or "-"
        exit_code = str(r["exit"]) + (
            "" if "resume_exit" not in r else f", resumed {r['resume_exit']}"
        )
        auc = "-" if "test_auc" not in r else f"{r['test_auc']:.4f}"
        ping = (r.get("pings") or {}).get("max_s", "-")
        lines.append(
            f"| {r['family']} | {r['fault']} | {exit_code} | {losses} "
            f"| {r.get('examples_trained', '-')} | {r.get('examples_replayed', '-')} "
            f"| {recovered_s(r)} | {ping} | {auc} | {r.get('auc_delta', '-')} "
            f"| {'yes' if r.get('ok') else 'NO'} |"
        )
    lines += ["", "## What each run said (times from the fault)", ""]
    for r in results["runs"]:
        if r["fault"] == "none":
            continue
        lines.append(f"- **{r['family']} / {r['fault']}**: " + "; ".join(r["said"][:8]))
        if r.get("error_tail"):
            lines.append(f"  - ended: `{r['error_tail'][-1]}`")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--families", nargs="*", choices=list(FAMILIES), default=list(FAMILIES))
    parser.add_argument("--faults", nargs="*", choices=FAULTS, default=list(FAULTS))
    parser.add_argument("--examples", type=int, default=600_000)
    parser.add_argument("--cut-every", type=int, default=60_000)
    parser.add_argument("--noise", type=float, default=0.005, help="the AUC band")
    parser.add_argument("--undisturbed", type=int, default=2, help="undisturbed runs a family")
    parser.add_argument("--out", type=Path, default=ROOT / "reports" / "faults" / "matrix.json")
    parser.add_argument("--render", type=Path, metavar="FILE", help="only rewrite the table")
    parser.add_argument(
        "--merge", type=Path, nargs="+", metavar="FILE", help="join the runs of results FILEs"
    )
    parser.add_argument("--note", default="", help="with --merge: where the parts were run")
    args = parser.parse_args()
    if args.render is not None:
        results = json.loads(args.render.read_text())
        (args.render.parent / "matrix.md").write_text(report(results))
        return
    if args.merge:
        parts = [json.loads(path.read_text()) for path in args.merge]
        rows = [row for part in parts for row in part["runs"]]
        verdicts(rows, parts[0]["examples"], parts[0]["noise"])
        wall = sum(part["wall_s"] for part in parts)
        results = {**parts[0], "runs": rows, "wall_s": wall, "note": args.note}
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(results, indent=1) + "\n")
        (args.out.parent / "matrix.md").write_text(report(results))
        return
    started = time.time()
    rows: list[dict[str, Any]] = []
    out = args.out
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="bench-box-faults-") as tmp:
        ops.down(BOX.name)
        state = ops.up(BOX, Link(FAST))
        try:
            for family in args.families:
                sets = overrides(family, args.examples, args.cut_every)
                plan = [(None, r) for r in range(args.undisturbed)] + [(f, 0) for f in args.faults]
                for fault, repeat in plan:
                    row = one_run(state, family, fault, sets, Path(tmp), repeat)
                    hosts_back(state, row)
                    rows.append(row)
                    verdicts(rows, args.examples, args.noise)
                    print(json.dumps(row), flush=True)
                    results = {
                        "examples": args.examples,
                        "cut_every": args.cut_every,
                        "noise": args.noise,
                        "runs": rows,
                        "wall_s": round(time.time() - started, 1),
                    }
                    out.write_text(json.dumps(results, indent=1) + "\n")
                    (out.parent / "matrix.md").write_text(report(results))
        finally:
            ops.down(BOX.name)


if __name__ == "__main__":
    main()
