"""Domain spans built by hand, for tests that hand them to a stage directly (no OTLP)."""

from __future__ import annotations

from tracescorer.model import Span


def agent_root(i: int) -> Span:
    """The root ``invoke_agent`` span of trace number ``i`` (ids from ``i``): one run each."""
    return Span(
        trace_id=f"{i + 1:032x}",
        span_id=f"{i + 1:016x}",
        parent_span_id=None,
        name="invoke_agent support",
        kind="internal",
        start_time_unix_nano=1_000 + i,
        end_time_unix_nano=2_000 + i,
        attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support"},
    )
