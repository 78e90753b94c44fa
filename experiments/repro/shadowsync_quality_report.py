"""The ShadowSync quality reproduction's report (numbers from results.json): Table 2(a)
and Table 3 beside the paper's, means over seeds with their range, and the claims read
off the rows."""

from __future__ import annotations

from statistics import mean
from typing import Any

from experiments.repro import reviewer
from experiments.repro.verdict import judge

# the paper's Table 2(a) (train, eval loss) and Table 3 (relative increase over 5 trainers)
PAPER_GAP = {
    "S-EASGD": (0.78926, 0.78451),
    "FR-EASGD-5": (0.78942, 0.78483),
    "FR-EASGD-10": (0.78937, 0.78508),
    "FR-EASGD-30": (0.78942, 0.78523),
    "FR-EASGD-100": (0.78969, 0.78531),
}
PAPER_INCREASE = {  # (trainers, variant) -> (train, eval) in percent
    (10, "S-EASGD"): (0.084, 0.062),
    (10, "FR-EASGD-5"): (0.099, 0.093),
    (10, "FR-EASGD-30"): (0.096, 0.112),
    (20, "S-EASGD"): (0.230, 0.177),
    (20, "FR-EASGD-5"): (0.249, 0.333),
    (20, "FR-EASGD-30"): (0.210, 0.250),
}
Rows = list[dict[str, Any]]


def _spread(values: list[float], digits: int = 5, percent: bool = False) -> str:
    """`mean (min .. max)` over seeds; `percent`: signed, with a % sign."""
    spec = f"+.{digits}f" if percent else f".{digits}f"
    unit = "%" if percent else ""
    m, lo, hi = (format(x, spec) + unit for x in (mean(values), min(values), max(values)))
    return f"{m} ({lo} .. {hi})"


def _of(rows: Rows, table: str, variant: str, trainers: int, key: str) -> dict[int, float]:
    """seed -> `key` of the rows of one table, variant and scale."""
    return {
        r["seed"]: r[key]
        for r in rows
        if r["table"] == table and r["variant"] == variant and r["trainers"] == trainers
    }


def increases(rows: Rows, variant: str, trainers: int, key: str) -> list[float]:
    """Per seed: (loss at `trainers` - loss at 5) / loss at 5, in percent (the paper's
    definition), each seed against its own 5-trainer run."""
    base = _of(
        rows, "scale", variant, min(r["trainers"] for r in rows if r["table"] == "scale"), key
    )
    now = _of(rows, "scale", variant, trainers, key)
    return [100.0 * (now[s] - base[s]) / base[s] for s in sorted(now)]


