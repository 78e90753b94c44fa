"""`recsync advise`: which strategy, trainers and servers for this job on that cluster,
predicted in the simulator (app/advise)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from recsync.app.advise.advice import AdviseOptions
from recsync.app.advise.advice import advise as run_advice
from recsync.app.advise.candidates import JobSource
from recsync.app.advise.cluster import load_cluster
from recsync.app.advise.rank import indistinguishable
from recsync.app.advise.report import (
    advice_table,
    duration,
    flat_lines,
    refusal_lines,
    set_lines,
    write_outputs,
)
from recsync.app.cli.common import ConfigOption, ProgressOption, SetOption, fail
from recsync.app.config.load import parse_overrides
from recsync.app.runs.simulate import simulator_threads
from recsync.errors import JobFailed, RecsyncError


def _seeds(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(s) for s in text.split(",") if s.strip())
    except ValueError:
        raise typer.BadParameter(f"expected seeds like 0,1,2, got {text!r}") from None


def advise(
    cluster: Annotated[
        Path,
        typer.Option(
            metavar="FILE", help="The cluster: machines, grid and conditions (docs/advise.md)."
        ),
    ],
    config: ConfigOption = None,
    set_: SetOption = None,
    out: Annotated[
        Path,
        typer.Option(metavar="DIR", help="Folder of the points (a rerun resumes) and results."),
    ] = Path("advise"),
    strategies: Annotated[
        str | None,
        typer.Option(metavar="A,B", help="Only these strategies (default: every one)."),
    ] = None,
    budget: Annotated[
        float | None,
        typer.Option(metavar="MINUTES", help="Start no point after this many minutes."),
    ] = None,
    slice_: Annotated[
        int, typer.Option("--slice", metavar="N", help="Examples of each speed point.")
    ] = AdviseOptions.slice_examples,
    quality: Annotated[
        bool,
        typer.Option(show_default=False, help="Measure the fastest ones' AUC (default) or not."),
    ] = True,
    sample: Annotated[
        int,
        typer.Option(
            metavar="N",
            help="Examples a quality point trains on at most (it stops once its held-out "
            "loss has flattened).",
        ),
    ] = AdviseOptions.quality_examples,
    test_sample: Annotated[
        int, typer.Option(metavar="N", help="Held-out examples each quality point scores.")
    ] = AdviseOptions.quality_test_examples,
    seeds: Annotated[str, typer.Option(metavar="0,1", help="Seeds of the quality points.")] = "0,1",
    top: Annotated[
        int, typer.Option(metavar="K", help="Strategies whose quality is measured, at most.")
    ] = AdviseOptions.quality_candidates,
    examples: Annotated[
        int | None,
        typer.Option(
            metavar="N",
            help="Examples in one pass over the data (default: data.synthetic.num_train x "
            "train.epochs; file data: 1,000,000).",
        ),
    ] = None,
    address: Annotated[
        str | None,
        typer.Option(
            metavar="ADDR",
            help="Run the points as Ray tasks on the cluster at ADDR, as many at once as it "
            "has cores ('local': a Ray of this machine's cores).",
        ),
    ] = None,
    progress: ProgressOption = True,
) -> None:
    """Advise a strategy and cluster counts for a job.

    Every strategy at a grid of trainer and server counts that fits the cluster's machines
    is measured in the simulator (priced math, on a slice of the data; clean and under each
    of the cluster file's conditions), the fastest ones' quality in real math on a sample;
    they are ranked (fastest within noise of the best AUC first) and the winner's config is
    written. Points are kept in --out: a rerun measures only what is missing."""
    try:
        job = JobSource(config, parse_overrides(set_ or []))
        cluster_file = load_cluster(cluster)
        options = AdviseOptions(
            strategies=None if strategies is None else [s.strip() for s in strategies.split(",")],
            slice_examples=slice_,
            quality=quality,
            quality_examples=sample,
            quality_test_examples=test_sample,
            seeds=_seeds(seeds),
            quality_candidates=top,
            budget_s=None if budget is None else budget * 60,
            examples_per_pass=examples,
        )
        bar = Progress(
            TextColumn("[bold]advise"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.description}"),
            TimeElapsedColumn(),
            console=Console(emoji=False, stderr=True),
            disable=not progress,
        )
        with simulator_threads(), bar:
            task = bar.add_task("", total=None)

            def on_progress(done: int, planned: int, what: str) -> None:
                bar.update(task, completed=done, total=planned, description=escape(what))

            pool = None
            if address is not None:
                from recsync.runtime.ray.tasks import TaskPool  # Ray: only where asked for

                pool = TaskPool(address)
            try:
                advice = run_advice(
                    job, cluster_file, options, out, on_progress, cluster.parent, pool
                )
            finally:
                if pool is not None:
                    pool.close()
        written = write_outputs(advice, job, out)
    except (RecsyncError, JobFailed, OSError) as error:
        fail(error)
    console = Console(emoji=False)
    if not console.is_terminal:  # a log or a pipe: the whole table, not squeezed to 80
        console = Console(emoji=False, width=max(console.width, 200))
    console.print(advice_table(advice))
    if any(r.measured.quality_from for r in advice.ranked):
        console.print("* quality measured at the strategy's fastest candidate")
    console.print(
        f"one pass = {advice.examples_per_pass:,} examples; points measured "
        f"{advice.measured_points}, from {out / 'points.jsonl'} {advice.cached_points}"
    )
    if advice.not_measured:
        shown = ", ".join(advice.not_measured[:6])
        more = f" and {len(advice.not_measured) - 6} more" if len(advice.not_measured) > 6 else ""
        console.print(f"not measured (budget spent): {escape(shown)}{more}")
    for line in flat_lines(advice) + refusal_lines(advice.refused, written["rows"]):
        console.print(escape(line), soft_wrap=True)
    winner = advice.winner
    alike = indistinguishable(advice.ranked)
    if alike:
        console.print(
            f"{len(alike)} candidates cannot be told apart by quality (within noise of the "
            "best: twice the seeds' spread, at least 0.002 AUC): "
            f"{escape(', '.join(r.candidate.label for r in alike))}; the advice is the fastest",
            soft_wrap=True,
        )
    if winner is None:
        console.print("no candidate to advise was measured (a lower bound is none): raise --budget")
    else:
        console.print(
            f"advice: {escape(winner.candidate.label)}, one pass in "
            f"{duration(winner.time_per_pass_s)}; run it with {written['winner']} or:"
        )
        words = ["recsync train"] + ([f"-c {config}"] if config else [])
        console.print(escape(" ".join(words + set_lines(winner.candidate, job))), soft_wrap=True)
    console.print(f"figure: {written['figure']}; rows: {written['rows']}")
