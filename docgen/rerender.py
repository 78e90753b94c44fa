"""Re-render the report.md of every registered reproduction from its stored results file
with the current code: `python -m docgen.rerender`. The numbers stay the stored run's; the
text, the verdicts (experiments/repro/verdict.py) and the reviewer section are today's. A
report's stamp block is kept; an unstamped one gets a block saying it is not stamped, which
the next `recsync reproduce NAME` replaces with its stamp."""

from __future__ import annotations

import json
from pathlib import Path

from docgen import results
from experiments.repro import REPRODUCTIONS, stamp

NOT_STAMPED = (
    "Not stamped: re-rendered by `python -m docgen.rerender` from the stored {source}, "
    "which a run made before reports were stamped wrote; the numbers are that run's, the "
    "text and the verdicts the current code's. `recsync reproduce {name}` regenerates and "
    "stamps it."
)


def rerender(report: results.Report, name: str) -> Path:
    """report.md of `report`'s directory, rendered again; returns its path."""
    directory = results.REPORTS / report.directory
    stored = json.loads((directory / report.results_file).read_text(encoding="utf-8"))
    text = report.render(stored, directory)
    path = directory / "report.md"
    old = path.read_text(encoding="utf-8") if path.is_file() else ""
    if stamp.BEGIN in old and stamp.END in old:
        block = stamp.BEGIN + old.split(stamp.BEGIN, 1)[1].split(stamp.END, 1)[0] + stamp.END
    else:
        note = NOT_STAMPED.format(source=report.results_file, name=name)
        block = f"{stamp.BEGIN}\n{note}\n{stamp.END}"
    path.write_text(stamp.with_header(text, block), encoding="utf-8")
    return path


def main() -> None:
    by_directory = {Path(r.report_dir).name: name for name, r in REPRODUCTIONS.items()}
    for report in results.REPORTS_RENDERED:
        name = by_directory.get(report.directory)
        if name is not None and results.generated(report):  # none to re-render before a run
            print(rerender(report, name))


if __name__ == "__main__":
    main()
