"""AgentRun <-> ``runs`` table rows, for both engines (plain data both ways)."""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Callable, Sequence
from typing import Any

from tracescorer.model import AgentRun, Message, Part, ToolCall, nanos_to_rfc3339
from tracescorer.store.jsonvalue import dumps, loads

Columns = tuple[tuple[str, str], ...]

# How a field of AgentRun is stored, by its type: (column type, to the column, from the column).
# A time (unix nanoseconds) is two columns: a TIMESTAMPTZ where it stands, and its exact
# ``*_unix_nano`` value after the last time (the order of the table since its first release).
_Codec = tuple[str, Callable[[Any], Any], Callable[[Any], Any]]


def _same(value: Any) -> Any:
    return value


def _part(d: dict[str, Any]) -> Part:
    known = {k: d.get(k) for k in ("content", "id", "name", "arguments", "response")}
    extra = {k: v for k, v in d.items() if k not in known and k != "type"}
    return Part(type=d.get("type", "text"), extra=extra, **known)


def _message(d: dict[str, Any]) -> Message:
    return Message(
        role=d["role"],
        content=d.get("content") or "",
        parts=tuple(_part(p) for p in d.get("parts", ())),
        name=d.get("name"),
        finish_reason=d.get("finish_reason"),
    )


def _messages_out(msgs: Sequence[Message]) -> str:
    return dumps([m.to_dict() for m in msgs])


def _messages_in(text: Any) -> tuple[Message, ...]:
    return tuple(_message(m) for m in loads(text))


def _tagged_out(tagged: dict[str, Sequence[Message]]) -> str:
    return dumps({tag: [m.to_dict() for m in msgs] for tag, msgs in tagged.items()})


def _tagged_in(text: Any) -> dict[str, tuple[Message, ...]]:
    return {tag: tuple(_message(m) for m in msgs) for tag, msgs in loads(text).items()}


def _calls_out(calls: Sequence[ToolCall]) -> str:
    return dumps([t.to_dict() for t in calls])


def _calls_in(text: Any) -> tuple[ToolCall, ...]:
    return tuple(ToolCall(**t) for t in loads(text))


def _json_out(value: Any) -> str | None:
    return None if value is None else dumps(value)


_TEXT: _Codec = ("VARCHAR", _same, _same)
_BY_TYPE: dict[Any, _Codec] = {
    str: _TEXT,
    str | None: _TEXT,
    tuple[Message, ...]: ("JSON", _messages_out, _messages_in),
    dict[str, tuple[Message, ...]]: ("JSON", _tagged_out, _tagged_in),
    tuple[ToolCall, ...]: ("JSON", _calls_out, _calls_in),
}
_KEY, _NOT_NULL = "run_id", ("trace_id",)


def _codec(name: str, kind: Any) -> _Codec:
    if kind in _BY_TYPE:
        return _BY_TYPE[kind]
    if any(typing.get_origin(k) is dict for k in (kind, *typing.get_args(kind))):
        return ("JSON", _json_out, loads)  # usage, attributes: plain JSON objects (or null)
    raise TypeError(f"AgentRun.{name}: no column type for {kind}")


_HINTS = typing.get_type_hints(AgentRun)
_FIELDS = [f.name for f in dataclasses.fields(AgentRun)]
_TIMES = [name for name in _FIELDS if _HINTS[name] is int]  # unix nanoseconds
_CODECS = {name: _codec(name, _HINTS[name]) for name in _FIELDS if name not in _TIMES}


def _run_columns() -> Columns:
    cols: list[tuple[str, str]] = []
    for name in _FIELDS:
        kind = "TIMESTAMPTZ" if name in _TIMES else _CODECS[name][0]
        cols.append(
            (name, f"{kind} PRIMARY KEY" if name == _KEY else f"{kind} NOT NULL" if name in _NOT_NULL else kind)
        )
        if name == _TIMES[-1]:
            cols += [(f"{t}_unix_nano", "UBIGINT") for t in _TIMES]
    return (
        *cols,
        ("incomplete", "BOOLEAN"),  # the run's trace was assembled without all its spans
        ("created_at", "TIMESTAMPTZ"),
        ("updated_at", "TIMESTAMPTZ"),
    )


#: The ``runs`` table: a column per AgentRun field (see the comment of ``_Codec``), then the stamps.
RUN_COLUMNS: Columns = _run_columns()

#: The run columns a writer sets (the store stamps ``created_at`` and ``updated_at``).
DATA_COLUMNS = [name for name, _ in RUN_COLUMNS if name not in ("created_at", "updated_at")]

RUN_SELECT = f"SELECT {', '.join(name for name, _ in RUN_COLUMNS)} FROM runs"


def run_to_row(run: AgentRun) -> list[Any]:
    """The values of one run, in ``runs`` column order (without the timestamps set by SQL)."""
    values: dict[str, Any] = {name: codec[1](getattr(run, name)) for name, codec in _CODECS.items()}
    for name in _TIMES:
        nanos = getattr(run, name)
        values[name] = nanos // 1000  # microseconds: the TIMESTAMPTZ (make_timestamp)
        values[f"{name}_unix_nano"] = nanos
    values["incomplete"] = bool(run.attributes.get("tracescorer.incomplete", False))
    return [values[c] for c in DATA_COLUMNS]


def run_from_row(row: Sequence[Any]) -> AgentRun:
    """Rebuild an :class:`AgentRun` from a :data:`RUN_SELECT` row."""
    r = dict(zip((name for name, _ in RUN_COLUMNS), row, strict=False))
    fields = {name: codec[2](r[name]) for name, codec in _CODECS.items()}
    return AgentRun(**fields, **{name: r[f"{name}_unix_nano"] for name in _TIMES})


__all__ = ["DATA_COLUMNS", "RUN_COLUMNS", "RUN_SELECT", "nanos_to_rfc3339", "run_from_row", "run_to_row"]
