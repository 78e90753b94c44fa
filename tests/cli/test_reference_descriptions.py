"""Every key of every file recsync reads carries a one-line description in its schema, and
the generated reference pages show it: the job config (every strategy's [strategy]), the
cost profile, the advise cluster file and the scenario file."""

from __future__ import annotations

import dataclasses
import re

import pytest
from pydantic import BaseModel, Field
from pydantic.fields import FieldInfo

from docgen import config_reference, file_references
from docgen.schema_tables import default_in_effect, extra, keys_of
from recsync.app.advise.cluster import ClusterFile
from recsync.app.config.base import Section, section_from_dataclass
from recsync.app.config.schema import Config
from recsync.app.runs.cost_profile import CostProfile
from recsync.app.runs.scenario import ScenarioFile

SCHEMAS: dict[str, type[BaseModel]] = {
    "configuration.md": Config,
    "cost-profile.md": CostProfile,
    "advise-cluster-file.md": ClusterFile,
    "scenario-file.md": ScenarioFile,
}
# words that speak of how the product was made, not of the product
MAKING = re.compile(r"\bas before\b|\bsession\b|\bcommit\b|#\d+|\bissue\b", re.I)


def undescribed(schema: type[BaseModel]) -> list[str]:
    """The keys of `schema` (nested tables and every member of a union included) without a
    one-line description, or whose unset default does not say what is then in effect."""
    missing = []
    for dotted, info in keys_of(schema):
        text = info.description or ""
        if not text.strip() or "\n" in text or text != text.strip():
            missing.append(dotted)
        elif unset_unsaid(info):
            missing.append(f"{dotted} (unset: what then?)")
    return missing


def unset_unsaid(info: FieldInfo) -> bool:
    """An optional key whose default is unset, without a word on what is then in effect."""
    if info.is_required() or info.get_default(call_default_factory=True) is not None:
        return False
    return not extra(info).get("unset")


@pytest.mark.parametrize("page", SCHEMAS)
def test_every_key_has_a_one_line_description(page):
    keys = list(keys_of(SCHEMAS[page]))
    assert len(keys) >= 9
    assert undescribed(SCHEMAS[page]) == []


def test_the_check_finds_a_key_without_a_description():
    @dataclasses.dataclass(frozen=True)
    class Spec:
        """A spec."""

        described: int = dataclasses.field(default=1, metadata={"doc": "Described."})
        bare: int = 2
        optional: int | None = dataclasses.field(default=None, metadata={"doc": "No unset."})

    class Table(Section):
        inner: section_from_dataclass(Spec) = Field(  # type: ignore[valid-type]
            default_factory=section_from_dataclass(Spec), description="Inner."
        )
        plain: int = 0

    assert undescribed(Table) == ["inner.bare", "inner.optional (unset: what then?)", "plain"]


def test_the_config_schema_describes_about_two_hundred_keys():
    keys = {dotted for dotted, _ in keys_of(Config)}
    assert len(keys) > 150
    for key in ("cluster.num_cpus", "strategy.timing.shadow_min_gap", "data.schema.label"):
        assert key in keys


def _pages() -> dict[str, str]:
    return {
        "configuration.md": config_reference.render(),
        **{page.page: page.render() for page in file_references.PAGES},
    }


@pytest.mark.parametrize("page", SCHEMAS)
def test_the_reference_page_shows_every_key_with_its_description(page):
    text = _pages()[page]
    rows: dict[str, list[str]] = {}
    for line in text.splitlines():
        if line.startswith("| `"):
            rows.setdefault(line.split(" | ")[0].strip("| `"), []).append(line)
    for dotted, info in keys_of(SCHEMAS[page]):
        if "." not in dotted:  # a table of the file: a heading of its own
            headings = (f"## `[{dotted}]", f"## `[[{dotted}]]")
            assert any(h in text for h in headings) or dotted in ("cost", "strategy"), dotted
            continue
        assert dotted in rows, dotted
        for row in rows[dotted]:
            assert len(row.strip("|").split(" | ")) == 5, row
        described = info.description.replace("|", "\\|")
        assert any(described in row for row in rows[dotted]), dotted
    assert not MAKING.search(text), MAKING.search(text)


def test_the_reference_says_the_default_in_effect_and_the_values():
    page = config_reference.render()
    row = next(line for line in page.splitlines() if line.startswith("| `cluster.num_cpus`"))
    assert "unset: the machine's cores (os.cpu_count())" in row
    assert ">= 1" in row
    source = next(line for line in page.splitlines() if line.startswith("| `data.source`"))
    for name in ("synthetic", "criteo", "libsvm", "libfm", "libffm", "csv", "parquet", "auto"):
        assert f'"{name}"' in source, name
    assert default_in_effect(Config.model_fields["run"]) == "its table's defaults"


def test_a_table_shared_by_several_strategies_is_shown_once():
    page = config_reference.render()
    assert page.count("## `[strategy.timing]`") == 1
    assert page.count("## `[strategy.staleness_norm]`") == 1
    assert page.count("](#strategytiming)") == 4  # independent, easgd, ma, bmuf
    headings = [line for line in page.splitlines() if line.startswith("## ")]
    assert len(headings) == len(set(headings))
