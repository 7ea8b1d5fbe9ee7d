"""Domain objects -> column lists for the span rows (no DuckDB here: plain data)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tracescorer.model import LogRecord, Span, SpanEvent, SpanLink
from tracescorer.store.jsonvalue import dumpb

# Value order of span_rows()/log_rows() tuples: tracescorer.store.duckdb.appends.SPAN_INPUT / LOG_INPUT.


class _JsonCache:
    """Resources and scopes are shared by every span of a request: encode each once."""

    def __init__(self) -> None:
        self._cache: dict[int, tuple[object, bytes]] = {}

    def __call__(self, owner: object, attributes: dict[str, Any]) -> bytes:
        hit = self._cache.get(id(owner))
        if hit is not None and hit[0] is owner:
            return hit[1]
        text = dumpb(attributes)
        self._cache[id(owner)] = (owner, text)
        return text


def _events_json(events: Sequence[SpanEvent]) -> bytes | str:
    if not events:
        return "[]"
    return dumpb(
        [
            {
                "name": e.name,
                "time_unix_nano": e.time_unix_nano,
                "attributes": e.attributes,
                "dropped_attributes_count": e.dropped_attributes_count,
            }
            for e in events
        ]
    )


def _links_json(links: Sequence[SpanLink]) -> bytes | str:
    if not links:
        return "[]"
    return dumpb(
        [
            {
                "trace_id": link.trace_id,
                "span_id": link.span_id,
                "trace_state": link.trace_state,
                "attributes": link.attributes,
                "dropped_attributes_count": link.dropped_attributes_count,
                "flags": link.flags,
            }
            for link in links
        ]
    )


Rejected = list[tuple[int, str]]


def span_rows(
    spans: Sequence[Span], offsets: Sequence[int | None] | None = None
) -> tuple[list[tuple[Any, ...]], Rejected]:
    """One tuple per span in ``appends.SPAN_INPUT`` order (``offsets``: the segment-log offset of
    each span's request, None when it came another way), and the spans that cannot be encoded
    (index, why)."""
    cache = _JsonCache()
    out: list[tuple[Any, ...]] = []
    rejected: Rejected = []
    for i, s in enumerate(spans):
        try:
            out.append(
                (
                    s.trace_id,
                    s.span_id,
                    s.parent_span_id,
                    s.trace_state,
                    s.flags,
                    s.name,
                    s.kind,
                    s.start_time_unix_nano // 1000,
                    s.end_time_unix_nano // 1000,
                    s.start_time_unix_nano,
                    s.end_time_unix_nano,
                    s.status_code,
                    s.status_message,
                    s.resource.service_name,
                    s.scope.name,
                    s.scope.version,
                    cache(s.resource, s.resource.attributes),
                    cache(s.scope, s.scope.attributes),
                    dumpb(s.attributes),
                    _events_json(s.events),
                    _links_json(s.links),
                    s.dropped_attributes_count,
                    s.dropped_events_count,
                    s.dropped_links_count,
                    s.resource.schema_url,
                    s.scope.schema_url,
                    None if offsets is None else offsets[i],
                )
            )
        except (TypeError, ValueError) as exc:  # a value JSON cannot carry (e.g. a lone surrogate)
            rejected.append((i, f"span {s.name[:60]!r}: {exc}"))
    return out, rejected


def log_rows(
    records: Sequence[LogRecord], offsets: Sequence[int | None] | None = None
) -> tuple[list[tuple[Any, ...]], Rejected]:
    """One tuple per record in ``appends.LOG_INPUT`` order (``offsets`` as for :func:`span_rows`),
    and the records that cannot be encoded."""
    cache = _JsonCache()
    out: list[tuple[Any, ...]] = []
    rejected: Rejected = []
    for i, r in enumerate(records):
        try:
            out.append(
                (
                    r.time_unix_nano,
                    r.observed_time_unix_nano,
                    r.severity_number,
                    r.severity_text,
                    r.event_name,
                    dumpb(r.body),
                    dumpb(r.attributes),
                    r.trace_id,
                    r.span_id,
                    r.flags,
                    r.dropped_attributes_count,
                    r.resource.service_name,
                    r.scope.name,
                    r.scope.version,
                    cache(r.resource, r.resource.attributes),
                    cache(r.scope, r.scope.attributes),
                    r.resource.schema_url,
                    r.scope.schema_url,
                    None if offsets is None else offsets[i],
                )
            )
        except (TypeError, ValueError) as exc:
            rejected.append((i, f"log record: {exc}"))
    return out, rejected
