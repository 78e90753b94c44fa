"""A reproduction's stamp: what made its report (issue 55). `recsync reproduce NAME` runs
the runner and then `write_stamp`: the git commit (and whether the files the reproduction
depends on differed from it), the exact command, the seeds, the machine, the wall time and
the cost model with its numbers, into `stamp.json` beside the report, into `results.json`
(key "stamp") where that is a JSON object, and as a block under report.md's title.

A report depends on the code it really runs (`dependencies`): the reproduction's own
modules (every file of experiments/ its module imports, found by `code_closure`), the verdict
rule, and the whole product package (src/recsync/: its math, policies, families,
coordinator, simulator and cost model, and everything they reach at run time, by import or
by name). The stamp keeps each of those files' git blob id (`code`), so a report's status is
a comparison of contents, with or without git history: `stale_reason` says why a report is
not current (no stamp, a stamp of uncommitted code, or which files changed since, were added
or went). A stamp written before `code` was kept is read at its commit's files.
"""

from __future__ import annotations

import dataclasses
import hashlib
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
PRODUCT = "src/recsync"  # the product package: a report depends on all of it
PRODUCT_SUFFIXES = (".py", ".toml")  # its code and the data it ships (the default config)
SHOWN_FILES = 6  # changed files a status names before it counts the rest
NOT_DEPENDENCIES = {"registry", "stamp", "points", "code_closure"}  # change no number of a report
PACKAGE = "experiments.repro"


def dependencies(module: str) -> list[str]:
    """The files (relative to the checkout) whose change makes the report of the
    reproduction in `module` (a dotted name in experiments.repro) stale: its own modules
    (every file of experiments/ it runs, `code_closure`), the verdict rule always, and every
    file of the product package (`product_files`), first its own then the product's."""
    return [*own_files(module), *product_files()]


def own_files(module: str) -> list[str]:
    """The reproduction's own files: those of experiments/ its module runs, and the verdict
    rule."""
    skip = [f"{PACKAGE}.{name}" for name in NOT_DEPENDENCIES]
    closure = code_closure.closure(module, ROOT, skip, within=("experiments",))
    own = {path.relative_to(ROOT).as_posix() for path in closure}
    return sorted(own | {path for path in SHARED if (ROOT / path).exists()})


def product_files() -> list[str]:
    """Every file of the product package's code and shipped data, relative to the checkout."""
    base = ROOT / PRODUCT
    return sorted(
        path.relative_to(ROOT).as_posix()
        for path in base.rglob("*")
        if path.suffix in PRODUCT_SUFFIXES and "__pycache__" not in path.parts and path.is_file()
    )


def blob_id(path: Path) -> str:
    """The git blob id of a file's contents (what `git hash-object` prints), without git."""
    data = path.read_bytes()
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


def code_ids(files: list[str]) -> dict[str, str]:
    """Each file's blob id, as the checkout holds it now."""
    return {path: blob_id(ROOT / path) for path in files if (ROOT / path).is_file()}


def code_ids_at(commit: str, files: list[str]) -> dict[str, str] | None:
    """Each file's blob id at `commit` (None: git cannot tell, e.g. not a checkout)."""
    listed = _git("ls-tree", "-r", commit, "--", "experiments", PRODUCT)
    if listed is None:
        return None
    wanted, found = set(files), {}
    for line in listed.splitlines():
        meta, _, path = line.partition("\t")
        if path in wanted or path.startswith(PRODUCT + "/"):
            found[path] = meta.split()[2]
    return {path: blob for path, blob in found.items() if _counts(path, wanted)}


def _counts(path: str, own: set[str]) -> bool:
    """Whether `path` of a commit's tree is one a report depends on: one of its own files,
    or a file of the product package's code or data."""
    return path in own or (path.startswith(PRODUCT + "/") and Path(path).suffix in PRODUCT_SUFFIXES)


def changed_files(then: dict[str, str], now: dict[str, str]) -> list[str]:
    """The files whose contents differ between two sets of ids, or that are in one only."""
    return sorted(path for path in then.keys() | now.keys() if then.get(path) != now.get(path))


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
        "depends_on": [*own_files(module), PRODUCT + "/"],
        "code": code_ids(depends),
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
    it is: stamped from a clean tree, and every file it depends on as it was then."""
    stamp = read_stamp(out)
    if not (out / "report.md").is_file() and not (out / "results.json").is_file():
        return "no report"
    if stamp is None:
        return "no stamp"
    if stamp.get("dirty"):
        return "stamped from uncommitted changes to its code"
    depends = dependencies(module)
    then = stamp.get("code")
    if not isinstance(then, dict):
        commit = stamp.get("commit")
        if not commit:
            return "the stamp names no commit"
        then = code_ids_at(commit, depends)
        if then is None:
            return f"the stamp's commit {commit[:12]} is not in this checkout"
    changed = changed_files(then, code_ids(depends))
    if not changed:
        return None
    return "code changed since its stamp: " + files_text(changed)


def files_text(files: list[str]) -> str:
    """`files`, the first few named and the rest counted."""
    named = ", ".join(f"`{path}`" for path in files[:SHOWN_FILES])
    rest = len(files) - SHOWN_FILES
    count = f"{len(files)} file{'s' if len(files) > 1 else ''}"
    return f"{count} ({named}{f' and {rest} more' if rest > 0 else ''})"
