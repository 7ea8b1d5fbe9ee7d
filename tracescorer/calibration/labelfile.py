"""Label files: CSV or JSON lines, read for ``tracescorer label --import`` and written by
``tracescorer label-queue``.

A row has ``target``, ``scorer``, ``value`` and optionally ``by``, ``note``, ``at``; any other
column (a queue file's context: the judge's score and reason, a transcript excerpt) is carried
along and ignored on import. The format follows the file name (``.csv``; ``.jsonl``/``.ndjson``/
``.json``), else the content (a first character ``{`` is JSON lines).
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from tracescorer.calibration.labelling import LabelError

#: the columns a reviewer fills in, first in a queue file
LABEL_COLUMNS = ("target", "scorer", "value", "by", "note", "at")
FORMATS = ("csv", "jsonl")
MAX_FILE_BYTES = 64 * 1024 * 1024


def file_format(path: str, text: str | None = None) -> str:
    """``csv`` or ``jsonl`` for a file name (and its content when the name does not say)."""
    suffix = Path(path).suffix.lower()
    if suffix == ".csv":
        return "csv"
    if suffix in (".jsonl", ".ndjson", ".json"):
        return "jsonl"
    return "jsonl" if text is not None and text.lstrip().startswith("{") else "csv"


def read(path: str) -> tuple[list[dict[str, Any]], Callable[[int], str]]:
    """The rows of a label file and a function naming row ``i`` (``file:line``); raises
    LabelError for a file that cannot be read or parsed."""
    try:
        size = Path(path).stat().st_size
        if size > MAX_FILE_BYTES:
            raise LabelError(f"{path}: {size} bytes; import at most {MAX_FILE_BYTES} bytes at a time (split the file)")
        text = Path(path).read_text(encoding="utf-8-sig")
    except OSError as exc:
        raise LabelError(f"cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise LabelError(f"{path} is not UTF-8 text: {exc}") from None
    name = Path(path).name
    if file_format(path, text) == "jsonl":
        rows, lines = [], []
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError as exc:
                raise LabelError(f"{name}:{number}: not JSON: {exc}") from None
            if not isinstance(row, dict):
                raise LabelError(f"{name}:{number}: expected a JSON object per line")
            rows.append(row)
            lines.append(number)
        return rows, lambda i: f"{name}:{lines[i]}"
    reader = csv.DictReader(io.StringIO(text))
    missing = [c for c in ("target", "scorer", "value") if c not in (reader.fieldnames or [])]
    if missing:
        raise LabelError(f"{name}: the header has no {', '.join(missing)} column (columns: {', '.join(LABEL_COLUMNS)})")
    rows = [{k: v for k, v in row.items() if k is not None} for row in reader]
    return rows, lambda i: f"{name}:{i + 2}"  # line 1 is the header


def render(rows: Sequence[Mapping[str, Any]], fmt: str) -> str:
    """Rows (the label columns first, then the others in order) as CSV or JSON lines."""
    columns = list(LABEL_COLUMNS)
    for row in rows:
        columns += [c for c in row if c not in columns]
    out = io.StringIO()
    if fmt == "csv":
        writer = csv.DictWriter(out, fieldnames=columns, extrasaction="ignore", lineterminator="\n")
        writer.writeheader()
        for row in rows:
            writer.writerow({c: _cell(row.get(c)) for c in columns})
    else:
        for row in rows:
            out.write(json.dumps({c: row.get(c) for c in columns}, ensure_ascii=False, default=str) + "\n")
    return out.getvalue()


def write(path: str, rows: Sequence[Mapping[str, Any]], fmt: str | None = None) -> str:
    """Write :func:`render` to ``path`` (replaced whole); returns the format written."""
    chosen = fmt or file_format(path)
    target = Path(path)
    tmp = target.with_name(target.name + ".tmp")
    try:
        tmp.write_text(render(rows, chosen), encoding="utf-8")
        tmp.replace(target)
    except OSError as exc:
        raise LabelError(f"cannot write {path}: {exc.strerror or exc}") from None
    return chosen


def _cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, (dict, list)):
        return json.dumps(value, ensure_ascii=False)
    return value
