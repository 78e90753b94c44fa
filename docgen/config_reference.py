"""The configuration reference, generated from the pydantic config schema
(`recsync.app.config`): one table per section, every key with its type, the default in
effect, the values it takes and its description, all carried by the schema."""

from __future__ import annotations

from docgen.schema_tables import Table, Tables, render_tables
from recsync.app.config.schema import Config
from recsync.app.config.strategy import SECTIONS

SKIPPED = ("cost",)  # deprecated; the cost profile's page says its keys


def all_sections() -> list[Table]:
    """Every table of a config file: the sections of `Config`, and [strategy] once for each
    strategy name (its keys differ by name); a table shared by several strategies
    ([strategy.timing]) once."""
    tables = Tables()
    tables.add_root(Config, skip=("strategy", *SKIPPED))
    for name, section in SECTIONS.items():
        tables.add(section, "strategy", f'[strategy] name = "{name}"')
    return tables.found


def render() -> str:
    """The reference page, Markdown."""
    lines = [
        "# Configuration reference",
        "",
        "Generated from the config schema when the site is built. A job config is TOML,",
        "layered on the embedded default (`src/recsync/app/config/default.toml`): a file",
        "given with `--config` sets only the keys it names, then every `--set KEY=VALUE`",
        "applies. An unknown key or a wrong type stops the run with a message naming the",
        "dotted key. `[strategy]` takes the keys of the strategy its `name` picks; each is",
        "listed below. The default is the one in effect when a file leaves the key out.",
        "The simulator's prices are a file of their own, the",
        "[cost profile](cost-profile.md) that `[simulate] profile` names (a `[cost]` table",
        "in the job config is still read, deprecated).",
        "",
    ]
    return "\n".join(lines + render_tables(all_sections()))
