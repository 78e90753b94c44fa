"""The command-line reference, generated from the `recsync` command itself: its typer app
as click commands (typer's `get_command`), walked group by group, every command with its
summary, usage line, description and a table of its arguments and options (name, type,
default, help). The commands are found, never listed by hand: a command added to the app
is on the page at the next build.

Recent typer versions build on a copy of click of their own, so the walk is duck-typed
(`list_commands`, `get_command`, `params`) rather than tied to `click.Group`."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from enum import Enum
from pathlib import PurePath
from typing import Any

import typer.main

PROGRAM = "recsync"
_SPECIAL = re.compile(r"([*_\\>])")  # what Markdown would read as markup in plain text
_CODE = re.compile(r"(`[^`]*`)")
_LONG_OPTION = re.compile(r"(?<![\w`-])(--[a-z][a-z0-9-]*)(?![\w-])")


@dataclass(frozen=True)
class Param:
    """An argument or option of a command, as the reference's table shows it."""

    kind: str  # "argument" or "option"
    names: tuple[str, ...]  # its flags (`--config`, `-c`), or an argument's metavar
    secondary: tuple[str, ...]  # a boolean flag's off switch (`--no-progress`)
    type: str
    default: str
    help: str


@dataclass(frozen=True)
class Command:
    """A command or group of the app: its words after `recsync`, what its help says and
    its parameters; a group also names its sub-commands."""

    path: tuple[str, ...]
    summary: str
    short: str  # what its group's listing says of it (click's short help)
    description: tuple[str, ...]  # the help's further paragraphs
    usage: str
    params: tuple[Param, ...]
    subcommands: tuple[str, ...]

    @property
    def name(self) -> str:
        return " ".join((PROGRAM, *self.path))

    @property
    def anchor(self) -> str:
        """The id the table of contents gives its heading."""
        return "-".join((PROGRAM, *self.path)).lower()


def root_command() -> Any:
    """The app as one click group (typer's own conversion)."""
    from recsync.app.cli.main import app

    return typer.main.get_command(app)


def walk(
    command: Any, ctx: Any | None = None, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], Any, Any]]:
    """`command` and every command under it, depth first, in the order `--help` lists
    them: (its words after `recsync`, the command, its click context). Hidden ones left
    out."""
    if ctx is None:
        ctx = command.context_class(command, info_name=PROGRAM)
    yield path, command, ctx
    if not hasattr(command, "list_commands"):
        return
    for name in command.list_commands(ctx):
        sub = command.get_command(ctx, name)
        if sub is None or sub.hidden:
            continue
        yield from walk(sub, sub.context_class(sub, parent=ctx, info_name=name), (*path, name))


def paragraphs(text: str | None) -> list[str]:
    """A help text's paragraphs, each on one line (click's `\\b` no-rewrap markers and
    what follows `\\f` dropped, as `--help` drops them)."""
    text = (text or "").split("\f")[0]
    found = []
    for block in re.split(r"\n\s*\n", text):
        lines = [line for line in block.splitlines() if line.strip() != "\b"]
        joined = " ".join(" ".join(lines).split())
        if joined:
            found.append(joined)
    return found


