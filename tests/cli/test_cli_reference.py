"""The command-line reference (docgen/cli_reference.py): every command and every option of
the real `recsync` command tree has help, and the generated page names every command with
its usage and every option; the page's pieces checked on a small app of known shape."""

from __future__ import annotations

import re
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import pytest
import typer
import typer.main
import yaml

from docgen import cli_reference
from recsync.app.cli.main import app

ROOT = Path(__file__).resolve().parents[2]
HEADING = re.compile(r"^#{2,4} `(recsync[^`]*)`$", re.M)
COMMIT = re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def _tree(
    command: Any, ctx: Any, path: tuple[str, ...] = ()
) -> list[tuple[tuple[str, ...], Any, Any]]:
    """The command and every command under it, with its context (typer's own click:
    duck-typed), walked here independently of the page's generator."""
    found = [(path, command, ctx)]
    for name in getattr(command, "list_commands", lambda _: [])(ctx):
        sub = command.get_command(ctx, name)
        found += _tree(sub, sub.context_class(sub, parent=ctx, info_name=name), (*path, name))
    return found


@pytest.fixture(scope="module")
def tree() -> list[tuple[tuple[str, ...], Any, Any]]:
    root = typer.main.get_command(app)
    return _tree(root, root.context_class(root, info_name="recsync"))


@pytest.fixture(scope="module")
def page() -> str:
    return cli_reference.render()


def _sections(page: str) -> dict[str, str]:
    """Each command's section of the page, by its heading's command line."""
    marks = list(HEADING.finditer(page))
    ends = [m.start() for m in marks[1:]] + [len(page)]
    return {m[1]: page[m.end() : end] for m, end in zip(marks, ends, strict=True)}


def test_every_command_and_every_option_has_help(tree):
    paths = {" ".join(path) for path, _, _ in tree}
    assert {"train", "simulate", "advise", "data synth", "data inspect", "box up"} <= paths
    assert {"continual", "calibrate", "reproduce", "reproduce psp", "export"} <= paths
    missing = []
    for path, command, _ in tree:
        name = " ".join(("recsync", *path))
        if command.hidden:
            continue
        if not (command.help or "").strip():
            missing.append(name)
        for param in command.params:
            if not getattr(param, "hidden", False) and not (param.help or "").strip():
                missing.append(f"{name} {param.opts[0]}")
    assert len(tree) >= 30 and sum(len(c.params) for _, c, _ in tree) >= 100
    assert not missing, f"no help: {missing}"


def test_every_commands_one_line_help_is_one_line(tree):
    long = {}
    for path, command, _ in tree:
        first = (command.help or "").split("\n\n")[0]
        summary = " ".join((command.short_help or first).split())
        if len(summary) > 80:
            long[" ".join(path)] = summary
    assert not long, long


def test_the_page_names_every_command_with_its_usage_and_options(tree, page):
    sections = _sections(page)
    for path, command, ctx in tree[1:]:
        name = " ".join(("recsync", *path))
        assert name in sections, f"no section for {name}"
        section = sections[name]
        usage = " ".join(command.get_usage(ctx).split()).removeprefix("Usage:").strip()
        assert f"```text\n{usage}\n```" in section, (name, usage)
        for param in command.params:
            if param.param_type_name == "argument":
                assert f"| `{param.metavar or param.name.upper()}` |" in section, param.name
            else:
                for flag in (*param.opts, *param.secondary_opts):
                    assert f"`{flag}`" in section, (name, flag)
        if hasattr(command, "list_commands"):  # a group: a row linking each sub-command
            for sub in command.list_commands(ctx):
                assert f"[`{sub}`](#{'-'.join(('recsync', *path, sub))})" in section
    assert len(sections) == len(tree) - 1  # the app itself heads the page, untitled


def test_the_page_gives_types_and_defaults_as_the_commands_have_them(page):
    sections = _sections(page)
    train, synth = sections["recsync train"], sections["recsync data synth"]
    assert "| `--config`, `-c` | path (`FILE`) | unset | A TOML config" in train
    assert "| `--progress` / `--no-progress` | flag | `--progress` |" in train
    assert "| `--set` | str (`KEY=VALUE`), repeatable | unset |" in train
    assert "| `--split` | one of `train`, `test` | `train` | Which split to write. |" in synth
    assert "| `--out` | path (`FILE`) | required |" in synth
    assert "| `RUN` | path, one or more | required | Run directories. |" in page
    assert "| `--jobs` | int, at least 1 (`N`) | `2` |" in sections["recsync reproduce"]


def test_the_page_is_in_the_site_navigation_and_names_no_commit(page):
    nav = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))["nav"]
    assert "cli.md" in str(nav)
    assert not COMMIT.findall(FENCE.sub("", page))


class Colour(StrEnum):
    red = "red"
    blue = "blue"


def _small_app() -> typer.Typer:
    small = typer.Typer(help="A small app.", rich_markup_mode=None)
    group = typer.Typer(help="A group.", rich_markup_mode=None)
    small.add_typer(group, name="group")

    @small.command()
    def paint(
        wall: Annotated[Path, typer.Argument(metavar="WALL", help="The wall to paint.")],
        colour: Annotated[Colour, typer.Option(help="The colour.")] = Colour.blue,
        coats: Annotated[int, typer.Option(min=1, metavar="N", help="Coats *at least*.")] = 2,
        tag: Annotated[list[str] | None, typer.Option(help="A tag <x> (repeatable).")] = None,
        dry: Annotated[bool, typer.Option(help="Say, do not paint; see --colour.")] = False,
        secret: Annotated[bool, typer.Option(hidden=True, help="Not shown.")] = False,
    ) -> None:
        """Paint a wall.

        Then let it dry
        for a day."""

    @group.command()
    def inner() -> None:
        """An inner command | with a pipe."""

    return small


def test_a_small_apps_page_shows_each_kind_of_parameter(monkeypatch):
    monkeypatch.setattr(cli_reference, "root_command", lambda: typer.main.get_command(_small_app()))
    page = cli_reference.render()
    sections = _sections(page)
    assert set(sections) == {"recsync paint", "recsync group", "recsync group inner"}
    paint = sections["recsync paint"]
    assert "\nPaint a wall.\n" in paint and "\nThen let it dry for a day.\n" in paint
    assert "```text\nrecsync paint [OPTIONS] {WALL}\n```" in paint
    assert "| `WALL` | path | required | The wall to paint. |" in paint
    assert "| `--colour` | one of `red`, `blue` | `blue` | The colour. |" in paint
    assert "| `--coats` | int, at least 1 (`N`) | `2` | Coats \\*at least\\*. |" in paint
    assert "| `--tag` | str, repeatable | unset | A tag &lt;x\\> (repeatable). |" in paint
    assert "| `--dry` / `--no-dry` | flag | `--no-dry` | Say, do not paint; see `--colour`. |" in (
        paint
    )
    assert "secret" not in page
    assert "| [`inner`](#recsync-group-inner) | An inner command \\| with a pipe. |" in page
    assert "No option but `--help`." in sections["recsync group inner"]
