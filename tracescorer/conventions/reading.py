"""The readers one extraction asks, and their results per span (each span is read once per extraction)."""

from __future__ import annotations

from dataclasses import dataclass
from operator import attrgetter

from tracescorer.conventions.base import (
    AgentReader,
    LlmCall,
    LlmReader,
    ToolExec,
    ToolReader,
    TraceView,
)
from tracescorer.model import Span

CALL_ORDER = attrgetter("span.start_time_unix_nano", "span.end_time_unix_nano")


@dataclass(frozen=True, slots=True, kw_only=True)
class Readers:
    """The readers of the conventions present in a trace, each list tried in order."""

    agents: tuple[AgentReader, ...]
    llm_calls: tuple[LlmReader, ...]
    tools: tuple[ToolReader, ...]
    roots: tuple[AgentReader, ...] = ()


class ReaderCache:
    """Reader results per span id, so each span is parsed once per extraction."""

    def __init__(self, trace: TraceView, readers: Readers) -> None:
        self.trace = trace
        self.readers = readers
        self._llm: dict[str, LlmCall | None] = {}
        self._tool: dict[str, ToolExec | None] = {}

    def llm(self, span: Span) -> LlmCall | None:
        sid = span.span_id
        if sid not in self._llm:
            found = None
            for read in self.readers.llm_calls:
                got = read(span, self.trace)
                if got is not None:
                    found = got if isinstance(got, LlmCall) else None
                    break
            self._llm[sid] = found
        return self._llm[sid]

    def tool(self, span: Span) -> ToolExec | None:
        sid = span.span_id
        if sid not in self._tool:
            found = None
            for read in self.readers.tools:
                got = read(span, self.trace)
                if got is not None:
                    found = got if isinstance(got, ToolExec) else None
                    break
            self._tool[sid] = found
        return self._tool[sid]

    def is_llm(self, span: Span) -> bool:
        return self.llm(span) is not None

    def is_tool(self, span: Span) -> bool:
        return self.tool(span) is not None
