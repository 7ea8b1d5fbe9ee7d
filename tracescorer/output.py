"""Printing query results: an aligned table that fits the terminal, CSV, a JSON array, JSON lines.

``json`` prints one JSON array of objects and ``jsonl`` one object per line (DuckDB's CLI
conventions for ``json`` and ``jsonlines``). Tables fit the terminal width (120 columns when
the output is not a terminal): the widest columns are shortened with ``…``, and columns named
in ``wrap`` (reasons) are wrapped over several lines instead, so nothing at their end is lost;
on a terminal too narrow to give them a useful width they are folded below their row, over
the whole width. ``wide=True`` prints every cell in full on one line.

Every command prints times one way in tables, :func:`stamp` (``2025-01-31 14:05:09Z``, UTC to
the second: ``--since`` takes it back); JSON and CSV keep ISO 8601 with the full precision.
An empty cell is ``-``.
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
_ID_WIDTH = 64  # ids (id, *_id, run, trace, target...) are kept whole up to this: they are copied into commands
_FOLD_BELOW = 30  # a wrapped column narrower than this is folded below its row instead
_FOLD_INDENT = 4
EMPTY = "-"
STAMP = "%Y-%m-%d %H:%M:%SZ"


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


def stamp(value: dt.datetime | str | None) -> str:
    """A time as every table shows it: UTC to the second, ``2025-01-31 14:05:09Z`` (ISO 8601
    text is read first, as the daemon's query endpoint sends times); ``-`` for none. A time
    without a zone is shown as it is, without the ``Z``."""
    if value is None:
        return EMPTY
    when = value if isinstance(value, dt.datetime) else dt.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    if when.tzinfo is None:
        return when.strftime(STAMP[:-1])
    return when.astimezone(dt.UTC).strftime(STAMP)


def _is_time_type(kind: str) -> bool:
    return kind.upper().startswith("TIMESTAMP")


def terminal_width() -> int:
    """The terminal's width, or :data:`DEFAULT_WIDTH` when stdout is not a terminal."""
    return shutil.get_terminal_size((DEFAULT_WIDTH, 24)).columns


def _text(value: Any, time: bool = False) -> str:
    if value is None:
        return EMPTY
    if isinstance(value, dt.datetime) or (time and isinstance(value, str)):
        try:
            return stamp(value)
        except ValueError:
            pass  # not a time after all: shown as it is
    text = json.dumps(value, ensure_ascii=False) if isinstance(value, (dict, list)) else str(value)
    return text.replace("\r", "").replace("\n", "\\n")


_ID_NAMES = frozenset({"id", "run", "trace", "conversation", "score", "target"})


def _is_id(column: str) -> bool:
    return column in _ID_NAMES or column.endswith("_id")


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
    types: Sequence[str] | None = None,
) -> str:
    """An aligned text table with a row count, fitted to ``width`` (default: the terminal).

    ``types`` (the query's column types) marks time columns whose cells arrive as text. When
    the ``wrap`` columns would get fewer than 30 characters they are folded below each row
    (``reason: ...``, wrapped over the whole width); when even the narrowest cells of the other
    columns do not fit, the last columns are left out and a note names them; ``wide=True``
    prints every column and every cell in full.
    """
    kinds = list(types or ())
    times = [i < len(kinds) and _is_time_type(str(kinds[i])) for i in range(len(columns))]
    texts = [[_text(v, times[i]) for i, v in enumerate(row)] for row in rows]
    total = width or terminal_width()
    folded: list[int] = []
    if not wide and wrap and texts:
        shown, widths = _layout(columns, texts, total, wrap)
        if any(
            c in wrap and (i >= shown or widths[i] < min(_FOLD_BELOW, max(len(r[i]) for r in texts)))
            for i, c in enumerate(columns)
        ):
            folded = [i for i, c in enumerate(columns) if c in wrap]
    kept = [i for i in range(len(columns)) if i not in folded]
    k_columns = [columns[i] for i in kept]
    k_rows = [[row[i] for i in kept] for row in rows]
    k_texts = [[row[i] for i in kept] for row in texts]
    if wide:
        shown, widths = len(k_columns), [max([len(c)] + [len(r[i]) for r in k_texts]) for i, c in enumerate(k_columns)]
    else:
        shown, widths = _layout(k_columns, k_texts, total, () if folded else wrap)
    if folded:  # columns that do not fit go below the row too, before the wrapped ones
        folded = kept[shown:] + folded
    numeric = [
        any(row[i] is not None for row in k_rows)
        and all(
            isinstance(row[i], (int, float, decimal.Decimal)) and not isinstance(row[i], bool)
            for row in k_rows
            if row[i] is not None
        )
        for i in range(len(k_columns))
    ]
    wrapped = [not wide and not folded and c in wrap for c in k_columns]

    def line(values: Sequence[str]) -> str:
        cells = [v.rjust(w) if num else v.ljust(w) for v, w, num in zip(values, widths, numeric, strict=False)]
        return (" " * _GAP).join(cells).rstrip()

    out = [
        line([_cut(c, w) for c, w in zip(k_columns, widths, strict=False)]),
        (" " * _GAP).join("-" * w for w in widths),
    ]
    for r, row in enumerate(k_texts):
        cells: list[list[str]] = []
        for i, text in enumerate(row[:shown]):
            if wrapped[i] and len(text) > widths[i]:
                cells.append(textwrap.wrap(text, widths[i], break_on_hyphens=False) or [""])
            else:
                cells.append([text if wide else _cut(text, widths[i])])
        for n in range(max((len(c) for c in cells), default=1)):
            out.append(line([c[n] if n < len(c) else "" for c in cells]))
        for i in folded:
            indent = " " * _FOLD_INDENT
            out.extend(
                textwrap.wrap(
                    f"{columns[i]}: {texts[r][i]}",
                    max(20, total - _FOLD_INDENT),
                    initial_indent=indent,
                    subsequent_indent=indent,
                    break_on_hyphens=False,
                )
            )
    out.append(f"({len(rows)} row{'s' if len(rows) != 1 else ''})")
    if shown < len(k_columns) and not folded:
        hidden = list(k_columns[shown:])
        note = f"({len(hidden)} more column(s) not shown: {', '.join(hidden)}; --wide shows all)"
        out.extend(textwrap.wrap(note, total))
    return "\n".join(out)


def _layout(
    columns: Sequence[str],
    texts: Sequence[Sequence[str]],
    total: int,
    wrap: Collection[str],
) -> tuple[int, list[int]]:
    """How many columns fit in ``total`` characters, and their widths: short cells (times,
    statuses, names, ids) stay whole, long free text gives way first, ``wrap`` columns take
    what the others leave."""
    widths = [max([len(c)] + [len(r[i]) for r in texts]) for i, c in enumerate(columns)]
    wrapped = [c in wrap for c in columns]
    natural = [n if wrapped[i] else min(n, _MAX_CELL) for i, n in enumerate(widths)]
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
    shown = len(columns)
    while shown > 1 and sum(floor[:shown]) + _GAP * (shown - 1) > total:
        shown -= 1
    budget = total - _GAP * (shown - 1)
    if any(wrapped[:shown]):
        natural = [n if wrapped[i] else max(floor[i], min(n, _SHORT_CELL)) for i, n in enumerate(natural)]
        rest = budget - sum(n for i, n in enumerate(natural[:shown]) if not wrapped[i])
        share = max(rest // sum(wrapped[:shown]), 0)
        natural = [min(n, max(share, floor[i])) if wrapped[i] else n for i, n in enumerate(natural)]
    return shown, _fit(natural[:shown], floor[:shown], budget)


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
