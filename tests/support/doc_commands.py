"""The shell commands the README and the documentation pages show, as argument lists, and
which kind of test runs each: the cheap ones run in-process (tests/cli/test_docs.py), the
ones that start Ray in tests/engine/test_walkthrough.py, and those with a placeholder
(a cluster's address) in the test named for it."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHELL_BLOCK = re.compile(r"^```(bash|console|sh|shell)\n(.*?)^```", re.S | re.M)
WALKTHROUGH = re.compile(r"<!-- walkthrough -->\n```bash\n(.*?)^```", re.S | re.M)
# a block holding one of these words cannot run as shown: the test named runs its commands
PLACEHOLDERS = {
    "HEAD_IP": "tests/engine/test_cluster_address.py",
    # builds network namespaces as root: the box's engine tests run its commands
    "recsync box": "tests/engine/test_box_hosts.py",
    # a new cluster after the head's machine was lost: the box's test resumes on one
    "NEW_HEAD": "tests/engine/test_box_hosts.py",
}
# the Makefile's entry points: `make test` is this suite; `make run` runs `recsync train`
MAKE_TARGETS = {"make run": "recsync train", "make test": None}
# the keys every cheap or engine run of a synthetic-task command gets, unless it sets them:
# the commands as shown train a million examples
SMALL_DATA = {"data.synthetic.num_train": "2048", "data.synthetic.num_test": "512"}
TAKES_SMALL_DATA = {"train", "simulate", "continual", "advise"}
TAKES_NO_PROGRESS = {"train", "simulate", "continual", "advise"}
# `recsync advise --budget MINUTES` as run by a test: a small budget, as the data is small
ADVISE_BUDGET = "0.05"


@dataclass(frozen=True)
class DocCommand:
    """One command of a shell block: the page it is on, the block's index on the page,
    its words, and the test that runs it where its block holds a placeholder."""

    page: str
    block: int
    argv: tuple[str, ...]
    placeholder_test: str | None = None

    @property
    def text(self) -> str:
        return shlex.join(self.argv)

    @property
    def starts_ray(self) -> bool:
        """Whether it trains on the Ray engine (`train` but the reference trainer's, or
        `continual --engine ray`)."""
        if self.argv[:2] == ("recsync", "train"):
            return "strategy.name=reference" not in self.argv
        return self.argv[:2] == ("recsync", "continual") and "ray" in self.argv


def pages() -> list[Path]:
    """The README and every page of the documentation site."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def block_commands(block: str) -> list[tuple[str, ...]]:
    """The commands of a shell block: continued lines joined, comments dropped."""
    joined = re.sub(r"\\\n\s*", " ", block)
    found = [tuple(shlex.split(line, comments=True)) for line in joined.splitlines()]
    return [argv for argv in found if argv]


def commands(path: Path) -> list[DocCommand]:
    """Every command of a shell block on the page."""
    text = path.read_text(encoding="utf-8")
    page = path.relative_to(ROOT).as_posix()
    found = []
    for index, match in enumerate(SHELL_BLOCK.finditer(text)):
        test = next((t for word, t in PLACEHOLDERS.items() if word in match[2]), None)
        found += [DocCommand(page, index, argv, test) for argv in block_commands(match[2])]
    return found


def all_commands() -> list[DocCommand]:
    return [command for path in pages() for command in commands(path)]


def walkthrough() -> list[list[str]]:
    """The README's walkthrough, each command's words after `recsync`."""
    found = WALKTHROUGH.search((ROOT / "README.md").read_text(encoding="utf-8"))
    assert found, "README has no walkthrough block"
    argvs = block_commands(found[1])
    assert all(argv[0] == "recsync" for argv in argvs)
    return [list(argv[1:]) for argv in argvs]


def runnable(argv: tuple[str, ...]) -> list[str]:
    """The words to invoke after `recsync`: the command as shown, with SMALL_DATA for the
    keys it does not set and without a progress bar."""
    words = list(argv[1:])
    if words[0] in TAKES_SMALL_DATA or words[:2] == ["data", "synth"]:
        for key, value in SMALL_DATA.items():
            if not any(w.startswith(f"{key}=") for w in words):
                words += ["--set", f"{key}={value}"]
    if words[0] in TAKES_NO_PROGRESS:
        words.append("--no-progress")
    if words[0] == "advise":
        if "--budget" in words:
            at = words.index("--budget")
            del words[at : at + 2]
        words += ["--budget", ADVISE_BUDGET]
    return words
