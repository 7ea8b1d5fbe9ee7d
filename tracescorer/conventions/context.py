"""Conversation and user ids: which attribute keys carry them, and where to look in a trace."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from tracescorer.model import Span

_CONTEXT_PREFIXES = (
    "ai.telemetry.metadata.",  # Vercel AI SDK 5/6 experimental_telemetry.metadata
    "ai.settings.context.",  # Vercel AI SDK 7 runtime context
    "traceloop.association.properties.",  # Traceloop/OpenLLMetry association properties
    "metadata.",  # OpenInference-style metadata flattened by some SDKs
    "langsmith.metadata.",  # LangSmith's OpenTelemetry mode: run metadata (LangGraph's thread_id)
)

#: Keys naming the conversation, most specific first.
CONVERSATION_KEYS: tuple[str, ...] = (
    "gen_ai.conversation.id",
    "session.id",  # OpenInference
    "mastra.metadata.threadId",  # Mastra 1.x memory thread
    "threadId",  # Mastra 0.x
    *(
        p + k
        for p in _CONTEXT_PREFIXES
        for k in ("conversationId", "sessionId", "threadId", "conversation_id", "session_id", "thread_id")
    ),
)

#: Keys naming the user / resource that owns the conversation.
RESOURCE_KEYS: tuple[str, ...] = (
    "mastra.metadata.resourceId",
    "resourceId",
    "user.id",  # OpenInference
    "gen_ai.user.id",
    "enduser.id",
    *(p + k for p in _CONTEXT_PREFIXES for k in ("resourceId", "userId", "user_id")),
)


CONVERSATION_KEY_SET = frozenset(CONVERSATION_KEYS)
RESOURCE_KEY_SET = frozenset(RESOURCE_KEYS)


def _lookup(spans: Iterable[Span], keys: Sequence[str]) -> str | None:
    for span in spans:
        attrs = span.attributes
        for key in keys:
            value = attrs.get(key)
            if value is None:
                continue
            if isinstance(value, str) and value:
                return value
            if isinstance(value, int) and not isinstance(value, bool):
                return str(value)
    return None


def find_id(
    agent: Span,
    ancestors: Iterable[Span],
    own: Iterable[Span],
    keys: Sequence[str],
    extra_keys: Sequence[str] = (),
    present: frozenset[str] | None = None,
) -> str | None:
    """The first id found on the agent span, then its ancestors, then its own subtree.

    Configured ``extra_keys`` are tried before the built-in keys on each span: a deployment
    that names its own key means it. ``present`` (the trace's attribute keys) narrows the
    search to the keys the trace has.
    """
    ordered = (*extra_keys, *keys)
    if present is not None:
        if present.isdisjoint(ordered):
            return None
        ordered = tuple(k for k in ordered if k in present)
    found = _lookup([agent], ordered)
    if found:
        return found
    found = _lookup(ancestors, ordered)
    if found:
        return found
    return _lookup(own, ordered)
