"""The adapter plug-in point and the per-trace view adapters read from.

A :class:`ConventionAdapter` gets one trace (:class:`TraceView`: its spans, the GenAI log
records tied to them, and extraction options) and returns the agent runs it can rebuild.
Adapters are pure, synchronous and stateless; they may raise on malformed input — the registry
catches that per trace and turns it into an unmatched reason.

Adapters are split into *readers* so that mixed traces work: a Traceloop agent span above GenAI
model spans, a pydantic-ai agent above OpenAI-instrumented calls, and so on. Each convention
module contributes an agent reader (is this span an agent invocation, and what does it say?),
an LLM-call reader (what went into and came out of this model call?) and a tool reader. The run
builder (:mod:`.runs`) combines them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from tracescorer.model import AgentRun, LogRecord, Message, Span

# --- what readers return ----------------------------------------------------------------------


@dataclass(slots=True, kw_only=True)
class LlmCall:
    """One model call as read from a span (and its events / log records)."""

    span: Span
    input: list[Message] = field(default_factory=list)  # may include system-role messages
    system: list[Message] = field(default_factory=list)  # separate system instructions
    output: list[Message] = field(default_factory=list)
    model: str | None = None
    usage: dict[str, int | float] | None = None
    content_captured: bool = True  # False when the span shows content capture was off

    @property
    def has_content(self) -> bool:
        return bool(self.input or self.system or self.output)


@dataclass(slots=True, kw_only=True)
class ToolExec:
    """One tool execution span."""

    span: Span
    name: str
    id: str | None = None
    arguments: Any = None
    result: Any = None
    error: str | None = None


@dataclass(slots=True, kw_only=True)
class AgentInfo:
    """What an agent span says about its run (everything optional)."""

    span: Span
    name: str | None = None
    id: str | None = None
    conversation_id: str | None = None
    resource_id: str | None = None
    model: str | None = None
    system: list[Message] = field(default_factory=list)
    #: only the new input of this run (e.g. Mastra ``agent_run.input``, AI SDK ``prompt``)
    new_input: list[Message] = field(default_factory=list)
    #: the messages given to the agent, history included (GenAI agent ``input.messages``)
    given: list[Message] = field(default_factory=list)
    #: the whole exchange incl. this run's output (pydantic-ai ``all_messages``)
    transcript: list[Message] = field(default_factory=list)
    output: list[Message] = field(default_factory=list)
    usage: dict[str, int | float] | None = None
    attributes: dict[str, Any] = field(default_factory=dict)


AgentReader = Callable[[Span, "TraceView"], AgentInfo | None]
LlmReader = Callable[[Span, "TraceView"], LlmCall | None]
ToolReader = Callable[[Span, "TraceView"], ToolExec | None]


@dataclass(frozen=True, slots=True)
class Readers:
    """All readers, each list tried in order; the first non-None answer wins."""

    agents: tuple[AgentReader, ...]
    llm_calls: tuple[LlmReader, ...]
    tools: tuple[ToolReader, ...]

    def first(self, primary: AgentReader | None) -> Readers:
        """The same readers with ``primary`` tried first for agent spans."""
        if primary is None:
            return self
        return Readers(
            agents=(primary, *(a for a in self.agents if a is not primary)),
            llm_calls=self.llm_calls,
            tools=self.tools,
        )


# --- the trace --------------------------------------------------------------------------------


class TraceView:
    """One trace's spans with parent/child indexes and the log records joined to its spans.

    Duplicated span ids keep the span that ended last (a re-sent span supersedes).
    """

    def __init__(
        self,
        spans: Sequence[Span],
        logs: Sequence[LogRecord] = (),
        *,
        readers: Readers,
        conversation_keys: Sequence[str] = (),
        incomplete: bool = False,
    ) -> None:
        by_id: dict[str, Span] = {}
        for s in spans:
            old = by_id.get(s.span_id)
            if old is None or s.end_time_unix_nano >= old.end_time_unix_nano:
                by_id[s.span_id] = s
        self.spans: list[Span] = sorted(
            by_id.values(), key=lambda s: (s.start_time_unix_nano, s.end_time_unix_nano)
        )
        self.by_id = by_id
        self.trace_id = self.spans[0].trace_id if self.spans else ""
        self.children: dict[str, list[Span]] = {}
        for s in self.spans:
            if s.parent_span_id and s.parent_span_id in by_id:
                self.children.setdefault(s.parent_span_id, []).append(s)
        self.logs_by_span: dict[str, list[LogRecord]] = {}
        for rec in logs:
            if rec.span_id:
                self.logs_by_span.setdefault(rec.span_id, []).append(rec)
        self.readers = readers
        self.conversation_keys = tuple(conversation_keys)
        self.incomplete = incomplete

    @property
    def roots(self) -> list[Span]:
        """Spans whose parent is absent from the trace (true roots and orphans)."""
        return [s for s in self.spans if not s.parent_span_id or s.parent_span_id not in self.by_id]

    def parent(self, span: Span) -> Span | None:
        return self.by_id.get(span.parent_span_id) if span.parent_span_id else None

    def ancestors(self, span: Span) -> Iterator[Span]:
        seen = {span.span_id}
        p = self.parent(span)
        while p is not None and p.span_id not in seen:  # cycles in bad data
            seen.add(p.span_id)
            yield p
            p = self.parent(p)

    def descendants(self, span: Span, *, stop: Callable[[Span], bool] | None = None) -> list[Span]:
        """Every span below ``span`` in start order; subtrees at ``stop`` spans are skipped."""
        out: list[Span] = []
        stack = list(reversed(self.children.get(span.span_id, ())))
        seen = {span.span_id}
        while stack:
            s = stack.pop()
            if s.span_id in seen:
                continue
            seen.add(s.span_id)
            if stop is not None and stop(s):
                continue
            out.append(s)
            stack.extend(reversed(self.children.get(s.span_id, ())))
        out.sort(key=lambda s: (s.start_time_unix_nano, s.end_time_unix_nano))
        return out

    def logs_for(self, span: Span) -> list[LogRecord]:
        return self.logs_by_span.get(span.span_id, [])

    def has_key(self, key: str) -> bool:
        return any(key in s.attributes for s in self.spans)

    def has_prefix(self, prefix: str) -> bool:
        return any(k.startswith(prefix) for s in self.spans for k in s.attributes)


# --- the plug-in point ------------------------------------------------------------------------


@runtime_checkable
class ConventionAdapter(Protocol):
    """Turns one trace of a given telemetry convention into agent runs.

    ``detect`` returns a confidence in [0, 1] (0: not this convention) judged from the trace's
    content, never from library names alone. ``extract`` returns the runs (possibly none); it is
    synchronous, pure and may be called from any thread. It may raise on malformed data: the
    registry catches that per trace.
    """

    name: str

    def detect(self, trace: TraceView) -> float: ...

    def extract(self, trace: TraceView) -> list[AgentRun]: ...


def run_id_for(trace_id: str, span_id: str) -> str:
    """Deterministic run id from the trace id and the agent span id (re-assembly upserts)."""
    return hashlib.sha256(f"{trace_id}:{span_id}".encode()).hexdigest()[:32]


def span_error(span: Span) -> str | None:
    """The error of a span with error status: its status message, ``error.type``, or "error"."""
    if span.status_code != "error":
        return None
    etype = span.attributes.get("error.type")
    return span.status_message or (etype if isinstance(etype, str) and etype else "error")
