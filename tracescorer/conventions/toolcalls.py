"""A run's tool calls: the model's tool-call parts joined with tool execution spans and tool results."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tracescorer.conventions.base import (
    LlmCall,
    ToolExec,
)
from tracescorer.conventions.common import (
    unwrap_result,
)
from tracescorer.model import Message, ToolCall


def join_tool_calls(
    output: Sequence[Message], produced: Sequence[Message], main: Sequence[LlmCall], tools: list[ToolExec]
) -> list[ToolCall]:
    """Tool calls of the run: requested by the model, joined with executions and results."""
    found: dict[str, Any] | None = None

    def responses() -> dict[str, Any]:
        """Tool results in the run's messages by call id (looked up only when needed)."""
        nonlocal found
        if found is None:
            found = {}
            for msgs in [produced, *(c.input for c in main), output]:
                for m in msgs:
                    for p in m.parts:
                        if p.id and p.response is not None and p.type in ("tool_call_response", "tool_call"):
                            found.setdefault(p.id, p.response)
        return found

    requested = []
    seen_ids: set[str] = set()
    for m in output:
        for p in m.parts:
            if p.type != "tool_call" or not p.name:
                continue
            if p.id and p.id in seen_ids:
                continue
            if p.id:
                seen_ids.add(p.id)
            requested.append(p)

    unused = list(tools)
    out: list[ToolCall] = []
    for p in requested:
        match = match_exec(p.id, p.name or "", p.arguments, unused)
        if match is not None:
            unused.remove(match)
        result = unwrap_result(
            match.result if match is not None and match.result is not None else responses().get(p.id or "")
        )
        out.append(
            ToolCall(
                id=p.id or (match.id if match else None),
                name=p.name or "",
                arguments=p.arguments if p.arguments is not None else (match.arguments if match else None),
                result=result,
                error=match.error if match else None,
            )
        )
    for t in unused:  # executions the model output did not show (content off, or agent-side)
        out.append(
            ToolCall(
                id=t.id,
                name=t.name,
                arguments=t.arguments,
                result=unwrap_result(t.result if t.result is not None else responses().get(t.id or "")),
                error=t.error,
            )
        )
    return out


def match_exec(call_id: str | None, name: str, args: Any, execs: list[ToolExec]) -> ToolExec | None:
    if call_id:
        for t in execs:
            if t.id == call_id:
                return t
    same_name = [t for t in execs if t.name == name and (not call_id or not t.id)]
    for t in same_name:
        if t.arguments == args:
            return t
    return same_name[0] if same_name else None
