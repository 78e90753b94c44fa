"""`recsync calibrate --data FILE`: the reader timed on the file, its format's price of an
example written into the profile at --out (its other costs kept)."""

from __future__ import annotations

import dataclasses

from test_cli import invoke
from test_reader_cost import FIELDS, write_libffm

from recsync.app.runs.cost_profile import profile_cost, profile_text, read_profile
from recsync.runtime.sim.cost import CostModel


def test_calibrate_data_prices_the_files_format_in_the_profile_it_updates(tmp_path):
    data = tmp_path / "train.ffm"
    write_libffm(data, 1_500)
    out = tmp_path / "profile.toml"
    machine = dataclasses.replace(CostModel(), worker_flops=3e9, shared_cpus=2)
    out.write_text(profile_text(machine))
    result = invoke(
        "calibrate", "--data", str(data), "--out", str(out), "--sample", "500",
        "--set", f"model.num_tables={FIELDS}",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "cost.file_example_s.libffm and cost.file_example_bytes.libffm: updated" in (
        " ".join(result.output.split())
    )
    cost = profile_cost(read_profile(out), "test")
    assert cost.file_example_s.libffm is not None and cost.file_example_s.libffm > 0
    assert (cost.worker_flops, cost.shared_cpus) == (3e9, 2)


def test_calibrate_data_names_a_file_that_is_not_there(tmp_path):
    out = str(tmp_path / "p.toml")
    result = invoke("calibrate", "--data", str(tmp_path / "none.ffm"), "--out", out)
    assert result.exit_code == 1 and "no such file" in result.output
