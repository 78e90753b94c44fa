"""A reproduction's stamp: what made its report (issue 55). `recsync reproduce NAME` runs
the runner and then `write_stamp`: the git commit (and whether the files the reproduction
depends on differed from it), the exact command, the seeds, the machine, the wall time and
the cost model with its numbers, into `stamp.json` beside the report, into `results.json`
(key "stamp") where that is a JSON object, and as a block under report.md's title.

`stale_reason` says why a report is not current: no stamp, a stamp of uncommitted code, or a
commit after the stamp's that changed a file the reproduction depends on (`dependencies`:
every file of the checkout its module runs, found from the imports by `code_closure` - its
own modules, the product's math, policies and simulator with its cost model - and the
verdict rule).
"""

from __future__ import annotations

import dataclasses
import json
import os
import platform
import shlex
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from experiments.repro import code_closure

ROOT = Path(__file__).resolve().parents[2]  # the checkout: experiments/ and src/ in it
STAMP_FILE = "stamp.json"
BEGIN = "<!-- stamp: written by experiments/repro/stamp.py, replaced at every run -->"
END = "<!-- /stamp -->"
PARENT_ENV = "RECSYNC_REPRODUCE_PARENT"  # set by `recsync reproduce --all` for its children
SHARED = ("experiments/repro/verdict.py",)  # the verdict rule, whether imported or not
NOT_DEPENDENCIES = {"registry", "stamp", "points", "code_closure"}  # change no number of a report
PACKAGE = "experiments.repro"


def dependencies(module: str) -> list[str]:
    """The files (relative to the checkout) whose change makes the report of the
    reproduction in `module` (a dotted name in experiments.repro) stale: every file of the
    checkout it runs (`code_closure`), the verdict rule always."""
    skip = [f"{PACKAGE}.{name}" for name in NOT_DEPENDENCIES]
    files = {path.relative_to(ROOT).as_posix() for path in code_closure.closure(module, ROOT, skip)}
    files |= {path for path in SHARED if (ROOT / path).exists()}
    own = sorted(path for path in files if path.startswith("experiments/"))
    return [*own, *sorted(files - set(own))]


