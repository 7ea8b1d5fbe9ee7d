"""Printing query results: aligned table, CSV or JSON lines."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from typing import Any

from tracescorer.api import jsonable

_MAX_CELL = 80


def _cell(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, (dict, list)):
        text = json.dumps(value, ensure_ascii=False)
    else:
        text = str(value)
    text = text.replace("\n", "\\n")
    return text if len(text) <= _MAX_CELL else text[: _MAX_CELL - 1] + "…"


def format_table(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    cells = [[_cell(v) for v in row] for row in rows]
    widths = [len(c) for c in columns]
    for row in cells:
        widths = [max(w, len(v)) for w, v in zip(widths, row)]
    numeric = [
        all(isinstance(row[i], (int, float)) and not isinstance(row[i], bool) for row in rows if row[i] is not None)
        and any(row[i] is not None for row in rows)
        for i in range(len(columns))
    ]

    def line(values: Sequence[str]) -> str:
        return "  ".join(v.rjust(w) if num else v.ljust(w) for v, w, num in zip(values, widths, numeric)).rstrip()

    out = [line(list(columns)), "  ".join("-" * w for w in widths)]
    out.extend(line(row) for row in cells)
    out.append(f"({len(rows)} row{'s' if len(rows) != 1 else ''})")
    return "\n".join(out)


def format_csv(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow(
            ["" if v is None else json.dumps(v) if isinstance(v, (dict, list)) else v for v in row]
        )
    return buf.getvalue().rstrip("\n")


def format_json(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    return "\n".join(json.dumps(dict(zip(columns, (jsonable(v) for v in row))), ensure_ascii=False) for row in rows)


FORMATS = {"table": format_table, "csv": format_csv, "json": format_json}
