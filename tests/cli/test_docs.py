"""The documentation: every shell command the README and the site's pages show is run by a
test (the cheap ones here, in-process; those that start Ray by
tests/engine/test_walkthrough.py), and the generated pages cover what they are made from."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from doc_commands import MAKE_TARGETS, ROOT, DocCommand, all_commands, runnable, walkthrough
from test_cli import invoke

CRITEO_LINE = "1\t5\t110\t\t16\t\t1\t0\t14\t7\t1\t\t306\t\t" + "\t".join(["62770d79"] * 26)
MY_TOML = """
[cluster]
num_trainers = 1
"""


def _cheap(command: DocCommand) -> bool:
    """Run here: not on Ray, not the walkthrough's (tests/engine/test_walkthrough.py runs
    its commands on a file it makes), no placeholder."""
    plain = command.argv[0] == "recsync" and not command.starts_ray
    walked = list(command.argv[1:]) in walkthrough()
    return plain and not walked and command.placeholder_test is None


def _by_page() -> dict[str, list[DocCommand]]:
    pages: dict[str, list[DocCommand]] = {}
    for command in all_commands():
        if _cheap(command) or command.argv[0] == "printf":
            pages.setdefault(command.page, []).append(command)
    return pages


def test_every_command_shown_is_run_by_a_test():
    commands = all_commands()
    assert len(commands) >= 15
    for command in commands:
        if command.placeholder_test is not None:
            test = (ROOT / command.placeholder_test).read_text(encoding="utf-8")
            assert "--address" in test, command
        elif command.argv[0] == "make":
            assert command.text in MAKE_TARGETS, command
        else:
            assert command.argv[0] in ("recsync", "printf"), f"no test runs {command}"
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert "\t$(BIN)/recsync train\n" in makefile  # make run: the engine test's `recsync train`


@pytest.mark.parametrize("page", sorted(_by_page()))
def test_the_cheap_commands_of_a_page_run(page, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "day_0.tsv").write_text("\n".join([CRITEO_LINE, "0" + CRITEO_LINE[1:]] * 20))
    (tmp_path / "my.toml").write_text(MY_TOML)
    for command in _by_page()[page]:
        if command.argv[0] == "printf":  # printf TEXT > FILE
            assert command.argv[-2] == ">", command
            printed = subprocess.run(command.argv[:-2], capture_output=True, check=True)
            Path(command.argv[-1]).write_bytes(printed.stdout)
            continue
        result = invoke(*runnable(command.argv))
        assert result.exit_code == 0, (command.text, result.output)
