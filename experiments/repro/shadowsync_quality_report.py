"""The ShadowSync quality reproduction's report (numbers from results.json): Table 2(a)
and Table 3 beside the paper's, means over seeds with their range, and the claims read
off the rows; the setting, the tuning and the run length, and which way each claim settled,
from `shadowsync_quality_settled`."""

from __future__ import annotations

from collections.abc import Sequence
from statistics import mean
from typing import Any

from experiments.repro import reviewer
from experiments.repro.shadowsync_quality_settled import (
    Rows,
    how_settled,
    settled_setting,
    spread,
)
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
        *(_older(seeds) if "tuning" not in results else settled_setting(results, seeds)),
        "",
        f"## Table 2(a): {gap_trainers} trainers, 1 sync server",
        "",
        "Mean over seeds (min .. max). Sync gap: eq. 2, iterations of a trainer between two "
        "of its syncs; per thread: the same counted in one worker thread's iterations.",
        "",
        "| variant | dense lr | sync gap (eq. 2) | per thread | train loss, whole pass | "
        "train loss, last quarter | eval logloss | paper: train, eval |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for v in gap_variants:
        train, test = PAPER_GAP[v]
        cell = {k: list(_of(rows, "gap", v, gap_trainers, k).values()) for k in _KEYS}
        lines.append(
            f"| {v} | {_rate(rows, 'gap', v, gap_trainers)} | "
            f"{_gap(cell['average_sync_gap'])} | {_gap(cell['average_sync_gap_per_thread'])} | "
            f"{spread(cell['train_loss'])} | {spread(cell['train_loss_last'])} | "
            f"{spread(cell['test_logloss'])} | {train:.5f}, {test:.5f} |"
        )
    lines += [
        "",
        f"## Table 3: relative loss increase over {scale[0]} trainers, 2 sync servers",
        "",
        "Each seed's increase against its own 5-trainer run; mean over seeds (min .. max).",
        "",
        "| trainers | variant | dense lr | eval logloss | train increase, whole pass | train "
        "increase, last quarter | eval increase | paper: train, eval |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for n in scale:
        for v in scale_variants:
            loss = spread(list(_of(rows, "scale", v, n, "test_logloss").values()))
            rate = _rate(rows, "scale", v, n)
            if n == scale[0]:
                lines.append(f"| {n} | {v} | {rate} | {loss} | - | - | - | - |")
                continue
            train, test = PAPER_INCREASE[(n, v)]
            lines.append(
                f"| {n} | {v} | {rate} | {loss} | "
                + " | ".join(
                    spread(increases(rows, v, n, k), 3, percent=True)
                    for k in ("train_loss", "train_loss_last", "test_logloss")
                )
                + f" | +{train:.3f}%, +{test:.3f}% |"
            )
    text = "\n".join([*lines, "", *findings(rows, gap_variants, scale_variants, scale)])
    extra = [f"These results have {len(seeds)} seeds."]
    return reviewer.appended(text, "shadowsync-quality", extra)


def _gap(values: Sequence[float | None]) -> str:
    """A mean sync gap, or "-" where a run never synced."""
    known = [v for v in values if v is not None]
    return f"{mean(known):.2f}" if known and len(known) == len(values) else "-"


def _rate(rows: Rows, table: str, variant: str, trainers: int) -> str:
    """The dense lr of a variant at a scale (one a key: every seed runs at its tuned rate)."""
    rates = sorted(set(_of(rows, table, variant, trainers, "dense_lr").values()))
    return ", ".join(f"{r:g}" for r in rates)


_KEYS = (
    "average_sync_gap",
    "average_sync_gap_per_thread",
    "train_loss",
    "train_loss_last",
    "test_logloss",
)


def _older(seeds: list[int]) -> list[str]:
    """The setting of results written before every variant was tuned and curves kept."""
    return [
        f"These results were written by an earlier version of this reproduction (seeds "
        f"{', '.join(map(str, seeds))}; the dense rate tuned on the baseline alone, no "
        "held-out curves): `recsync reproduce shadowsync-quality` writes them again with "
        "every variant tuned and the flattening of each run."
    ]


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
        f"({spread(growth[mildest], 3, percent=True)}; "
        + ", ".join(f"{v} {spread(growth[v], 3, percent=True)}" for v in others)
        + f"). The paper: S-EASGD's, +0.177% against +0.333% and +0.250%. S-EASGD's below "
        f"{rival}'s (the closest), in points of percent: {milder.describe(3)}.",
        "- Table 3, the mildest mean eval increase at each scale: "
        + ", ".join(f"{n} trainers: {_mildest(rows, scale_variants, n)}" for n in scale[1:])
        + ".",
        *_gap_reading(rows, gap_trainers, fixed, scale),
        "",
        "The two claims that one shared rate (tuned on the 5-trainer S-EASGD alone) put "
        "against the paper, with every variant tuned at every scale, "
        f"{len({r['seed'] for r in rows})} seeds:",
        "",
        f"- Table 2(a), S-EASGD below the best FR-EASGD ({best}): "
        + how_settled(below_best, f"S-EASGD minus {best}, eval logloss", 5),
        f"- Table 3, S-EASGD's eval increase from {scale[0]} to {most} trainers the mildest "
        f"(against the closest other, {rival}): "
        + how_settled(milder, f"S-EASGD minus {rival}, points of percent", 3),
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
