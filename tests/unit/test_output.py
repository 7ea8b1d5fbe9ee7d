"""Tables of the read commands: one time format whatever the query path gave (datetimes from the
file, ISO text from the daemon), `-` for an empty cell, and reasons folded below their row on a
terminal too narrow for them, never dropped."""

from __future__ import annotations

import datetime as dt

from tracescorer.output import format_csv, format_table, stamp

WHEN = dt.datetime(2025, 1, 31, 14, 5, 9, 123456, tzinfo=dt.UTC)
REASON = "The assistant answered both questions, gave the delivery date and confirmed the address change. [tag]"


def test_one_time_format_from_either_query_path():
    paris = WHEN.astimezone(dt.timezone(dt.timedelta(hours=1)))
    assert stamp(WHEN) == stamp(paris) == stamp(WHEN.isoformat()) == stamp("2025-01-31T14:05:09.5Z")
    assert stamp(WHEN) == "2025-01-31 14:05:09Z" and stamp(None) == "-"
    assert stamp(dt.datetime(2025, 1, 31, 14, 5, 9)) == "2025-01-31 14:05:09"  # no zone: no Z
    offline = format_table(["at", "label"], [[WHEN, None]])
    daemon = format_table(["at", "label"], [[WHEN.isoformat(), None]], types=["TIMESTAMP WITH TIME ZONE", "VARCHAR"])
    assert offline == daemon and "2025-01-31 14:05:09Z  -" in offline and "NULL" not in offline
    text = format_table(["note"], [["2025-01-31 is not a time column"]], types=["VARCHAR"])
    assert "2025-01-31 is not a time column" in text
    assert format_csv(["at", "x"], [[WHEN, None]]).splitlines()[1] == "2025-01-31T14:05:09.123456+00:00,"


def test_a_narrow_table_folds_the_reason_below_the_row():
    columns = ["scored", "scorer", "score", "verdict", "target", "reason"]
    rows = [
        [WHEN, "conversation-judge", 1.0, "pass", "conv conv-first-hour", REASON],
        [WHEN, "non-empty", None, "error", "run 1a2b3c4d5e6f", "boom"],
    ]
    wide = format_table(columns, rows, width=200, wrap=("reason",))
    assert wide.splitlines()[0].split() == columns and REASON in " ".join(wide.split())
    narrow = format_table(columns, rows, width=80, wrap=("reason",))
    lines = narrow.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert lines[0].split() == columns[:-1]  # the reason is no column ...
    assert lines[3].startswith("    reason: The assistant answered both questions")
    assert " ".join(narrow.split()).count(REASON) == 1  # ... but folded below its row, whole
    assert "    reason: boom" in lines and "not shown" not in narrow
    tiny = format_table(columns, rows, width=40, wrap=("reason",))
    assert max(len(line) for line in tiny.splitlines()) <= 40
    assert "    target: conv conv-first-hour" in tiny.splitlines()  # columns that do not fit fold too
    assert "not shown" not in tiny


def test_ids_are_kept_whole_and_columns_that_do_not_fit_are_named():
    trace = "4bf92f3577b34da6a3ce929d0e0e4736"
    out = format_table(["trace_id", "input", "output"], [[trace, "x" * 200, "y" * 200]], width=50)
    assert trace in out and "more column(s) not shown: output" in " ".join(out.split())
