"""What a node's process imports: every Ray actor (and the reader's batch producer) is a
fresh Python that imports its modules before it answers, on every job's start and restart,
so the packages only the CLI, file readers, hash tables or scoring use are imported where
they are used, not by every node."""

from __future__ import annotations

import subprocess
import sys

# what a synthetic job's nodes import: the actor, every family's node specs, the reader's
# data and its producer
NODE_MODULES = (
    "recsync.runtime.ray.actors",
    "recsync.families",
    "recsync.io.sources",
    "recsync.io.background",
)
# each costs a node's start 0.1-1 s of CPU (sklearn's import alone about a second)
NOT_IN_A_NODE = (
    "sklearn",
    "scipy",
    "numba",
    "pyarrow",
    "pandas",
    "matplotlib",
    "pydantic",
    "typer",
    "rich",
    "click",
)


def test_a_nodes_process_imports_no_cli_file_reading_or_scoring_packages():
    check = (
        f"import sys\nfor module in {NODE_MODULES!r}:\n    __import__(module)\n"
        f"print(sorted(p for p in {NOT_IN_A_NODE!r} if p in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", check], capture_output=True, text=True, timeout=300, check=True
    )
    assert done.stdout.strip() == "[]", done.stdout + done.stderr