def report(results: dict[str, Any]) -> str:
    rows: Rows = results["rows"]
    seeds = sorted({r["seed"] for r in rows})
    gap_trainers = next(r["trainers"] for r in rows if r["table"] == "gap")
    scale = sorted({r["trainers"] for r in rows if r["table"] == "scale"})
    gap_variants = list(dict.fromkeys(r["variant"] for r in rows if r["table"] == "gap"))
    scale_variants = list(dict.fromkeys(r["variant"] for r in rows if r["table"] == "scale"))
    lines = [
        "# ShadowSync Tables 2(a) and 3 in the simulator: quality against sync gap and scale",
        "",
        *_setting(results, seeds),
        "",
        f"## Table 2(a): {gap_trainers} trainers, 1 sync server",
        "",
        "Mean over seeds (min .. max). Sync gap: eq. 2, iterations of a trainer between two "
        "of its syncs; per thread: the same counted in one worker thread's iterations.",
        "",
        "| variant | sync gap (eq. 2) | per thread | train loss, whole pass | train loss, last "
        "quarter | eval logloss | paper: train, eval |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for v in gap_variants:
        train, test = PAPER_GAP[v]
        cell = {k: list(_of(rows, "gap", v, gap_trainers, k).values()) for k in _KEYS}
        lines.append(
            f"| {v} | {mean(cell['average_sync_gap']):.2f} | "
            f"{mean(cell['average_sync_gap_per_thread']):.2f} | "
            f"{_spread(cell['train_loss'])} | {_spread(cell['train_loss_last'])} | "
            f"{_spread(cell['test_logloss'])} | {train:.5f}, {test:.5f} |"
        )
    lines += [
        "",
        f"## Table 3: relative loss increase over {scale[0]} trainers, 2 sync servers",
        "",
        "Each seed's increase against its own 5-trainer run; mean over seeds (min .. max).",
        "",
        "| trainers | variant | eval logloss | train increase, whole pass | train increase, "
        "last quarter | eval increase | paper: train, eval |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for n in scale:
        for v in scale_variants:
            loss = _spread(list(_of(rows, "scale", v, n, "test_logloss").values()))
            if n == scale[0]:
                lines.append(f"| {n} | {v} | {loss} | - | - | - | - |")
                continue
            train, test = PAPER_INCREASE[(n, v)]
            lines.append(
                f"| {n} | {v} | {loss} | "
                + " | ".join(
                    _spread(increases(rows, v, n, k), 3, percent=True)
                    for k in ("train_loss", "train_loss_last", "test_logloss")
                )
                + f" | +{train:.3f}%, +{test:.3f}% |"
            )
    text = "\n".join([*lines, "", *findings(rows, gap_variants, scale_variants, scale)])
    extra = [f"These results have {len(seeds)} seeds."]
    return reviewer.appended(text, "shadowsync-quality", extra)


_KEYS = (
    "average_sync_gap",
    "average_sync_gap_per_thread",
    "train_loss",
    "train_loss_last",
    "test_logloss",
)


def _setting(results: dict[str, Any], seeds: list[int]) -> list[str]:
    tuning = results["lr_tuning"]
    tried = ", ".join(f"{r['dense_lr']:g}: {r['test_logloss']:.5f}" for r in tuning)
    return [
        "Default DLRM and synthetic task (26 tables of 100 rows), the same "
        f"{results.get('examples', 1 << 20):,} examples in one pass for every run (the "
        "paper's one-pass rule: more trainers, "
        "fewer examples each), 4 worker threads per trainer (the paper: 24), as many "
        "embedding servers as trainers, S-EASGD's shadow thread syncs without waiting. "
        f"Seeds {', '.join(map(str, seeds))} (initial weights and data order). "
        f"Hyper-parameters: recsync's defaults except the dense Adagrad learning rate, tuned "
        f"once on the baseline ({tuning[0]['variant']}, {tuning[0]['trainers']} trainers, "
        f"seed {tuning[0]['seed']}; eval logloss at each lr tried: {tried}) and frozen at "
        f"{results['dense_lr']:g} for every variant and scale (the criterion, fixed before the "
        f"runs: the lowest eval logloss), {_where_in_grid(tuning, results['dense_lr'])}. "
        "Large rates make the first iterations blow up at many trainers (with the default "
        "0.01, a train loss of ~10 over the first tenth of the pass at 20 trainers), which "
        "then dominates a whole-pass average: hence the last-quarter column.",
        "",
        "Scale, plainly: the paper trains Model-A/B on billions of examples with 24 threads "
        "per trainer and reports an internal loss; ours is logloss on a small synthetic "
        f"task, {results.get('examples', 1 << 20):,} examples, so each worker thread runs "
        + ", ".join(f"{i:.0f}" for i in results["iterations_per_thread"].values())
        + " iterations at "
        + ", ".join(results["iterations_per_thread"])
        + " trainers "
        "(batch 256). Runs this short end while the 20-trainer runs still improve (at 1M "
        "examples the increases were tens of times the paper's): what can be compared is "
        "their order, not their size. 10x longer runs would take ~15 hours "
        "of one core with 5 seeds and were not run. The last-quarter train loss leaves out "
        "the first "
        "iterations, which a one-pass average over billions of examples barely weighs.",
    ]


def _where_in_grid(tuning: Rows, chosen: float) -> str:
    """Whether the chosen rate is interior to the grid tried, said plainly."""
    rates = sorted(r["dense_lr"] for r in tuning)
    if rates[0] < chosen < rates[-1]:
        return f"inside the grid {rates[0]:g}-{rates[-1]:g}"
    edge = "top" if chosen == rates[-1] else "bottom"
    return (
        f"at the {edge} of the grid {rates[0]:g}-{rates[-1]:g}: the best rate may lie beyond "
        "it, which favours no variant in particular but leaves the baseline not fully tuned"
    )


def findings(
    rows: Rows, gap_variants: list[str], scale_variants: list[str], scale: list[int]
) -> list[str]:
    """The two tables' claims, read off the rows (means over seeds, spread named)."""
    gap_trainers = next(r["trainers"] for r in rows if r["table"] == "gap")

    def eval_of(v: str) -> list[float]:
        return list(_of(rows, "gap", v, gap_trainers, "test_logloss").values())

    def eval_by_seed(v: str) -> dict[int, float]:
        return _of(rows, "gap", v, gap_trainers, "test_logloss")

    fixed = [v for v in gap_variants if v != "S-EASGD"]
    evals = [mean(eval_of(v)) for v in fixed]
    # the paper: eval loss rises with the gap (the largest gap's above the smallest's)
    rising = judge(eval_by_seed(fixed[-1]), eval_by_seed(fixed[0]), "higher")
    best = min(fixed, key=lambda v: mean(eval_of(v)))
    shadow = eval_of("S-EASGD")
    below_best = judge(eval_by_seed("S-EASGD"), eval_by_seed(best), "lower")
    most = scale[-1]
    growth = {v: increases(rows, v, most, "test_logloss") for v in scale_variants}
    mildest = _mildest(rows, scale_variants, most)
    others = [v for v in scale_variants if v != mildest]
    # the paper: S-EASGD's increase the mildest; judged against the closest other variant
    rival = min((v for v in scale_variants if v != "S-EASGD"), key=lambda v: mean(growth[v]))
    milder = judge(growth["S-EASGD"], growth[rival], "lower")
    return [
        "Findings:",
        "",
        f"- Table 2(a): FR-EASGD's mean eval logloss over gaps "
        f"{', '.join(v.rsplit('-', 1)[1] for v in fixed)}: "
        f"{', '.join(f'{e:.5f}' for e in evals)} (the paper: rising with the gap; "
        f"{fixed[-1]} above {fixed[0]}: {rising.describe(5)}). Best FR: {best}; S-EASGD "
        f"{mean(shadow):.5f} (the paper: below every FR; below {best}: "
        f"{below_best.describe(5)}).",
        f"- Table 3: the mildest mean eval increase at {most} trainers is {mildest}'s "
        f"({_spread(growth[mildest], 3, percent=True)}; "
        + ", ".join(f"{v} {_spread(growth[v], 3, percent=True)}" for v in others)
        + f"). The paper: S-EASGD's, +0.177% against +0.333% and +0.250%. S-EASGD's below "
        f"{rival}'s (the closest), in points of percent: {milder.describe(3)}.",
        "- Table 3, the mildest mean eval increase at each scale: "
        + ", ".join(f"{n} trainers: {_mildest(rows, scale_variants, n)}" for n in scale[1:])
        + ".",
        *_gap_reading(rows, gap_trainers, fixed, scale),
    ]


def _mildest(rows: Rows, variants: list[str], trainers: int) -> str:
    return min(variants, key=lambda v: mean(increases(rows, v, trainers, "test_logloss")))


def _mean_of(rows: Rows, table: str, variant: str, trainers: int, key: str) -> float:
    return mean(_of(rows, table, variant, trainers, key).values())


def _gap_reading(rows: Rows, gap_trainers: int, fixed: list[str], scale: list[int]) -> list[str]:
    """What the sync gap explains: S-EASGD's gap against the FRs' at both tables' scales,
    and what FR-EASGD-5 pays in examples/s to keep its gap."""
    shadow_gap = _mean_of(rows, "gap", "S-EASGD", gap_trainers, "average_sync_gap")
    gaps = {v: _mean_of(rows, "gap", v, gap_trainers, "average_sync_gap") for v in fixed}
    below = [v for v in fixed if gaps[v] <= shadow_gap]
    above = [v for v in fixed if gaps[v] > shadow_gap]
    lines = []
    if below and above:
        low, high = below[-1], above[0]
        evals = {v: _mean_of(rows, "gap", v, gap_trainers, "test_logloss") for v in (low, high)}
        shadow = _mean_of(rows, "gap", "S-EASGD", gap_trainers, "test_logloss")
        inside = min(evals.values()) <= shadow <= max(evals.values())
        reading = (
            "here the loss follows the gap, whichever thread syncs"
            if inside
            else f"here the gap alone does not explain it: S-EASGD's loss is "
            f"{'above' if shadow > max(evals.values()) else 'below'} both"
        )
        lines.append(
            f"- Table 2(a), read by gap: S-EASGD's gap {shadow_gap:.2f} lies between "
            f"{low}'s ({gaps[low]:.2f}) and {high}'s ({gaps[high]:.2f}); its eval logloss "
            f"{shadow:.5f} {'lies' if inside else 'does not lie'} between theirs "
            f"({evals[low]:.5f}, {evals[high]:.5f}): {reading}."
        )
    most = scale[-1]
    shadow_gaps = ", ".join(
        f"{_mean_of(rows, 'scale', 'S-EASGD', n, 'average_sync_gap'):.2f}" for n in scale
    )
    fr5_gap = _mean_of(rows, "scale", "FR-EASGD-5", most, "average_sync_gap")
    eps = _mean_of(rows, "scale", "FR-EASGD-5", most, "eps") / _mean_of(
        rows, "scale", "S-EASGD", most, "eps"
    )
    lines.append(
        f"- Table 3, read by gap: S-EASGD's gap at {', '.join(map(str, scale))} trainers is "
        f"{shadow_gaps} (its shadow threads share 2 sync servers, so each trainer syncs less "
        f"often as trainers are added); FR-EASGD-5 keeps {fr5_gap:.2f} at {most} trainers by "
        f"waiting for the saturated sync servers: its examples/s are {eps:.2f}x S-EASGD's "
        "(Fig. 5's plateau). In these short runs that trade buys loss; the paper saw "
        "FR-EASGD-5's eval loss spike instead when its sync servers saturated, and its "
        "S-EASGD gaps of 8.6-12.5 at 15-20 trainers still won."
    )
    return lines
