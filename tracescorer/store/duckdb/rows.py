"""Domain objects <-> column lists for the span log (no DuckDB here: plain data both ways)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tracescorer.model import LogRecord, Resource, Scope, Span, SpanEvent, SpanLink
from tracescorer.store.jsonvalue import dumpb, loads

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


# --- back to domain objects (span log readers: assembly recovery, re-assembly) -------------------

SPAN_SELECT = """
SELECT trace_id, span_id, parent_span_id, trace_state, flags, name, kind, start_time_unix_nano,
  end_time_unix_nano, status_code, status_message, scope_name, scope_version,
  resource_attributes, scope_attributes, attributes, events, links, dropped_attributes_count,
  dropped_events_count, dropped_links_count, resource_schema_url, scope_schema_url
FROM spans
"""

LOG_SELECT = """
SELECT time_unix_nano, observed_time_unix_nano, severity_number, severity_text, event_name, body,
  attributes, trace_id, span_id, flags, dropped_attributes_count, scope_name, scope_version,
  resource_attributes, scope_attributes, resource_schema_url, scope_schema_url
FROM log_records
"""


def span_from_row(row: Sequence[Any]) -> Span:
    (trace_id, span_id, parent, trace_state, flags, name, kind, start, end, code, message,
     scope_name, scope_version, res_attrs, scope_attrs, attrs, events, links, d_attrs, d_events,
     d_links, res_url, scope_url) = row  # fmt: skip
    return Span(
        trace_id=trace_id,
        span_id=span_id,
        parent_span_id=parent,
        name=name,
        kind=kind,
        start_time_unix_nano=start,
        end_time_unix_nano=end,
        status_code=code,
        status_message=message,
        attributes=loads(attrs),
        events=tuple(
            SpanEvent(
                name=e["name"],
                time_unix_nano=e["time_unix_nano"],
                attributes=e["attributes"],
                dropped_attributes_count=e["dropped_attributes_count"],
            )
            for e in loads(events)
        ),
        links=tuple(SpanLink(**link) for link in loads(links)),
        resource=Resource(attributes=loads(res_attrs), schema_url=res_url),
        scope=Scope(name=scope_name, version=scope_version, attributes=loads(scope_attrs), schema_url=scope_url),
        trace_state=trace_state,
        flags=flags,
        dropped_attributes_count=d_attrs,
        dropped_events_count=d_events,
        dropped_links_count=d_links,
    )


def log_from_row(row: Sequence[Any]) -> LogRecord:
    (time_ns, observed_ns, severity_number, severity_text, event_name, body, attrs, trace_id,
     span_id, flags, d_attrs, scope_name, scope_version, res_attrs, scope_attrs, res_url,
     scope_url) = row  # fmt: skip
    return LogRecord(
        time_unix_nano=time_ns,
        observed_time_unix_nano=observed_ns,
        severity_number=severity_number,
        severity_text=severity_text,
        event_name=event_name,
        body=loads(body),
        attributes=loads(attrs),
        trace_id=trace_id,
        span_id=span_id,
        flags=flags,
        dropped_attributes_count=d_attrs,
        resource=Resource(attributes=loads(res_attrs), schema_url=res_url),
        scope=Scope(name=scope_name, version=scope_version, attributes=loads(scope_attrs), schema_url=scope_url),
    )
