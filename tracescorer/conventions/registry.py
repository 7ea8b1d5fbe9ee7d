"""Pick the adapter for each trace and extract its runs; never raise.

:func:`extract_runs` groups the spans by trace, asks every adapter how sure it is that the trace
follows its convention, and lets the most confident one that produces runs build them. All
readers from every convention are available to every adapter (mixed traces are common: a
Traceloop agent above GenAI model spans, pydantic-ai above OpenAI-instrumented calls); the
chosen adapter decides the agent spans first and labels the runs.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

from tracescorer.conventions import genai, mastra, openinference, openllmetry, pydantic_ai, vercel
from tracescorer.conventions.base import ConventionAdapter, Readers, TraceView
from tracescorer.model import AgentRun, LogRecord, Span

log = logging.getLogger(__name__)

#: Specific readers before generic ones; each returns None for spans not in its format.
READERS = Readers(
    agents=(
        pydantic_ai.read_agent,
        mastra.read_agent,
        vercel.read_agent,
        openinference.read_agent,
        openllmetry.read_agent,
        genai.read_agent,
    ),
    llm_calls=(
        mastra.read_llm_call,
        vercel.read_llm_call,
        openinference.read_llm_call,
        openllmetry.read_llm_call,
        pydantic_ai.read_llm_call,
        genai.read_llm_call,
    ),
    tools=(
        mastra.read_tool,
        vercel.read_tool,
        openinference.read_tool,
        openllmetry.read_tool,
        genai.read_tool,
    ),
)

ADAPTERS: tuple[ConventionAdapter, ...] = (
    pydantic_ai.PydanticAIAdapter(),
    mastra.MastraAdapter(),
    vercel.VercelAdapter(),
    openinference.OpenInferenceAdapter(),
    openllmetry.OpenLLMetryAdapter(),
    genai.GenAIAdapter(),
)


@dataclass(slots=True)
class Extraction:
    """Runs rebuilt from some spans; ``unmatched_reason`` says why a trace gave none."""

    runs: list[AgentRun] = field(default_factory=list)
    unmatched_reason: str | None = None
    #: per trace id, the reason it gave no run (also summarised in ``unmatched_reason``)
    unmatched: dict[str, str] = field(default_factory=dict)


def extract_runs(
    spans: Sequence[Span],
    logs: Sequence[LogRecord] = (),
    *,
    conversation_keys: Sequence[str] = (),
    incomplete: bool = False,
    adapters: Sequence[ConventionAdapter] = ADAPTERS,
) -> Extraction:
    """Rebuild the agent runs of the given spans (one or more traces) and their log records.

    Log records join their span by trace/span id; records without one are ignored.
    ``conversation_keys`` are extra attribute keys that name a conversation, tried before the
    built-in ones. ``incomplete`` marks every run (``tracescorer.incomplete``) — for traces
    assembled on overflow or timeout without their root. Runs come back ordered by start time.
    """
    by_trace: dict[str, list[Span]] = {}
    for s in spans:
        by_trace.setdefault(s.trace_id, []).append(s)
    logs_by_trace: dict[str, list[LogRecord]] = {}
    for rec in logs:
        if rec.trace_id:
            logs_by_trace.setdefault(rec.trace_id, []).append(rec)

    result = Extraction()
    for trace_id, trace_spans in by_trace.items():
        view = TraceView(
            trace_spans,
            logs_by_trace.get(trace_id, ()),
            readers=READERS,
            conversation_keys=conversation_keys,
            incomplete=incomplete,
        )
        runs, reason = _extract_trace(view, adapters)
        result.runs.extend(runs)
        if reason is not None:
            result.unmatched[trace_id] = reason
    if not spans:
        result.unmatched_reason = "no spans"
    elif not result.runs and result.unmatched:
        result.unmatched_reason = "; ".join(sorted(set(result.unmatched.values())))
    result.runs.sort(key=lambda r: (r.started_at, r.trace_id, r.span_id))
    return result


def _extract_trace(view: TraceView, adapters: Sequence[ConventionAdapter]) -> tuple[list[AgentRun], str | None]:
    scored = []
    for adapter in adapters:
        try:
            score = float(adapter.detect(view))
        except Exception:  # noqa: BLE001 - one adapter's bug must not hide the trace from the others
            log.exception("convention %s failed to detect trace %s", adapter.name, view.trace_id)
            continue
        if score > 0:
            scored.append((score, adapter))
    if not scored:
        return [], f"no known agent/GenAI convention in {len(view.spans)} span(s)"
    scored.sort(key=lambda t: -t[0])
    failures = []
    for _, adapter in scored:
        try:
            runs = adapter.extract(view)
        except Exception as exc:  # noqa: BLE001 - malformed telemetry becomes a reason, not a crash
            log.warning("convention %s failed on trace %s: %r", adapter.name, view.trace_id, exc)
            failures.append(f"{adapter.name} failed: {type(exc).__name__}: {exc}")
            continue
        if runs:
            return runs, None
        failures.append(f"{adapter.name}: no agent span or model call")
    return [], "; ".join(failures)
