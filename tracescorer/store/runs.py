"""AgentRun <-> ``runs`` table rows, for both engines (plain data both ways)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tracescorer.model import AgentRun, Message, Part, ToolCall, nanos_to_rfc3339
from tracescorer.store.jsonvalue import dumps, loads
from tracescorer.store.schema import RUN_COLUMNS

#: The run columns a writer sets (the store stamps ``created_at`` and ``updated_at``).
DATA_COLUMNS = [name for name, _ in RUN_COLUMNS if name not in ("created_at", "updated_at")]

RUN_SELECT = f"SELECT {', '.join(name for name, _ in RUN_COLUMNS)} FROM runs"


def _messages(msgs: Sequence[Message]) -> str:
    return dumps([m.to_dict() for m in msgs])


def run_to_row(run: AgentRun) -> list[Any]:
    """The values of one run, in ``runs`` column order (without the timestamps set by SQL)."""
    values: dict[str, Any] = {
        "run_id": run.run_id,
        "trace_id": run.trace_id,
        "span_id": run.span_id,
        "parent_span_id": run.parent_span_id,
        "conversation_id": run.conversation_id,
        "resource_id": run.resource_id,
        "agent_name": run.agent_name,
        "agent_id": run.agent_id,
        "service_name": run.service_name,
        "convention": run.convention,
        "model": run.model,
        "started_at": run.started_at // 1000,
        "ended_at": run.ended_at // 1000,
        "started_at_unix_nano": run.started_at,
        "ended_at_unix_nano": run.ended_at,
        "status": run.status,
        "error": run.error,
        "input_messages": _messages(run.input_messages),
        "remembered_messages": _messages(run.remembered_messages),
        "system_messages": _messages(run.system_messages),
        "tagged_system_messages": dumps(
            {tag: [m.to_dict() for m in msgs] for tag, msgs in run.tagged_system_messages.items()}
        ),
        "output": _messages(run.output),
        "tool_calls": dumps([t.to_dict() for t in run.tool_calls]),
        "usage": None if run.usage is None else dumps(run.usage),
        "attributes": dumps(run.attributes),
        "incomplete": bool(run.attributes.get("tracescorer.incomplete", False)),
    }
    return [values[c] for c in DATA_COLUMNS]


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


def run_from_row(row: Sequence[Any]) -> AgentRun:
    """Rebuild an :class:`AgentRun` from a :data:`RUN_SELECT` row."""
    r = dict(zip((name for name, _ in RUN_COLUMNS), row, strict=False))
    return AgentRun(
        run_id=r["run_id"],
        trace_id=r["trace_id"],
        span_id=r["span_id"],
        parent_span_id=r["parent_span_id"],
        conversation_id=r["conversation_id"],
        resource_id=r["resource_id"],
        agent_name=r["agent_name"],
        agent_id=r["agent_id"],
        service_name=r["service_name"],
        convention=r["convention"],
        model=r["model"],
        started_at=r["started_at_unix_nano"],
        ended_at=r["ended_at_unix_nano"],
        status=r["status"],
        error=r["error"],
        input_messages=tuple(_message(m) for m in loads(r["input_messages"])),
        remembered_messages=tuple(_message(m) for m in loads(r["remembered_messages"])),
        system_messages=tuple(_message(m) for m in loads(r["system_messages"])),
        tagged_system_messages={
            tag: tuple(_message(m) for m in msgs) for tag, msgs in loads(r["tagged_system_messages"]).items()
        },
        output=tuple(_message(m) for m in loads(r["output"])),
        tool_calls=tuple(ToolCall(**t) for t in loads(r["tool_calls"])),
        usage=loads(r["usage"]),
        attributes=loads(r["attributes"]),
    )


__all__ = ["DATA_COLUMNS", "RUN_SELECT", "nanos_to_rfc3339", "run_from_row", "run_to_row"]
