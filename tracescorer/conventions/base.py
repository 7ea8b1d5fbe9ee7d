"""The convention plug-in point: one :class:`Convention` record per convention module.

A record names the convention, says how sure it is that a trace follows it (``detect``, judged
from :class:`TraceFacts` — cheap per-trace signals: attribute keys, scope names, operations,
event names — never from library names alone) and how to read its spans: an agent reader (is
this span an agent invocation, and what does it say?), a model-call reader, a tool reader, and
the message-part shapes the framework writes. Readers are pure, synchronous and stateless
callables of ``(span, trace)`` that return ``None`` for spans not in their format; they may
raise on malformed input — the registry catches that per trace. An *extension* record
(``label`` set to its base convention) adds one framework's forms to a convention, and its runs
carry the base convention's label.

Readers of every convention present in a trace are available together, because traces mix
conventions (a Traceloop agent span above GenAI model spans, pydantic-ai above an OpenAI
instrumentation). The run builder (:mod:`.runs`) combines what they read.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any, Protocol

from tracescorer.model import LogRecord, Message, Part, Span

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
    #: the run's answer where the framework gives it apart from the model's turns (smolagents'
    #: ``final_answer`` tool argument): the last message of the run's output
    answer: list[Message] = field(default_factory=list)
    usage: dict[str, int | float] | None = None
    attributes: dict[str, Any] = field(default_factory=dict)
    #: the span wraps an agent invocation rather than being one (a workflow span, an agent
    #: span without a name of its own): see :mod:`.nesting`
    wrapper: bool = False
    #: the span is a node of the enclosing graph (LangGraph's ``agent`` node), not an agent
    graph_node: bool = False
    #: spans outside the agent span that hold this invocation's work (a framework that records
    #: the agent span beside the graph run it started): their subtrees belong to this run
    extra_spans: tuple[Span, ...] = ()


class NotOne:
    """What a reader returns to say a span is *not* one of its kind, whatever later readers
    would make of it (a framework's helper span that looks like a model call)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "NOT_ONE"


NOT_ONE = NotOne()


class AgentReader(Protocol):
    """Reads an agent span: its :class:`AgentInfo`, None when the span is not in the reader's
    format (later readers are asked), or :data:`NOT_ONE` (no reader is asked further)."""

    def __call__(self, span: Span, trace: TraceView, /) -> AgentInfo | NotOne | None: ...


class LlmReader(Protocol):
    """Reads a model-call span: its :class:`LlmCall`, None, or :data:`NOT_ONE`."""

    def __call__(self, span: Span, trace: TraceView, /) -> LlmCall | NotOne | None: ...


class ToolReader(Protocol):
    """Reads a tool-execution span: its :class:`ToolExec`, None, or :data:`NOT_ONE`."""

    def __call__(self, span: Span, trace: TraceView, /) -> ToolExec | NotOne | None: ...


#: A message-part parser: the raw part (a mapping) to a :class:`Part`, or None (nothing in it).
PartParser = Callable[[Mapping[str, Any]], Part | None]
#: A message shape: a raw message without ``role`` to one in a supported shape, or None.
MessageShape = Callable[[Mapping[str, Any]], Mapping[str, Any] | None]
#: A tool-result shape: a framework's wrapper object (a mapping) to (matched, the result it
#: wraps, the tool call id it names).
ResultShape = Callable[[Mapping[str, Any]], tuple[bool, Any, str | None]]


_START_END = attrgetter("start_time_unix_nano", "end_time_unix_nano")
_NAMESPACES: dict[frozenset[str], frozenset[str]] = {}

# --- per-trace facts --------------------------------------------------------------------------


class TraceFacts:
    """Cheap signals about a trace, computed once, that conventions detect themselves from."""

    __slots__ = ("_namespaces", "event_names", "keys", "operations", "scopes", "span_names")

    def __init__(self, spans: Sequence[Span], logs_by_span: Mapping[str, Sequence[LogRecord]]) -> None:
        self.keys: frozenset[str] = frozenset().union(*[s.attributes for s in spans])
        self._namespaces: frozenset[str] | None = None
        self.scopes: frozenset[str] = frozenset([s.scope.name for s in spans])
        ops = [s.attributes.get("gen_ai.operation.name") for s in spans]
        self.operations: frozenset[str] = frozenset([op for op in ops if type(op) is str])
        self.span_names: frozenset[str] = frozenset([s.name for s in spans])
        events = [ev.name for s in spans if s.events for ev in s.events]
        if logs_by_span:
            events += [rec.name for recs in logs_by_span.values() for rec in recs]
        self.event_names: frozenset[str] = frozenset(events)

    @property
    def namespaces(self) -> frozenset[str]:
        """First dotted segment of every key (``gen_ai``, ``llm``, ``mastra``, ...)."""
        if self._namespaces is None:
            # Traces of one service repeat one set of keys: remember the answer per key set.
            found = _NAMESPACES.get(self.keys)
            if found is None:
                if len(_NAMESPACES) >= 1024:
                    _NAMESPACES.clear()
                found = _NAMESPACES[self.keys] = frozenset([k.partition(".")[0] for k in self.keys])
            self._namespaces = found
        return self._namespaces

    def has_prefix(self, prefix: str) -> bool:
        """Whether some attribute key starts with ``prefix``."""
        return any(k.startswith(prefix) for k in self.keys)

    def scope_startswith(self, prefix: str | tuple[str, ...]) -> bool:
        return any(s.startswith(prefix) for s in self.scopes)


# --- the trace --------------------------------------------------------------------------------


class TraceView:
    """One trace's spans with parent/child indexes, depths and the log records of its spans.

    Duplicated span ids keep the span that ended last (a re-sent span supersedes). Indexes are
    built once; readers and the run builder never walk the tree more than once per question.
    """

    def __init__(
        self,
        spans: Sequence[Span],
        logs: Sequence[LogRecord] = (),
        *,
        conversation_keys: Sequence[str] = (),
        incomplete: bool = False,
    ) -> None:
        by_id: dict[str, Span] = {}
        for s in spans:
            old = by_id.get(s.span_id)
            if old is None or s.end_time_unix_nano >= old.end_time_unix_nano:
                by_id[s.span_id] = s
        self.spans: list[Span] = sorted(by_id.values(), key=_START_END)
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
        self.conversation_keys = tuple(conversation_keys)
        self.incomplete = incomplete
        self._depth: dict[str, int] | None = None
        self.facts = TraceFacts(self.spans, self.logs_by_span)

    @property
    def depth(self) -> dict[str, int]:
        """Span id -> distance from its top-most present ancestor (computed on first use)."""
        if self._depth is None:
            self._depth = self._depths()
        return self._depth

    def _depths(self) -> dict[str, int]:
        """Distance of each span from its top-most present ancestor (cycles cut)."""
        depth: dict[str, int] = {}
        stack = [(s, 0) for s in reversed(self.roots)]
        while stack:
            s, d = stack.pop()
            if s.span_id in depth:
                continue
            depth[s.span_id] = d
            stack.extend((c, d + 1) for c in reversed(self.children.get(s.span_id, ())))
        for s in self.spans:  # spans on a parent cycle: no root above them
            depth.setdefault(s.span_id, 0)
        return depth

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

    def nearest(self, span: Span, ids: Mapping[str, Any] | set[str]) -> str | None:
        """The id of the closest ancestor of ``span`` that is in ``ids``."""
        by_id = self.by_id
        pid = span.parent_span_id
        for _ in range(len(by_id)):  # a bound instead of a seen-set: cycles in bad data end too
            if not pid:
                return None
            if pid in ids:
                return pid
            parent = by_id.get(pid)
            if parent is None:
                return None
            pid = parent.parent_span_id
        return None

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
        out.sort(key=_START_END)
        return out

    def logs_for(self, span: Span) -> list[LogRecord]:
        return self.logs_by_span.get(span.span_id, [])

    def has_key(self, key: str) -> bool:
        return key in self.facts.keys

    def has_prefix(self, prefix: str) -> bool:
        return self.facts.has_prefix(prefix)


# --- the record -------------------------------------------------------------------------------


def _never(facts: TraceFacts) -> float:
    return 0.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Convention:
    """One convention (or one framework's extension of a convention), as the registry sees it.

    ``detect(facts)`` returns a confidence in [0, 1] (0: not in this trace). It must be above 0
    whenever one of the readers could match a span of the trace: only the readers of detected
    conventions are asked. The most confident convention labels the runs and has its agent
    reader tried first. ``parts`` adds message-part shapes by their ``type`` value;
    ``keyed_parts`` adds untyped shapes by the key that tells them apart (``toolUse``, ...).
    ``root_agent`` reads a span that is a run although no reader marked it an agent — the top
    span of a trace without agent spans, the graph span around graph nodes — where the
    convention says what such a span means (its name, ids, input). ``message_shapes`` turn
    serialised framework messages (no ``role`` key) into a supported shape; ``result_shapes``
    unwrap tool results a framework wraps in its own objects.
    """

    name: str
    detect: Callable[[TraceFacts], float] = _never
    agent: AgentReader | None = None
    llm_call: LlmReader | None = None
    tool: ToolReader | None = None
    root_agent: AgentReader | None = None
    parts: Mapping[str, PartParser] = field(default_factory=dict)
    keyed_parts: Mapping[str, PartParser] = field(default_factory=dict)
    #: messages without a ``role`` (serialised framework objects), by the key telling them apart
    message_shapes: Mapping[str, MessageShape] = field(default_factory=dict)
    #: tool results wrapped in a framework object, by the key telling them apart
    result_shapes: Mapping[str, ResultShape] = field(default_factory=dict)
    #: the convention runs are labelled with (an extension names its base); default ``name``
    label: str = ""
    #: byte strings one of which is in the OTLP protobuf of every scope group (``ScopeSpans`` /
    #: ``ScopeLogs``) ``detect`` or a reader could find something in: what triage looks for before
    #: anything is decoded (:mod:`tracescorer.feed.triage`). Substrings of attribute keys, scope,
    #: span and event names; :func:`whole` for a short key that must match exactly. A marker seen
    #: where it means nothing only costs a decode; a missing one loses runs.
    markers: tuple[bytes, ...] = ()

    @property
    def run_label(self) -> str:
        return self.label or self.name


def whole(text: str) -> bytes:
    """A marker matching ``text`` as a whole OTLP string field (an attribute key, a scope name, a
    string value): its tag, length and bytes, so ``input`` does not match ``http.input_size``."""
    raw = text.encode()
    size, length = len(raw), bytearray()
    while size >= 0x80:
        length.append((size & 0x7F) | 0x80)
        size >>= 7
    length.append(size)
    return b"\n" + bytes(length) + raw


def run_id_for(trace_id: str, span_id: str) -> str:
    """Deterministic run id from the trace id and the agent span id (re-assembly upserts)."""
    return hashlib.sha256(f"{trace_id}:{span_id}".encode()).hexdigest()[:32]


def span_error(span: Span) -> str | None:
    """The error of a span with error status: its status message, ``error.type``, or "error"."""
    if span.status_code != "error":
        return None
    etype = span.attributes.get("error.type")
    return span.status_message or (etype if isinstance(etype, str) and etype else "error")
