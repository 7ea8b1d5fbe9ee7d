"""Domain types shared by every stage of the pipeline.

Frozen, keyword-only dataclasses: the receiver decodes OTLP into :class:`Span` and
:class:`LogRecord`; the convention adapters turn spans into :class:`AgentRun`; runs sharing a
conversation id form a :class:`Conversation`. Attribute values are plain Python values
(``str``, ``bool``, ``int``, ``float``, ``bytes``, ``list``, ``dict``, ``None``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC
from typing import Any

AttrValue = Any  # str | bool | int | float | bytes | list[AttrValue] | dict[str, AttrValue] | None
Attributes = dict[str, AttrValue]


@dataclass(frozen=True, slots=True, kw_only=True)
class Resource:
    """The entity that produced telemetry (``service.name`` and friends)."""

    attributes: Attributes = field(default_factory=dict)
    schema_url: str = ""
    dropped_attributes_count: int = 0

    @property
    def service_name(self) -> str | None:
        value = self.attributes.get("service.name")
        return value if isinstance(value, str) else None


@dataclass(frozen=True, slots=True, kw_only=True)
class Scope:
    """The instrumentation scope (library) that produced telemetry."""

    name: str = ""
    version: str = ""
    attributes: Attributes = field(default_factory=dict)
    schema_url: str = ""
    dropped_attributes_count: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class SpanEvent:
    name: str
    time_unix_nano: int
    attributes: Attributes = field(default_factory=dict)
    dropped_attributes_count: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class SpanLink:
    trace_id: str
    span_id: str
    trace_state: str = ""
    attributes: Attributes = field(default_factory=dict)
    dropped_attributes_count: int = 0
    flags: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class Span:
    """One OTLP span, ids as lowercase hex (32 / 16 characters)."""

    trace_id: str
    span_id: str
    parent_span_id: str | None
    name: str
    kind: str  # unspecified | internal | server | client | producer | consumer
    start_time_unix_nano: int
    end_time_unix_nano: int
    status_code: str = "unset"  # unset | ok | error
    status_message: str = ""
    attributes: Attributes = field(default_factory=dict)
    events: tuple[SpanEvent, ...] = ()
    links: tuple[SpanLink, ...] = ()
    resource: Resource = field(default_factory=Resource)
    scope: Scope = field(default_factory=Scope)
    trace_state: str = ""
    flags: int = 0
    dropped_attributes_count: int = 0
    dropped_events_count: int = 0
    dropped_links_count: int = 0

    @property
    def service_name(self) -> str | None:
        return self.resource.service_name


@dataclass(frozen=True, slots=True, kw_only=True)
class LogRecord:
    """One OTLP log record; GenAI events arrive as these, tied to a span by trace/span id."""

    time_unix_nano: int
    observed_time_unix_nano: int
    severity_number: int = 0
    severity_text: str = ""
    body: AttrValue = None
    attributes: Attributes = field(default_factory=dict)
    event_name: str = ""
    trace_id: str | None = None
    span_id: str | None = None
    flags: int = 0
    dropped_attributes_count: int = 0
    resource: Resource = field(default_factory=Resource)
    scope: Scope = field(default_factory=Scope)

    @property
    def service_name(self) -> str | None:
        return self.resource.service_name

    @property
    def name(self) -> str:
        """The event name: the ``event_name`` field, else the ``event.name`` attribute."""
        if self.event_name:
            return self.event_name
        value = self.attributes.get("event.name")
        return value if isinstance(value, str) else ""


# --- Agent runs -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Part:
    """A message part, shaped like the OTel GenAI message parts.

    ``type`` is ``text``, ``reasoning``, ``tool_call``, ``tool_call_response``, ``blob``,
    ``uri``, ``file`` (or another type seen in the wild). ``content`` holds text for text and
    reasoning parts; ``id``/``name``/``arguments`` describe tool calls; ``response`` a tool
    result; ``extra`` anything else the part carried (mime_type, uri, modality, ...).
    """

    type: str
    content: str | None = None
    id: str | None = None
    name: str | None = None
    arguments: Any = None
    response: Any = None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.type}
        for key in ("content", "id", "name", "arguments", "response"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        out.update(self.extra)
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class Message:
    """A chat message: ``role`` plus plain-text ``content`` and the typed ``parts``."""

    role: str
    content: str = ""
    parts: tuple[Part, ...] = ()
    name: str | None = None
    finish_reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "role": self.role,
            "content": self.content,
            "parts": [p.to_dict() for p in self.parts],
        }
        if self.name is not None:
            out["name"] = self.name
        if self.finish_reason is not None:
            out["finish_reason"] = self.finish_reason
        return out

    @property
    def tool_calls(self) -> tuple[Part, ...]:
        return tuple(p for p in self.parts if p.type == "tool_call")


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCall:
    id: str | None
    name: str
    arguments: Any = None  # an object when the arguments parsed as JSON
    result: Any = None
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        # asdict() deep-copies the arguments and result; they are plain JSON data already
        return {
            "id": self.id,
            "name": self.name,
            "arguments": self.arguments,
            "result": self.result,
            "error": self.error,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentRun:
    """One agent invocation rebuilt from a trace (the AgentRun contract of docs/architecture.md)."""

    run_id: str
    trace_id: str
    span_id: str
    parent_span_id: str | None
    conversation_id: str | None
    resource_id: str | None
    agent_name: str | None
    agent_id: str | None
    service_name: str | None
    convention: str  # genai | openinference | vercel | mastra | pydantic_ai | openllmetry
    model: str | None
    started_at: int  # unix nanoseconds
    ended_at: int
    status: str  # ok | error
    error: str | None
    input_messages: tuple[Message, ...] = ()
    remembered_messages: tuple[Message, ...] = ()
    system_messages: tuple[Message, ...] = ()
    tagged_system_messages: dict[str, tuple[Message, ...]] = field(default_factory=dict)
    output: tuple[Message, ...] = ()
    tool_calls: tuple[ToolCall, ...] = ()
    usage: dict[str, int | float] | None = None
    attributes: Attributes = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The AgentRun contract as JSON-ready data (timestamps as RFC 3339 strings)."""
        return {
            "run_id": self.run_id,
            "trace_id": self.trace_id,
            "span_id": self.span_id,
            "parent_span_id": self.parent_span_id,
            "conversation_id": self.conversation_id,
            "resource_id": self.resource_id,
            "agent_name": self.agent_name,
            "agent_id": self.agent_id,
            "service_name": self.service_name,
            "convention": self.convention,
            "model": self.model,
            "started_at": nanos_to_rfc3339(self.started_at),
            "ended_at": nanos_to_rfc3339(self.ended_at),
            "status": self.status,
            "error": self.error,
            "input_messages": [m.to_dict() for m in self.input_messages],
            "remembered_messages": [m.to_dict() for m in self.remembered_messages],
            "system_messages": [m.to_dict() for m in self.system_messages],
            "tagged_system_messages": {
                tag: [m.to_dict() for m in msgs] for tag, msgs in self.tagged_system_messages.items()
            },
            "output": [m.to_dict() for m in self.output],
            "tool_calls": [t.to_dict() for t in self.tool_calls],
            "usage": self.usage,
            "attributes": self.attributes,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class Conversation:
    """All runs sharing a conversation id, ordered by start time."""

    conversation_id: str
    runs: tuple[AgentRun, ...]

    @property
    def input_messages(self) -> tuple[Message, ...]:
        """Every user turn across the runs (history is not counted again)."""
        return tuple(m for r in self.runs for m in r.input_messages)

    @property
    def output(self) -> tuple[Message, ...]:
        """Every assistant message across the runs."""
        return tuple(m for r in self.runs for m in r.output)


def nanos_to_rfc3339(nanos: int) -> str:
    """Unix nanoseconds to an RFC 3339 UTC timestamp with microseconds."""
    from datetime import datetime

    dt = datetime.fromtimestamp(nanos // 1_000_000_000, tz=UTC)
    micros = (nanos % 1_000_000_000) // 1000
    return dt.replace(microsecond=micros).isoformat().replace("+00:00", "Z")
