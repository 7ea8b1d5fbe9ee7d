"""What a person writes as a label: values, times, targets, files."""

from __future__ import annotations

import pytest

from tracescorer.calibration import labelfile
from tracescorer.calibration.labelling import LabelError, parse_target, parse_time, parse_value


def test_values_are_pass_fail_numbers_or_free_labels():
    assert parse_value("PASS") == ("pass", None) and parse_value("no") == ("fail", None)
    assert parse_value(True) == ("pass", None) and parse_value(0) == (None, 0.0)
    assert parse_value(" 0.75 ") == (None, 0.75) and parse_value("relevant") == ("relevant", None)
    for bad in (None, " ", "nan", float("inf"), "x" * 201):
        with pytest.raises(LabelError):
            parse_value(bad)


def test_times_are_iso_or_epoch_seconds_utc_when_no_zone():
    assert parse_time("2025-01-02T03:04:05Z") == parse_time("2025-01-02T03:04:05") == 1735787045.0
    assert parse_time(1735787045) == parse_time("1735787045") == 1735787045.0
    assert parse_time(None, now=5.0) == 5.0
    with pytest.raises(LabelError, match="not an ISO 8601 time"):
        parse_time("yesterday")


def test_targets_name_their_kind_or_are_bare():
    assert parse_target("run:abc") == ("run", "abc") and parse_target("conv:c1") == ("conversation", "c1")
    assert parse_target("Trace: ABC ") == ("trace", "ABC") and parse_target("abc") == (None, "abc")
    assert parse_target("weird:id") == (None, "weird:id")


def test_label_files_round_trip_and_name_their_lines(tmp_path):
    rows = [{"target": "run:r1", "scorer": "s", "value": "", "judge_score": 0.5, "excerpt": 'a "quote", b'}]
    for name in ("q.csv", "q.jsonl"):
        path = str(tmp_path / name)
        labelfile.write(path, rows)
        read, where = labelfile.read(path)
        assert read[0]["target"] == "run:r1" and read[0]["excerpt"] == 'a "quote", b'
        assert where(0) == (f"{name}:2" if name.endswith(".csv") else f"{name}:1")
    (tmp_path / "bad.csv").write_text("target,value\nrun:r1,pass\n")
    with pytest.raises(LabelError, match="the header has no scorer column"):
        labelfile.read(str(tmp_path / "bad.csv"))
    (tmp_path / "bad.jsonl").write_text('{"target": "run:r1"}\n\nnot json\n')
    with pytest.raises(LabelError, match=r"bad\.jsonl:3: not JSON"):
        labelfile.read(str(tmp_path / "bad.jsonl"))