def _bound(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _type(param: Any, ctx: Any) -> str:
    """What the value is: flag, a choice, or its type (with its range), and the metavar
    the help shows for it; `, repeatable` for an option given several times."""
    if getattr(param, "is_flag", False) and not getattr(param, "count", False):
        return "flag"
    # typer's own click says "<int range>", "<train|test>"; click's ParamType has a name
    display = getattr(param, "display_type", None)
    label = str(display(ctx)).strip("<>") if display is not None else str(param.type.name)
    label = re.sub(r"^list\[(.*)\]$", r"\1", label).lower()
    if "|" in label:
        label = "one of " + ", ".join(f"`{choice}`" for choice in label.split("|"))
    low = getattr(param, "min", None)
    high = getattr(param, "max", None)
    if low is None and high is None and hasattr(param, "type"):
        low, high = getattr(param.type, "min", None), getattr(param.type, "max", None)
    if label.endswith(" range"):
        label = label.removesuffix(" range")
        if low is not None and high is not None:
            label += f", {_bound(low)} to {_bound(high)}"
        elif low is not None:
            label += f", at least {_bound(low)}"
        elif high is not None:
            label += f", at most {_bound(high)}"
    metavar = param.metavar
    if param.param_type_name == "option" and metavar and metavar.lower() != label:
        label += f" (`{metavar}`)"
    if param.multiple:
        label += ", repeatable"
    elif param.nargs == -1:
        label += ", one or more"
    return label


def _default(param: Any, ctx: Any) -> str:
    """The value an option takes when not given (an argument: required)."""
    if param.required:
        return "required"
    value = param.get_default(ctx, call=False)
    if callable(value):
        return "computed"
    if getattr(param, "is_flag", False):
        if param.secondary_opts:
            return f"`{(param.opts if value else param.secondary_opts)[0]}`"
        return "on" if value else "off"
    if value is None or value in ((), []):
        return "unset"
    if isinstance(value, Enum):
        value = value.value
    if isinstance(value, PurePath):
        value = value.as_posix()
    return f"`{value}`"


def param_of(param: Any, ctx: Any) -> Param:
    kind = str(param.param_type_name)
    if kind == "argument":
        names: tuple[str, ...] = (param.metavar or param.name.upper(),)
    else:
        names = tuple(param.opts)
    return Param(
        kind=kind,
        names=names,
        secondary=tuple(getattr(param, "secondary_opts", ()) or ()),
        type=_type(param, ctx),
        default=_default(param, ctx),
        help=" ".join((getattr(param, "help", None) or "").split()),
    )


def command_of(path: tuple[str, ...], command: Any, ctx: Any) -> Command:
    texts = paragraphs(command.help)
    summary = texts[0] if texts else ""
    short = " ".join((command.short_help or summary).split())
    usage = " ".join(command.get_usage(ctx).split()).removeprefix("Usage:").strip()
    subcommands: tuple[str, ...] = ()
    if hasattr(command, "list_commands"):
        subcommands = tuple(
            name for name in command.list_commands(ctx) if not command.get_command(ctx, name).hidden
        )
    params = tuple(
        param_of(param, ctx) for param in command.params if not getattr(param, "hidden", False)
    )
    return Command(path, summary, short, tuple(texts[1:]), usage, params, subcommands)


def commands() -> list[Command]:
    """Every command of the app, the app itself first, depth first."""
    return [command_of(path, command, ctx) for path, command, ctx in walk(root_command())]


def inline(text: str) -> str:
    """Help text as Markdown: its `code` kept, each long option named in it shown as code,
    the characters Markdown would take for markup elsewhere escaped."""
    shown = []
    for part in _CODE.split(text):
        if not part.startswith("`"):
            part = _SPECIAL.sub(r"\\\1", part).replace("<", "&lt;")
            part = _LONG_OPTION.sub(r"`\1`", part)
        shown.append(part)
    return "".join(shown)


def cell(text: str) -> str:
    """Markdown as a table cell: on one line, its pipes escaped but in code (where the
    table reads them as text, and a backslash would show)."""
    parts = _CODE.split(" ".join(text.split()))
    return "".join(part if part.startswith("`") else part.replace("|", "\\|") for part in parts)


def _names(param: Param) -> str:
    shown = ", ".join(f"`{name}`" for name in param.names)
    if param.secondary:
        shown += " / " + ", ".join(f"`{name}`" for name in param.secondary)
    return shown


def _section(command: Command, by_name: dict[str, Command]) -> list[str]:
    level = "#" * min(2 + max(len(command.path) - 1, 0), 4)
    lines = [f"{level} `{command.name}`", "", inline(command.summary), ""]
    lines += ["```text", command.usage, "```", ""]
    for paragraph in command.description:
        lines += [inline(paragraph), ""]
    if command.subcommands:
        lines += ["| command | what it does |", "| --- | --- |"]
        for name in command.subcommands:
            sub = by_name[" ".join((command.name, name))]
            lines.append(f"| [`{name}`](#{sub.anchor}) | {cell(inline(sub.short))} |")
        lines.append("")
    arguments = [p for p in command.params if p.kind == "argument"]
    options = [p for p in command.params if p.kind != "argument"]
    for title, params in (("argument", arguments), ("option", options)):
        if not params:
            continue
        lines += [f"| {title} | type | default | description |", "| --- | --- | --- | --- |"]
        for param in params:
            lines.append(
                f"| {cell(_names(param))} | {cell(param.type)} | {cell(param.default)} "
                f"| {cell(inline(param.help))} |"
            )
        lines.append("")
    if not command.params and not command.subcommands:
        lines += ["No option but `--help`.", ""]
    return lines


def render() -> str:
    """The reference page, Markdown."""
    found = commands()
    by_name = {command.name: command for command in found}
    root, rest = found[0], found[1:]
    lines = [
        "# Command-line reference",
        "",
        f"Generated from the `{PROGRAM}` command itself when the site is built: every",
        "command and sub-command, its usage, its arguments and its options, with the help",
        f"text `{PROGRAM} COMMAND --help` prints. Every command also takes `--help`. In a",
        "usage line, `{NAME}` is an argument to give, `[OPTIONS]` the options below it and",
        "`...` after an argument: one or more. The options `--config` and `--set` layer a",
        "job's config: a TOML file on the embedded default, then each `KEY=VALUE`; the",
        "[configuration reference](configuration.md) lists every key.",
        "",
        f"`{PROGRAM}`: {inline(root.summary)}",
        "",
        "```text",
        root.usage,
        "```",
        "",
        "| command | what it does |",
        "| --- | --- |",
    ]
    for command in rest:
        if len(command.path) > 1:  # a group's commands: in its section
            continue
        lines.append(
            f"| [`{' '.join(command.path)}`](#{command.anchor}) | {cell(inline(command.summary))} |"
        )
    lines.append("")
    for command in rest:
        lines += _section(command, by_name)
    return "\n".join(lines)
