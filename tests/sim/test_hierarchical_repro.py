"""The hierarchical reproduction's throughput points: its 314.7 MB dense part runs in priced
math in little memory, on the NICs its setting names."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from experiments.repro import hierarchical_settings as ht
from experiments.repro.hierarchical_settled import model_params

LARGE_POINT = """
import resource, sys
from experiments.repro import hierarchical, hierarchical_settings as ht
hierarchical.ITERATIONS_PER_THREAD = 1  # memory, not speed: no steady window is needed
hierarchical.check_steady = lambda summary, where: summary["eps_steady"]
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
slow = ht.ht(1, 2, bandwidth_bytes_s=ht.LOW_BANDWIDTH_BYTES_S)
rows = [hierarchical.throughput(s) for s in (ht.ht(1, 2), slow, ht.EASGD_SMALL)]
grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
cells = (f"{r['eps_whole_run']:.6g},{r['examples']},{r['group_ps_nic']}" for r in rows)
print(grown // 1024, *cells)
"""


def test_the_large_dense_part_is_several_hundred_mb():
    assert 250e6 < 4 * model_params(ht.LARGE_MODEL) < 1e9
    assert ht.THROUGHPUT_MATH == "priced"


def test_a_large_dense_priced_point_runs_in_little_memory():
    """One group of 2 trainers + 2 group PSs at 25 and at 1 Gbit/s, and EASGD on 4
    trainers, of the 314.7 MB dense part, one batch a worker thread: real math would hold
    629 MB a replica with Adagrad's state (EASGD 4t: five of them, over 3 GB); priced grew
    the process by 159 MB over the imports' 401 (measured 2026-11-29), less than one
    replica."""
    small = "ht.EASGD_SMALL = ht.Setting('EASGD 4t', 0)\nht.EASGD_TRAINERS = 4\n"
    script = LARGE_POINT.replace("before = ", small + "before = ", 1)
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    grown, *rows = done.stdout.split()
    fast, slow, easgd = (row.split(",") for row in rows)
    assert int(grown) < 400, f"priced points grew the process by {grown} MB"
    assert fast[1] == slow[1] == str(2 * ht.CORES * ht.BATCH)  # 2 trainers, 1 batch a thread
    assert float(slow[0]) < float(fast[0])  # the NICs are in the times
    assert float(slow[2]) > float(fast[2]) > 0  # and busier where slower
    assert easgd[1] == str(4 * ht.CORES * ht.BATCH) and easgd[2] == "None"
