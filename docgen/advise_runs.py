"""The advice runs behind "What `recsync advise` measures on the default job"
(docs/choosing-a-strategy.md, rendered by docgen/advise_section.py): `recsync advise` on
the embedded default job for each cluster of RUNS, into reports/advise/<preset>/.

    python docgen/advise_runs.py              # every cluster (make advise-docs)
    python docgen/advise_runs.py dev-2core    # one

Each run is what `recsync advise --cluster FILE --out reports/advise/<preset>` does (the
same functions, the CLI's defaults), then a stamp of what made it (stamp.json: the commit
and whether recsync's sources or the cluster file differed from it, the code digest its
points are keyed by, the cluster file as read, the cost model, the options, the machine,
the wall time, the points measured and those read back from points.jsonl). points.jsonl
stays in the folder (ignored by git): a rerun measures only what changed.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "src")]

from experiments.repro.stamp import head_commit, machine  # noqa: E402
from recsync.app.advise.advice import AdviseOptions, advise  # noqa: E402
from recsync.app.advise.cache import code_digest  # noqa: E402
from recsync.app.advise.candidates import JobSource  # noqa: E402
from recsync.app.advise.cluster import PRESETS, load_cluster  # noqa: E402
from recsync.app.advise.report import write_outputs  # noqa: E402
from recsync.app.runs.simulate import simulator_threads  # noqa: E402

OUT = Path("reports/advise")  # relative to the checkout
STAMP = "stamp.json"
# the preset each folder is named after -> its cluster file (relative to the checkout)
RUNS = {
    "xeon-16core": "examples/cluster.toml",
    "dev-2core": "examples/cluster-dev-2core.toml",
}


def changed(*paths: str) -> bool:
    """Whether `paths` differ from the checkout's commit (True where git cannot say)."""
    try:
        done = subprocess.run(
            ["git", "status", "--porcelain", "--", *paths],
            cwd=ROOT, capture_output=True, text=True, check=False, timeout=60,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return True
    return done.returncode != 0 or bool(done.stdout.strip())


def command(cluster_file: str, out: Path) -> str:
    """The `recsync advise` command line the run is."""
    return f"recsync advise --cluster {cluster_file} --out {out.as_posix()}"


def stamp(
    preset: str, cluster_file: str, advice: Any, options: AdviseOptions, started: float
) -> dict[str, Any]:
    """What made the run's results (stamp.json)."""
    cluster = load_cluster(ROOT / cluster_file)
    return {
        "command": command(cluster_file, OUT / preset),
        "made_by": "python docgen/advise_runs.py",
        "commit": head_commit(),
        "dirty": changed("src", cluster_file),  # src/ or the cluster file differed
        "code": code_digest(),
        "job": "the embedded default job (src/recsync/app/config/default.toml)",
        "cluster_file": cluster_file,
        "cluster": cluster.model_dump(),
        "preset_source": PRESETS[cluster.machines.preset][1] if cluster.machines.preset else None,
        "cost_model": dataclasses.asdict(advice.cost),
        "options": dataclasses.asdict(options),
        "machine": machine(),
        "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "wall_s": round(time.time() - started, 1),
        "points_measured": advice.measured_points,
        "points_cached": advice.cached_points,
    }


def run(preset: str) -> Path:
    """One advice run into reports/advise/<preset>; its folder."""
    cluster_file = RUNS[preset]
    folder = ROOT / OUT / preset
    options = AdviseOptions()
    job = JobSource()
    started = time.time()

    def on_progress(done: int, planned: int, what: str) -> None:
        if what:
            print(f"\r{preset}: {done}/{planned} {what[:60]:<60}", end="", flush=True)

    path = ROOT / cluster_file
    with simulator_threads():
        advice = advise(job, load_cluster(path), options, folder, on_progress, path.parent)
    print()
    write_outputs(advice, job, folder)
    record = stamp(preset, cluster_file, advice, options, started)
    (folder / STAMP).write_text(json.dumps(record, indent=1, default=str) + "\n")
    print(
        f"{preset}: {record['points_measured']} points measured, "
        f"{record['points_cached']} from points.jsonl, {record['wall_s']:.0f} s"
    )
    return folder


def main(argv: list[str]) -> int:
    unknown = [name for name in argv if name not in RUNS]
    if unknown:
        print(f"unknown preset(s) {unknown}; known: {sorted(RUNS)}", file=sys.stderr)
        return 2
    for preset in argv or list(RUNS):
        run(preset)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