def _git(*args: str) -> str | None:
    """git's stdout in the checkout, or None where git fails (not a checkout, no git)."""
    try:
        done = subprocess.run(
            ["git", *args], cwd=ROOT, capture_output=True, text=True, check=False, timeout=60
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def head_commit() -> str | None:
    """The checkout's commit (None outside a git checkout)."""
    return _git("rev-parse", "HEAD")


def in_git_checkout() -> bool:
    return _git("rev-parse", "--is-inside-work-tree") == "true"


def machine() -> dict[str, Any]:
    """This machine in a few words: system, CPU model, CPU count, Python."""
    model = platform.processor() or platform.machine()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                model = " ".join(line.split(":", 1)[1].split())
                break
    return {
        "system": platform.platform(terse=True),
        "cpu": model,
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
    }


def command() -> str:
    """The command line this process was started with, as `recsync ...` where it is one."""
    program, *args = sys.argv or [""]
    recsync = Path(program).name == "recsync" or program.endswith("cli/main.py")
    return shlex.join(["recsync", *args] if recsync else [program, *args])


def cost_numbers(cost: Mapping[str, Any]) -> dict[str, Any]:
    """Each named cost model's fields (a dataclass's, nested ones too); others as text."""
    return {
        name: dataclasses.asdict(model)
        if dataclasses.is_dataclass(model) and not isinstance(model, type)
        else str(model)
        for name, model in cost.items()
    }


def make_stamp(
    name: str, module: str, seeds: Any, cost: Mapping[str, Any], started: float, wall_s: float
) -> dict[str, Any]:
    depends = dependencies(module)
    status = _git("status", "--porcelain", "--", *depends)
    return {
        "reproduction": name,
        "commit": head_commit(),
        "dirty": status is None or bool(status),  # its files differ from the commit's
        "command": command(),
        "launched_by": os.environ.get(PARENT_ENV),
        "seeds": seeds,
        "machine": machine(),
        "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "wall_s": round(wall_s, 1),
        "cost_model": cost_numbers(cost),
        "depends_on": depends,
    }


def header(stamp: dict[str, Any]) -> str:
    """The block under report.md's title."""
    commit = (stamp["commit"] or "unknown")[:12]
    state = "with uncommitted changes to its code" if stamp["dirty"] else "clean"
    m = stamp["machine"]
    seeds = stamp["seeds"]
    seeds_text = ", ".join(map(str, seeds)) if isinstance(seeds, list | tuple) else str(seeds)
    lines = [
        BEGIN,
        f"Stamp: commit `{commit}` ({state}); command `{stamp['command']}`"
        + (f" (from `{stamp['launched_by']}`)" if stamp["launched_by"] else "")
        + f"; seeds {seeds_text}; machine {m['system']}, {m['cpus']} CPUs ({m['cpu']}), "
        f"Python {m['python']}; started {stamp['started_utc']}, {stamp['wall_s'] / 60:.1f} "
        "minutes wall. Cost model"
        + (f" ({stamp['cost_source']})" if stamp.get("cost_source") else "")
        + (":" if stamp["cost_model"] else ": none named."),
    ]
    for name, numbers in stamp["cost_model"].items():
        text = (
            ", ".join(f"{k} {v}" for k, v in numbers.items())
            if isinstance(numbers, dict)
            else numbers
        )
        lines.append(f"- {name}: {text}")
    lines += [f"(Full stamp: {STAMP_FILE}.)", END]
    return "\n".join(lines)


def with_header(report: str, block: str) -> str:
    """`report` with its stamp block replaced, or put under its first line (the title)."""
    if BEGIN in report and END in report:
        before, rest = report.split(BEGIN, 1)
        return before + block + rest.split(END, 1)[1]
    title, newline, body = report.partition("\n")
    if not title.startswith("# "):
        return block + "\n\n" + report
    return title + "\n\n" + block + "\n" + (newline + body.lstrip("\n") if body else "")


def write_stamp(out: Path, stamp: dict[str, Any]) -> None:
    """stamp.json, results.json's "stamp" and report.md's block in `out`."""
    out.mkdir(parents=True, exist_ok=True)
    (out / STAMP_FILE).write_text(json.dumps(stamp, indent=2, default=str) + "\n")
    results = out / "results.json"
    if results.is_file():
        loaded = json.loads(results.read_text())
        if isinstance(loaded, dict):
            loaded["stamp"] = stamp
            results.write_text(json.dumps(loaded, indent=2, default=str) + "\n")
    report = out / "report.md"
    if report.is_file():
        report.write_text(with_header(report.read_text(), header(stamp)))


def read_stamp(out: Path) -> dict[str, Any] | None:
    path = out / STAMP_FILE
    if not path.is_file():
        return None
    loaded = json.loads(path.read_text())
    return loaded if isinstance(loaded, dict) else None


def stale_reason(module: str, out: Path) -> str | None:
    """Why the report in `out` of the reproduction in `module` is not current; None where
    it is: stamped from a clean tree at a commit after which none of its files changed."""
    stamp = read_stamp(out)
    if not (out / "report.md").is_file() and not (out / "results.json").is_file():
        return "no report"
    if stamp is None:
        return "no stamp"
    if stamp.get("dirty"):
        return "stamped from uncommitted changes to its code"
    commit = stamp.get("commit")
    if not commit:
        return "the stamp names no commit"
    changed = _git("log", "-1", "--format=%H", f"{commit}..HEAD", "--", *dependencies(module))
    if changed is None:
        return f"the stamp's commit {commit[:12]} is not in this checkout"
    if changed:
        return f"commit {changed[:12]} changed its code after the stamp's {commit[:12]}"
    return None
