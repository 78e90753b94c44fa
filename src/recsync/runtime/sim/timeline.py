"""A long job's timeline under node losses: what checkpoint intervals and recovery policies
cost over days of training, at any number of nodes.

The real-math simulator (faulty.py) cannot run a job for days of virtual time at a thousand
workers; this runs only its timeline, from what the real-math simulator measures of the job
(its examples per second when nothing fails, the seconds a cut pauses it): training
progresses at that rate; a cut every `interval_s` of training pauses it `cut_s`; nodes are
lost at exponential times (each node of `counts[role]` with mean `mtbf_s[role]`); a loss
costs `detect_s + restart_s`, and then, by the role's action:

- `rollback` (recsync's): the job goes back to its last cut, and the training since is
  done again (replayed);
- `partial` (CPR, Maeng et al. MLSys 2021, for embedding servers; not in recsync's engine):
  only the lost shard is restored from the last cut, the others go on: no training is done
  again, but the updates the shard received since the cut are lost, and the job waits for
  the shard's restart (lost updates are counted as examples trained since the cut);
- for a trainer under `partial`: the trainer restarts while the others go on (the job runs
  at (n - 1) / n of its rate meanwhile) and only its batches in flight are lost.

Losses during a detection, a restart or a cut's pause are drawn anew after it (memoryless).
Deterministic from the seed.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass


@dataclass(frozen=True)
class Timeline:
    """What a job's timeline is made of (seconds)."""

    work_s: float  # training time with no loss and no cut
    interval_s: float  # training between cuts (inf: none)
    cut_s: float  # a cut's pause
    detect_s: float
    restart_s: float
    counts: dict[str, int]  # nodes by role
    mtbf_s: dict[str, float]  # mean time between losses of one node, by role (0: never)
    actions: dict[str, str]  # "rollback" or "partial", by role

    def __post_init__(self) -> None:
        if not (self.work_s > 0 and self.interval_s > 0):
            raise ValueError("work_s and interval_s must be > 0")
        for role, action in self.actions.items():
            if action not in ("rollback", "partial"):
                raise ValueError(f"{role}: action must be rollback or partial, got {action!r}")

    @property
    def loss_rate(self) -> float:
        """Losses per second of the whole job."""
        return sum(n / self.mtbf_s[r] for r, n in self.counts.items() if self.mtbf_s.get(r))


@dataclass
class TimelineResult:
    """One run of a timeline: seconds it took, losses, training seconds done again, and
    training seconds whose updates of a lost shard were lost."""

    seconds: float
    losses: int
    replayed_s: float
    lost_s: float
    cuts: int

    def overhead(self, work_s: float) -> float:
        """Time beyond the work itself, as a fraction of it."""
        return self.seconds / work_s - 1.0


def run_timeline(timeline: Timeline, seed: int) -> TimelineResult:
    """One random timeline (see the module's docstring)."""
    rng = random.Random(seed)
    rate = timeline.loss_rate
    roles = [r for r, n in timeline.counts.items() if n and timeline.mtbf_s.get(r)]
    weights = [timeline.counts[r] / timeline.mtbf_s[r] for r in roles]

    def next_loss(now: float) -> float:
        return now + rng.expovariate(rate) if rate else math.inf

    now, done, last_cut = 0.0, 0.0, 0.0
    result = TimelineResult(0.0, 0, 0.0, 0.0, 0)
    loss_at = next_loss(now)
    work, interval = timeline.work_s, timeline.interval_s
    while done < work:
        step = min(last_cut + interval, work) - done  # training until the next cut, or the end
        if now + step <= loss_at:
            now, done = now + step, done + step
            if done >= work:
                break
            if now + timeline.cut_s > loss_at:  # lost during the cut: not taken
                now = loss_at
            else:
                now, last_cut = now + timeline.cut_s, done
                result.cuts += 1
                continue
        else:
            done += loss_at - now
            now = loss_at
        role = rng.choices(roles, weights)[0]
        result.losses += 1
        stalled = timeline.detect_s + timeline.restart_s
        action = timeline.actions.get(role, "rollback")
        if action == "rollback":
            result.replayed_s += done - last_cut
            done = last_cut
        elif role == "trainer":
            trainers = timeline.counts["trainer"]
            done += stalled * (trainers - 1) / trainers  # the others go on meanwhile
        else:
            result.lost_s += done - last_cut
        now += stalled
        loss_at = next_loss(now)
    result.seconds = now
    return result


def young_daly(cut_s: float, mtbf_s: float, restart_s: float = 0.0) -> tuple[float, float]:
    """The checkpoint intervals Young (1974) and Daly (2006) derive for a job with a mean
    time between failures `mtbf_s`: sqrt(2 C M), and sqrt(2 C (M + R)) - C (for C < 2M)."""
    young = math.sqrt(2 * cut_s * mtbf_s)
    daly = math.sqrt(2 * cut_s * (mtbf_s + restart_s)) - cut_s if cut_s < 2 * mtbf_s else mtbf_s
    return young, daly
