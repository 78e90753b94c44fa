"""Does GBA's token decay fire in the gba-stragglers reproduction's main setting? A short
real-math run of GBA and BSP (the same buffer without the decay) from the same seed: GBA's
excluded gradients, and each one's AUC and staleness (they differ only if the decay fired).

    PYTHONPATH=src python benchmarks/check_gba_decay.py --steps 100 --seed 0
"""

from __future__ import annotations

import argparse
import time

import torch

from experiments.repro import gba


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100, help="global steps a run")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--slowdown", type=float, default=gba.MAIN_SLOWDOWN)
    args = parser.parse_args()
    torch.set_num_threads(1)
    for variant in ("GBA", "BSP"):
        point = gba.Point(variant, args.seed, slowdown=args.slowdown, steps=args.steps)
        clock = time.process_time()
        row = gba.run_point(point)
        print(
            f"{variant}: {row['global_steps']} global steps of {gba.WORKERS} gradients, "
            f"excluded {row['dropped'] or 0}, dense staleness mean {row['mean_staleness']:.3f} "
            f"max {row['max_staleness']}, EPS {row['eps']:,.0f}, test AUC "
            f"{row['test_auc']:.4f} ({time.process_time() - clock:.0f} s CPU)"
        )


if __name__ == "__main__":
    main()
