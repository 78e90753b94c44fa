"""Ray's own messages to a run's driver, into the run's log file instead of the terminal.

Ray's raylets tell the driver of trouble with its workers (`A worker died or was killed
while executing a task ...`, an actor's process that exited); the driver's error listener
thread (ray._private.worker.listen_error_messages, Ray 2.60, pinned) prints each on the
terminal, where during a recovery that succeeds they read like a crash. While
`ray_messages_to` holds, they go to a file, timestamped; the job says what it lost and how
it recovered in one line each (runtime/ray/recovery.py). Ray's own Python log (the "ray"
logger: "Started a local Ray instance", its token-authentication notice, ...) goes to the
same file while it holds."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ray._private import worker as ray_worker

_lock = threading.Lock()


@contextlib.contextmanager
def ray_messages_to(path: Path) -> Iterator[None]:
    """Ray's messages to this driver go to the file at `path` (appended) while it holds."""
    printing = ray_worker.print_to_stdstream

    def to_file(data: dict[str, Any], ignore_prefix: bool = False) -> None:
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        source = data.get("actor_name") or data.get("pid", "ray")
        with _lock, open(path, "a", encoding="utf-8") as out:
            for line in data.get("lines", []):
                out.write(f"{stamp} ({source}) {line}\n")

    ray_logger = logging.getLogger("ray")
    handlers = list(ray_logger.handlers)
    to_log = logging.FileHandler(path, encoding="utf-8")
    to_log.setFormatter(logging.Formatter("%(asctime)s (ray) %(levelname)s %(message)s"))
    ray_worker.print_to_stdstream = to_file
    ray_logger.handlers = [to_log]
    try:
        yield
    finally:
        ray_worker.print_to_stdstream = printing
        ray_logger.handlers = handlers
        to_log.close()
