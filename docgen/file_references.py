"""The references of the other files recsync reads, generated from their schemas like the
configuration reference: the cost profile (`recsync calibrate` writes it, `recsync simulate
--profile` reads it), the cluster file of `recsync advise --cluster` and the scenario file
of `recsync continual --scenario`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pydantic import BaseModel

from docgen.schema_tables import Tables, render_tables
from recsync.app.advise.cluster import ClusterFile
from recsync.app.runs.cost_profile import CostProfile
from recsync.app.runs.scenario import ScenarioFile


@dataclass(frozen=True)
class FileReference:
    """A generated page: its file name, title, introduction and the file's schema."""

    page: str
    title: str
    intro: tuple[str, ...]
    schema: type[BaseModel]

    def render(self) -> str:
        """The page, Markdown."""
        tables = Tables()
        tables.add_root(self.schema)
        lines = [f"# {self.title}", "", *self.intro, ""]
        return "\n".join(lines + render_tables(tables.found))


COST_PROFILE = FileReference(
    "cost-profile.md",
    "Cost profile reference",
    (
        "A cost profile is a TOML file with one `[cost]` table: the prices the simulator",
        "charges for compute, messages, server work, reading and collectives, in virtual",
        "seconds. `recsync calibrate` measures them on a machine and writes the file;",
        "`recsync simulate --profile FILE` (or `[simulate] profile` in the job config) reads",
        "it, and `recsync advise` takes one as a cluster's `[machines] profile`. A key left",
        "out keeps the default below; an unknown key or a value out of range is an error",
        "naming the key. Generated from the simulator's cost model when the site is built;",
        "[the simulator's page](simulator.md) tells how to calibrate.",
    ),
    CostProfile,
)
CLUSTER_FILE = FileReference(
    "advise-cluster-file.md",
    "Advise cluster file reference",
    (
        "The cluster file of `recsync advise --cluster FILE` (TOML) describes the machines a",
        "job could run on, the counts of each role to try on them, and the conditions",
        "(stragglers, a slow server) each candidate is measured in besides the clean",
        "cluster. Generated from its schema when the site is built;",
        "[Advise](advise.md) tells how the advice is made.",
    ),
    ClusterFile,
)
SCENARIO_FILE = FileReference(
    "scenario-file.md",
    "Scenario file reference",
    (
        "The scenario file of `recsync continual --scenario FILE` (TOML) changes the",
        "cluster day by day: each `[[change]]` holds from its `day` until the next",
        "change's, and states the whole condition of its days (what it leaves out is the",
        "base config's: its trainers, no stragglers, no slow server; days before the first",
        "change run the base config's cluster). Both drivers carry it the same way: virtual",
        "seconds on the simulator, wall seconds on the Ray engine. Generated from its",
        "schema when the site is built; [Continual training](continual.md) shows it at work.",
    ),
    ScenarioFile,
)
PAGES: tuple[FileReference, ...] = (COST_PROFILE, CLUSTER_FILE, SCENARIO_FILE)
RENDERERS: dict[str, Callable[[], str]] = {page.page: page.render for page in PAGES}
