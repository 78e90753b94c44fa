"""`recsync reproduce --all`: every registered reproduction, each in its own process
(`recsync reproduce NAME`, so each is stamped by the same path as a single one), at most
`jobs` at a time, the longest first; a reproduction whose report is current (its stamp's
commit is clean and no file it depends on changed since) is skipped unless `force`, so a
stopped `--all` resumes where it stopped. Each child's output goes to a log file; the
parent prints a line when one starts or ends, and every `heartbeat_s` what is running."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from recsync.app.cli.experiments import ENV_VAR, Reproduction, experiments_folder

PARENT_ENV = "RECSYNC_REPRODUCE_PARENT"  # the stamp names the --all command as well
LOG_DIR = Path("runs") / "reproduce"  # under the current directory (ignored by git)


@dataclass
class Running:
    """A child process and what the parent tells of it."""

    name: str
    process: subprocess.Popen[bytes]
    log: Path
    log_file: IO[bytes]
    started: float


def plan(
    reproductions: Mapping[str, Reproduction], force: bool, say: Callable[[str], None]
) -> list[Reproduction]:
    """The reproductions to run, the longest first; each skipped one said with why."""
    todo = []
    for r in reproductions.values():
        reason = "forced" if force else r.stale_reason(Path(r.report_dir))
        if reason is None:
            say(f"{r.name}: current (stamped, its code unchanged since), skipped")
            continue
        say(f"{r.name}: to run ({reason}; about {r.minutes:g} min)")
        todo.append(r)
    return sorted(todo, key=lambda r: -r.minutes)


def _last_line(path: Path) -> str:
    try:
        lines = path.read_bytes().decode(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return lines[-1][-120:] if lines else ""


def _start(r: Reproduction, command: str, address: str | None) -> Running:
    LOG_DIR.mkdir(parents=True, exist_ok=True)
    log = LOG_DIR / f"{r.name}.log"
    log_file = log.open("wb")
    env = dict(os.environ)
    env[ENV_VAR] = str(experiments_folder())
    env[PARENT_ENV] = command
    env.setdefault("COLUMNS", "120")
    args = [sys.executable, "-m", "recsync.app.cli.main", "reproduce", r.name]
    args += [] if address is None else ["--address", address]
    process = subprocess.Popen(args, stdout=log_file, stderr=subprocess.STDOUT, env=env)
    return Running(r.name, process, log, log_file, time.monotonic())


def run_all(
    reproductions: Mapping[str, Reproduction],
    jobs: int,
    force: bool,
    say: Callable[[str], None],
    command: str,
    heartbeat_s: float = 60.0,
    address: str | None = None,
) -> list[str]:
    """Run what `plan` says, `jobs` at a time; the names of those that failed. `command`
    is this one's command line, which each child's stamp names; `address`: each runs its
    points as Ray tasks on that running cluster."""
    if jobs < 1:
        raise ValueError(f"--jobs must be at least 1, not {jobs}")
    if address == "local":
        raise ValueError(
            "--all --address local would start a Ray cluster per reproduction: start one "
            "(ray start --head --num-cpus N) and give its address"
        )
    todo = plan(reproductions, force, say)
    total, done, failed = len(todo), 0, []
    running: list[Running] = []
    last_beat = time.monotonic()
    while todo or running:
        while todo and len(running) < jobs:
            r = todo.pop(0)
            running.append(_start(r, command, address))
            say(
                f"[{done}/{total} done] {r.name} started (about {r.minutes:g} min; "
                f"log {LOG_DIR / r.name}.log)"
            )
        time.sleep(1.0)
        for child in list(running):
            code = child.process.poll()
            if code is None:
                continue
            child.log_file.close()
            running.remove(child)
            done += 1
            minutes = (time.monotonic() - child.started) / 60
            if code != 0:
                failed.append(child.name)
            state = "done" if code == 0 else f"FAILED (exit {code}; see {child.log})"
            say(f"[{done}/{total} done] {child.name} {state} in {minutes:.1f} min")
        if running and time.monotonic() - last_beat >= heartbeat_s:
            last_beat = time.monotonic()
            for child in running:
                minutes = (time.monotonic() - child.started) / 60
                say(f"  {child.name}: {minutes:.1f} min: {_last_line(child.log)}")
    return failed
