"""Partial synchronous parallel (PSP-SGD) against full synchronization, in the simulator.

32 workers (8 trainers x 4 threads), 32 dense servers (blocks) and 8 embedding servers;
0.16% of the pull responses (lookups and dense pulls) are delayed by 4 s, as the PSP paper's
stragglers of the network. Variants, all `psp` with the same linear learning-rate scaling so
only the synchronization differs: full sync (push c=32, pull b=100%), push c=28, push c=28 +
pull b=90%, push c=20 + pull b=75%. Measured: virtual wall time and the final train/test
loss. The paper saw about 17% and 30% less time for the middle two at about the same error,
and worse error for the smallest c, b.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt

from recsync.app.repro_common import CLUSTER_COST, run_segment, strategy
from recsync.data.synthetic import SyntheticSpec
from recsync.optim.dense import DenseOptimizerSpec
from recsync.runtime.sim.cost import Faults
from recsync.trainer.reference import TrainSpec

WORKERS = 32
DENSE_SERVERS = 32
STEPS_PER_WORKER = 30
PUSH_WAIT_S = 0.02  # tau1: after c gradients, wait at most this long for the rest
PULL_WAIT_S = 0.005  # tau2: after b% of the blocks, wait at most this long for the rest
FAULTS = Faults(delay_fraction=0.0016, delay_s=4.0)
# linear scaling multiplies the step by d (up to 32): plain SGD with a small base rate
TRAIN = TrainSpec(dense_optimizer=DenseOptimizerSpec("sgd", lr=0.005))
VARIANTS: dict[str, dict[str, Any]] = {
    "sync (c=32, b=100%)": {"push_count": 32},
    "push c=28": {"push_count": 28, "push_wait_s": PUSH_WAIT_S},
    "push c=28 + pull b=90%": {
        "push_count": 28,
        "push_wait_s": PUSH_WAIT_S,
        "pull_fraction": 0.9,
        "pull_wait_s": PULL_WAIT_S,
    },
    "push c=20 + pull b=75%": {
        "push_count": 20,
        "push_wait_s": PUSH_WAIT_S,
        "pull_fraction": 0.75,
        "pull_wait_s": PULL_WAIT_S,
    },
}


def reproduce(out_dir: Path, progress=None) -> list[dict[str, Any]]:
    out_dir.mkdir(parents=True, exist_ok=True)
    examples = WORKERS * STEPS_PER_WORKER * TRAIN.batch_size
    synthetic = dataclasses.replace(SyntheticSpec(), num_train=examples, num_test=20_000)
    cost = dataclasses.replace(CLUSTER_COST, faults=FAULTS)
    rows = []
    for label, fields in VARIANTS.items():
        _, summary = run_segment(
            strategy("psp", **fields),
            synthetic,
            None,
            cost=cost,
            train=TRAIN,
            dense_servers=DENSE_SERVERS,
        )
        rows.append(
            {
                "variant": label,
                "virtual_seconds": summary["train_seconds"],
                "train_loss": summary["train_loss"],
                "test_logloss": summary["test_logloss"],
                "test_auc": summary["test_auc"],
                "global_steps": summary["global_steps"],
                "dropped": summary["gradients_dropped"],
            }
        )
        if progress:
            progress(rows[-1])
    (out_dir / "results.json").write_text(json.dumps(rows, indent=1))
    _plot(rows, out_dir / "psp.png")
    (out_dir / "report.md").write_text(_report(rows, examples))
    return rows


def _plot(rows: list[dict[str, Any]], path: Path) -> None:
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    labels = [r["variant"] for r in rows]
    left.bar(labels, [r["virtual_seconds"] for r in rows])
    left.set_ylabel("virtual seconds")
    right.bar(labels, [r["test_logloss"] for r in rows])
    right.set_ylabel("test logloss")
    right.set_ylim(min(r["test_logloss"] for r in rows) * 0.98, None)
    for ax in (left, right):
        ax.tick_params(axis="x", labelrotation=20, labelsize=8)
        ax.grid(axis="y", alpha=0.3)
    fig.suptitle("PSP: 32 workers, 32 servers, 0.16% of pulls delayed 4 s (simulated)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _report(rows: list[dict[str, Any]], examples: int) -> str:
    base = rows[0]["virtual_seconds"]
    lines = [
        "# PSP: partial pushing and pulling (simulator)",
        "",
        f"{WORKERS} workers, {DENSE_SERVERS} dense servers, 8 embedding servers, default DLRM, "
        f"{examples:,} examples, dense SGD lr {TRAIN.dense_optimizer.lr} scaled by the number "
        f"of gradients aggregated (linear scaling), tau1 = {PUSH_WAIT_S} s, tau2 = "
        f"{PULL_WAIT_S} s. Faults: `{FAULTS}`. Cost model: `{CLUSTER_COST}`.",
        "",
        "![PSP](psp.png)",
        "",
        "| variant | virtual s | vs sync | train loss | test logloss | test AUC | steps | "
        "dropped |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        dropped = ", ".join(f"{k} {v:,}" for k, v in r["dropped"].items()) or "0"
        lines.append(
            f"| {r['variant']} | {r['virtual_seconds']:.2f} | "
            f"{r['virtual_seconds'] / base - 1:+.0%} | {r['train_loss']:.4f} | "
            f"{r['test_logloss']:.4f} | {r['test_auc']:.4f} | {r['global_steps']:,} | "
            f"{dropped} |"
        )
    return "\n".join(lines) + "\n"
