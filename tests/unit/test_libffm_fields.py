"""A libffm file's number of fields is read from its first lines when model.num_tables is
not set (and recorded in the config); a later line with a larger field is skipped, or
stops a strict run, naming the file, the line and what to set."""

from __future__ import annotations

import pytest

from recsync.app.config.load import load_config
from recsync.errors import ConfigError, DataError
from recsync.io import libffm_fields as fields_module
from recsync.io.libffm_fields import libffm_fields
from recsync.io.readers import open_dataset

LINES = [
    "1 0:0:2.5 1:7:1 2:3:1 2:9:1",
    "0 0:0:0.7 1:4:1 3:12:1 # a comment 9:9:9",
    "-1 0:0:1.25 2:5:1 bad-token",
    "1 0:0:3.5 1:7:1",
]


def _file(tmp_path, lines: list[str], name: str = "clicks.ffm"):
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    return path


def _keys(path, **more: object) -> dict[str, object]:
    return {"data.source": "libffm", "data.path": str(path), "data.test_fraction": 0.2, **more}


def test_the_fields_and_which_look_dense_are_read_from_the_lines(tmp_path):
    found = libffm_fields(_file(tmp_path, LINES))
    assert found.lines == 4 and found.num_fields == 4  # field 9 is in a comment
    assert found.fields[0].looks_dense()  # one index a line, values not 0/1
    assert not found.fields[2].looks_dense()  # two tokens on line 1
    assert (found.fields[1].lines, found.fields[3].lines) == (3, 1)


def test_a_run_with_no_num_tables_takes_the_fields_and_records_them(tmp_path):
    path = _file(tmp_path, LINES)
    config = load_config(overrides=_keys(path, **{"data.libffm.dense_fields": [0]}))
    assert config.model.num_tables == 3 and config.dump()["model"]["num_tables"] == 3
    spec = config.to_specs()
    assert spec.files is not None and spec.files.schema.num_fields == 4
    reader = open_dataset(path, "libffm", spec.files.schema, batch_size=8)
    batches = list(reader)  # line 3's bad token is the reader's to judge
    assert batches[0].batch_size == 3 and batches[0].num_features == 3
    assert reader.skips.counts == {"bad_token": 1}
    # a dense field past the fields the lines show counts too
    wider = load_config(overrides=_keys(path, **{"data.libffm.dense_fields": [6]}))
    assert wider.model.num_tables == 6
    # a set num_tables is kept
    assert load_config(overrides=_keys(path, **{"model.num_tables": 9})).model.num_tables == 9


def test_a_line_past_the_fields_seen_is_skipped_naming_it(tmp_path, monkeypatch):
    monkeypatch.setattr(fields_module, "SAMPLE_LINES", 2)
    path = _file(tmp_path, [LINES[0], LINES[1], LINES[3], "1 0:0:1.0 5:1:1"])
    config = load_config(overrides=_keys(path))
    assert config.model.num_tables == 4  # lines 1-2 show fields 0..3
    files = config.to_specs().files
    assert files is not None
    reader = open_dataset(path, "libffm", files.schema, batch_size=8)
    assert sum(b.batch_size for b in reader) == 3
    assert reader.skips.counts == {"bad_field": 1}
    first = reader.skips.first["bad_field"]
    assert "line 4" in first and "field 5 not in [0, 4)" in first and "model.num_tables" in first
    with pytest.raises(DataError, match=r"clicks.ffm, line 4.*field 5 not in"):
        list(open_dataset(path, "libffm", files.schema, batch_size=8, strict=True))


def test_a_file_with_no_field_token_says_what_to_set(tmp_path):
    path = _file(tmp_path, ["1 a b", "0"])
    with pytest.raises(ConfigError, match="no field:index:value token.*set it"):
        load_config(overrides=_keys(path))
