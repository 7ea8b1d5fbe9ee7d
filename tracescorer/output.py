"""Printing query results: an aligned table that fits the terminal, CSV, a JSON array, JSON lines.

``json`` prints one JSON array of objects and ``jsonl`` one object per line (DuckDB's CLI
conventions for ``json`` and ``jsonlines``). Tables fit the terminal width (120 columns when
the output is not a terminal): the widest columns are shortened with ``…``, and columns named
in ``wrap`` (reasons) are wrapped over several lines instead, so nothing at their end is lost.
``wide=True`` prints every cell in full on one line.
"""

from __future__ import annotations

import csv
import datetime as dt
import decimal
import io
import json
import shutil
import textwrap
import uuid
from collections.abc import Callable, Collection, Sequence
from typing import Any

DEFAULT_WIDTH = 120
_GAP = 2
_MIN_WIDTH = 8
_KEEP_WHOLE = 20  # columns up to this width are not shortened; longer ones give way
_MAX_CELL = 80  # one cell in a fitted table (wrapped columns excepted)
_SHORT_CELL = 28  # the other cells of a table with a wrapped column
_ID_WIDTH = 36  # ids (columns named id or *_id) are kept whole up to this: they are copied into commands


def jsonable(value: Any) -> Any:
    """DuckDB result values as JSON-friendly data (timestamps ISO 8601, decimals as numbers)."""
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    if isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, (bytes, bytearray)):
        return value.hex()
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    return value


def terminal_width() -> int:
    """The terminal's width, or :data:`DEFAULT_WIDTH` when stdout is not a terminal."""
    return shutil.get_terminal_size((DEFAULT_WIDTH, 24)).columns


def _text(value: Any) -> str:
    if value is None:
        return "NULL"
    text = json.dumps(value, ensure_ascii=False) if isinstance(value, (dict, list)) else str(value)
    return text.replace("\r", "").replace("\n", "\\n")


def _is_id(column: str) -> bool:
    return column == "id" or column.endswith("_id")


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(0, width - 1)] + "…"


def _fit(natural: list[int], floor: list[int], budget: int) -> list[int]:
    """Column widths summing to at most ``budget`` where the floors allow: the widest column
    gives way first, none below its ``floor``."""
    widths = list(natural)
    while sum(widths) > budget:
        shrinkable = [i for i in range(len(widths)) if widths[i] > floor[i]]
        if not shrinkable:
            break
        widths[max(shrinkable, key=lambda i: widths[i])] -= 1
    return widths


def format_table(
    columns: Sequence[str],
    rows: Sequence[Sequence[Any]],
    *,
    width: int | None = None,
    wide: bool = False,
    wrap: Collection[str] = (),
) -> str:
    """An aligned text table with a row count, fitted to ``width`` (default: the terminal).

    When even the narrowest cells do not fit, the last columns are left out and a note names
    them; ``wide=True`` prints every column and every cell in full.
    """
    texts = [[_text(v) for v in row] for row in rows]
    numeric = [
        any(row[i] is not None for row in rows)
        and all(
            isinstance(row[i], (int, float, decimal.Decimal)) and not isinstance(row[i], bool)
            for row in rows
            if row[i] is not None
        )
        for i in range(len(columns))
    ]
    shown = len(columns)
    wrapped = [not wide and c in wrap for c in columns]
    widths = [max([len(c)] + [len(r[i]) for r in texts]) for i, c in enumerate(columns)]
    if not wide:
        natural = [n if wrapped[i] else min(n, _MAX_CELL) for i, n in enumerate(widths)]
        # short cells (times, statuses, names) stay whole; long free text gives way first
        floor = [
            min(n, 20)
            if wrapped[i]
            else min(n, _ID_WIDTH)
            if _is_id(c)
            else n
            if n <= _KEEP_WHOLE
            else max(_MIN_WIDTH, min(len(c), 12))
            for i, (n, c) in enumerate(zip(natural, columns, strict=False))
        ]
        total = width or terminal_width()
        while shown > 1 and sum(floor[:shown]) + _GAP * (shown - 1) > total:
            shown -= 1
        budget = total - _GAP * (shown - 1)
        if any(wrapped[:shown]):
            # wrapped columns (reasons) take what the others leave, the others kept short
            natural = [n if wrapped[i] else max(floor[i], min(n, _SHORT_CELL)) for i, n in enumerate(natural)]
            rest = budget - sum(n for i, n in enumerate(natural[:shown]) if not wrapped[i])
            share = max(rest // sum(wrapped[:shown]), 0)
            natural = [min(n, max(share, floor[i])) if wrapped[i] else n for i, n in enumerate(natural)]
        widths = _fit(natural[:shown], floor[:shown], budget)

    def line(values: Sequence[str]) -> str:
        cells = [v.rjust(w) if num else v.ljust(w) for v, w, num in zip(values, widths, numeric, strict=False)]
        return (" " * _GAP).join(cells).rstrip()

    out = [
        line([_cut(c, w) for c, w in zip(columns, widths, strict=False)]),
        (" " * _GAP).join("-" * w for w in widths),
    ]
    for row in texts:
        cells: list[list[str]] = []
        for i, text in enumerate(row[:shown]):
            if wrapped[i] and len(text) > widths[i]:
                cells.append(textwrap.wrap(text, widths[i], break_on_hyphens=False) or [""])
            else:
                cells.append([text if wide else _cut(text, widths[i])])
        for n in range(max((len(c) for c in cells), default=1)):
            out.append(line([c[n] if n < len(c) else "" for c in cells]))
    out.append(f"({len(rows)} row{'s' if len(rows) != 1 else ''})")
    if shown < len(columns):
        hidden = list(columns[shown:])
        note = f"({len(hidden)} more column(s) not shown: {', '.join(hidden)}; --wide shows all)"
        out.extend(textwrap.wrap(note, width or terminal_width()))
    return "\n".join(out)


def format_csv(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow(
            ["" if v is None else json.dumps(jsonable(v)) if isinstance(v, (dict, list)) else jsonable(v) for v in row]
        )
    return buf.getvalue().rstrip("\n")


def _objects(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[dict[str, Any]]:
    return [dict(zip(columns, (jsonable(v) for v in row), strict=False)) for row in rows]


def format_json(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """One JSON array of objects (``[]`` for no rows)."""
    lines = [json.dumps(obj, ensure_ascii=False) for obj in _objects(columns, rows)]
    return "[" + ",\n".join(lines) + "]"


def format_jsonl(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """One JSON object per line (nothing for no rows)."""
    return "\n".join(json.dumps(obj, ensure_ascii=False) for obj in _objects(columns, rows))


Formatter = Callable[[Sequence[str], Sequence[Sequence[Any]]], str]
FORMATS: dict[str, Formatter] = {"table": format_table, "csv": format_csv, "json": format_json, "jsonl": format_jsonl}
