"""The list of conventions, and extraction: pick the convention of each trace, build its runs.

:data:`CONVENTIONS` holds one :class:`~.base.Convention` record per convention module, in
reader precedence (framework-specific forms before the generic conventions they extend). The
convention names (:func:`names`), the message-part shapes and the readers all derive from it.

:func:`extract_runs` groups the spans by trace and, per trace, asks every record how sure it is
(from the trace's :class:`~.base.TraceFacts`, computed once). The readers of every detected
convention are available together (traces mix conventions); the most confident convention that
produces runs labels them and has its agent reader tried first. Nothing raises: a failing
convention or a trace nobody knows becomes an unmatched reason.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

from tracescorer.conventions import (
    adk,
    crewai,
    genai,
    generic,
    haystack,
    langchain,
    langfuse,
    langsmith,
    litellm,
    llamaindex,
    logfire,
    mastra,
    mlflow,
    openinference,
    openllmetry,
    pydantic_ai,
    smolagents,
    strands,
    vercel,
)
from tracescorer.conventions.base import Convention, TraceView
from tracescorer.conventions.common import register_shapes
from tracescorer.conventions.reading import Readers
from tracescorer.conventions.runs import build_runs
from tracescorer.model import AgentRun, LogRecord, Span

log = logging.getLogger(__name__)

#: Every convention, framework-specific forms before the generic conventions they extend.
CONVENTIONS: tuple[Convention, ...] = (
    pydantic_ai.CONVENTION,
    mastra.CONVENTION,
    vercel.CONVENTION,
    logfire.CONVENTION,
    langfuse.CONVENTION,
    mlflow.CONVENTION,
    langsmith.CONVENTION,
    haystack.CONVENTION,
    llamaindex.CONVENTION,
    smolagents.CONVENTION,
    crewai.CONVENTION,
    openinference.CONVENTION,
    adk.CONVENTION,
    strands.CONVENTION,
    litellm.CONVENTION,
    langchain.CONVENTION,
    openllmetry.CONVENTION,
    genai.CONVENTION,
    generic.CONVENTION,  # never detected: the registry's last resort (see _extract_trace)
)

for _c in CONVENTIONS:
    register_shapes(_c.name, typed=_c.parts, keyed=_c.keyed_parts, messages=_c.message_shapes, results=_c.result_shapes)


def names(conventions: Sequence[Convention] = CONVENTIONS) -> tuple[str, ...]:
    """The convention labels runs can carry (``AgentRun.convention``), in precedence order."""
    return tuple(dict.fromkeys(c.run_label for c in conventions))


def markers(conventions: Sequence[Convention] = CONVENTIONS) -> tuple[bytes, ...]:
    """What triage looks for in a request's bytes: every convention's markers, without those that
    contain another one (found wherever the shorter one is)."""
    found = {m for c in conventions for m in c.markers}
    return tuple(sorted(m for m in found if not any(o != m and o in m for o in found)))


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
    conventions: Sequence[Convention] = CONVENTIONS,
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
            trace_spans, logs_by_trace.get(trace_id, ()), conversation_keys=conversation_keys, incomplete=incomplete
        )
        runs, reason = _extract_trace(view, conventions)
        result.runs.extend(runs)
        if reason is not None:
            result.unmatched[trace_id] = reason
    if not spans:
        result.unmatched_reason = "no spans"
    elif not result.runs and result.unmatched:
        result.unmatched_reason = "; ".join(sorted(set(result.unmatched.values())))
    result.runs.sort(key=lambda r: (r.started_at, r.trace_id, r.span_id))
    return result


#: Keys that carry messages: a create_agent trace with one of them may still be a run.
_CONTENT_KEYS = frozenset({"gen_ai.input.messages", "gen_ai.output.messages"})
_CREATE_ONLY = frozenset({"create_agent"})

_READERS: dict[tuple[tuple[int, ...], int], tuple[Readers, tuple[Convention, ...]]] = {}


def _readers(present: Sequence[Convention], primary: Convention) -> Readers:
    """The readers of the detected conventions, ``primary``'s agent reader first (memoised:
    few combinations of conventions occur)."""
    key = (tuple(map(id, present)), id(primary))
    found = _READERS.get(key)
    if found is None:
        if len(_READERS) > 256:
            _READERS.clear()
        # The records are kept with the entry, so their ids cannot be reused while it lives.
        found = _READERS[key] = (_build_readers(present, primary), (*present, primary))
    return found[0]


def _build_readers(present: Sequence[Convention], primary: Convention) -> Readers:
    agents = [c.agent for c in present if c.agent is not None and c is not primary]
    if primary.agent is not None:
        agents.insert(0, primary.agent)
    roots = [c.root_agent for c in present if c.root_agent is not None and c is not primary]
    if primary.root_agent is not None:
        roots.insert(0, primary.root_agent)
    return Readers(
        agents=tuple(agents),
        llm_calls=tuple(c.llm_call for c in present if c.llm_call is not None),
        tools=tuple(c.tool for c in present if c.tool is not None),
        roots=tuple(roots),
    )


#: Detection per trace facts (detection reads nothing else): traces of one service repeat them.
_DETECTED: dict[tuple[frozenset[str], ...], tuple[tuple[float, int, Convention], ...]] = {}


def _detect(view: TraceView, conventions: Sequence[Convention]) -> list[tuple[float, int, Convention]]:
    """(score, precedence, convention) of every convention that detects the trace."""
    facts = view.facts
    key = None
    if conventions is CONVENTIONS:
        key = (facts.keys, facts.scopes, facts.operations, facts.span_names, facts.event_names)
        found = _DETECTED.get(key)
        if found is not None:
            return list(found)
    scored: list[tuple[float, int, Convention]] = []
    failed = False
    for i, conv in enumerate(conventions):
        try:
            score = float(conv.detect(facts))
        except Exception:  # one convention's bug must not hide the trace from the others
            log.exception("convention %s failed to detect trace %s", conv.name, view.trace_id)
            failed = True
            continue
        if score > 0:
            scored.append((score, i, conv))
    if key is not None and not failed:
        if len(_DETECTED) >= 256:
            _DETECTED.clear()
        _DETECTED[key] = tuple(scored)
    return scored


def _extract_trace(view: TraceView, conventions: Sequence[Convention]) -> tuple[list[AgentRun], str | None]:
    scored = _detect(view, conventions)
    if not scored:
        return _last_resort(view, conventions, _unknown(view))
    if view.facts.operations == _CREATE_ONLY and not view.facts.keys & _CONTENT_KEYS:
        return [], "only create_agent spans: an agent was defined, not run"
    present = [conv for _, _, conv in scored]  # in precedence order already
    if len(scored) > 1:
        scored.sort(key=lambda t: (-t[0], t[1]))
    failures = []
    tried: set[str] = set()
    for _, _, conv in scored:
        if conv.run_label in tried:
            continue  # an extension and its base read the same way: one attempt per label
        tried.add(conv.run_label)
        try:
            runs = build_runs(view, conv.run_label, _readers(present, conv))
        except Exception as exc:  # noqa: BLE001 - malformed telemetry becomes a reason, not a crash
            log.warning("convention %s failed on trace %s: %r", conv.name, view.trace_id, exc)
            failures.append(f"{conv.run_label} failed: {type(exc).__name__}: {exc}")
            present = [c for c in present if c is not conv]  # the others may read it without it
            continue
        if runs:
            return runs, None
        failures.append(f"{conv.run_label}: no agent span or model call")
    return _last_resort(view, conventions, "; ".join(failures))


def _last_resort(view: TraceView, conventions: Sequence[Convention], reason: str) -> tuple[list[AgentRun], str | None]:
    """Model calls read from spans no convention claims (:mod:`.generic`), when the trace has
    keys they could be read from; else the reason it gave no run."""
    fallback = generic.CONVENTION
    if fallback not in conventions or not generic.claims(view.facts):
        return [], reason
    try:
        runs = build_runs(view, fallback.run_label, _readers([fallback], fallback))
    except Exception as exc:  # noqa: BLE001 - malformed telemetry becomes a reason, not a crash
        log.warning("convention %s failed on trace %s: %r", fallback.name, view.trace_id, exc)
        return [], f"{reason}; {fallback.name} failed: {type(exc).__name__}: {exc}"
    if runs:
        return runs, None
    return [], f"{reason}; {fallback.name}: no span reads as a model call"


def _unknown(view: TraceView, shown: int = 5) -> str:
    """Why no convention took the trace, with what it carries (bounded: scope names and the
    first segments of its attribute keys) so the sender can see what was sent."""
    facts = view.facts
    scopes = sorted(s for s in facts.scopes if s)
    spaces = sorted(facts.namespaces)

    def some(values: list[str]) -> str:
        more = len(values) - shown
        listed = ", ".join(v[:40] for v in values[:shown])
        return (listed + (f" (+{more} more)" if more > 0 else "")) if values else "none"

    return (
        f"no known agent/GenAI convention in {len(view.spans)} span(s) "
        f"(scopes: {some(scopes)}; attribute namespaces: {some(spaces)})"
    )
