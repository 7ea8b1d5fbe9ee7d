"""Synthetic spans for the SDK convention tests: one trace, increasing ids and start times."""

from __future__ import annotations

from itertools import count
from typing import Any

from tracescorer.model import Message, Scope, Span

TRACE = "5bf92f3577b34da6a3ce929d0e0e4737"
_ids = count(1)
_clock = count(1_000)


def span(name: str, parent: Span | None = None, *, scope: str = "", **attrs: Any) -> Span:
    """A span named ``name`` (child of ``parent``) of the instrumentation scope ``scope``; the
    keyword arguments are its attributes (dots in keys written as ``__``)."""
    start = next(_clock) * 1_000_000
    return Span(
        trace_id=TRACE,
        span_id=f"{next(_ids):016x}",
        parent_span_id=parent.span_id if parent is not None else None,
        name=name,
        kind="internal",
        start_time_unix_nano=start,
        end_time_unix_nano=start + 500_000,
        attributes={k.replace("__", "."): v for k, v in attrs.items()},
        scope=Scope(name=scope),
    )


def texts(messages: Any) -> list[tuple[str, str]]:
    return [(m.role, m.content) for m in messages]


def tool_calls(message: Message) -> list[tuple[str | None, str | None, Any]]:
    return [(p.id, p.name, p.arguments) for p in message.tool_calls]
