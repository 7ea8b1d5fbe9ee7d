"""Domain objects <-> column lists for the span log (no DuckDB here: plain data both ways)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tracescorer.model import LogRecord, Resource, Scope, Span, SpanEvent, SpanLink
from tracescorer.store.jsonvalue import dumps, loads

# Columns filled from Python for each table, in the order of the INSERT statements below; the
# TIMESTAMPTZ columns are computed in SQL from the microsecond values.
SPAN_INSERT = """
INSERT INTO spans SELECT
  trace_id, span_id, parent_span_id, trace_state, flags, name, kind,
  make_timestamp(start_us)::TIMESTAMPTZ, make_timestamp(end_us)::TIMESTAMPTZ,
  start_ns, end_ns, status_code, status_message, service_name, scope_name, scope_version,
  resource_attributes::JSON, scope_attributes::JSON, attributes::JSON, events::JSON, links::JSON,
  dropped_attributes_count, dropped_events_count, dropped_links_count,
  resource_schema_url, scope_schema_url, now()
FROM (SELECT
  unnest($1::VARCHAR[]) AS trace_id, unnest($2::VARCHAR[]) AS span_id,
  unnest($3::VARCHAR[]) AS parent_span_id, unnest($4::VARCHAR[]) AS trace_state,
  unnest($5::UBIGINT[]) AS flags, unnest($6::VARCHAR[]) AS name, unnest($7::VARCHAR[]) AS kind,
  unnest($8::BIGINT[]) AS start_us, unnest($9::BIGINT[]) AS end_us,
  unnest($10::UBIGINT[]) AS start_ns, unnest($11::UBIGINT[]) AS end_ns,
  unnest($12::VARCHAR[]) AS status_code, unnest($13::VARCHAR[]) AS status_message,
  unnest($14::VARCHAR[]) AS service_name, unnest($15::VARCHAR[]) AS scope_name,
  unnest($16::VARCHAR[]) AS scope_version, unnest($17::VARCHAR[]) AS resource_attributes,
  unnest($18::VARCHAR[]) AS scope_attributes, unnest($19::VARCHAR[]) AS attributes,
  unnest($20::VARCHAR[]) AS events, unnest($21::VARCHAR[]) AS links,
  unnest($22::UBIGINT[]) AS dropped_attributes_count,
  unnest($23::UBIGINT[]) AS dropped_events_count, unnest($24::UBIGINT[]) AS dropped_links_count,
  unnest($25::VARCHAR[]) AS resource_schema_url, unnest($26::VARCHAR[]) AS scope_schema_url)
"""

LOG_INSERT = """
INSERT INTO log_records SELECT
  make_timestamp(((CASE WHEN time_ns > 0 THEN time_ns ELSE observed_ns END) // 1000)::BIGINT)::TIMESTAMPTZ,
  time_ns, observed_ns, severity_number, severity_text, event_name, body::JSON,
  attributes::JSON, trace_id, span_id, flags, dropped_attributes_count, service_name,
  scope_name, scope_version, resource_attributes::JSON, scope_attributes::JSON,
  resource_schema_url, scope_schema_url, now()
FROM (SELECT
  unnest($1::UBIGINT[]) AS time_ns, unnest($2::UBIGINT[]) AS observed_ns,
  unnest($3::INTEGER[]) AS severity_number, unnest($4::VARCHAR[]) AS severity_text,
  unnest($5::VARCHAR[]) AS event_name, unnest($6::VARCHAR[]) AS body,
  unnest($7::VARCHAR[]) AS attributes, unnest($8::VARCHAR[]) AS trace_id,
  unnest($9::VARCHAR[]) AS span_id, unnest($10::UBIGINT[]) AS flags,
  unnest($11::UBIGINT[]) AS dropped_attributes_count, unnest($12::VARCHAR[]) AS service_name,
  unnest($13::VARCHAR[]) AS scope_name, unnest($14::VARCHAR[]) AS scope_version,
  unnest($15::VARCHAR[]) AS resource_attributes, unnest($16::VARCHAR[]) AS scope_attributes,
  unnest($17::VARCHAR[]) AS resource_schema_url, unnest($18::VARCHAR[]) AS scope_schema_url)
"""


class _JsonCache:
    """Resources and scopes are shared by every span of a request: encode each once."""

    def __init__(self) -> None:
        self._cache: dict[int, tuple[object, str]] = {}

    def __call__(self, owner: object, attributes: dict[str, Any]) -> str:
        hit = self._cache.get(id(owner))
        if hit is not None and hit[0] is owner:
            return hit[1]
        text = dumps(attributes)
        self._cache[id(owner)] = (owner, text)
        return text


def _events_json(events: Sequence[SpanEvent]) -> str:
    if not events:
        return "[]"
    return dumps(
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


def _links_json(links: Sequence[SpanLink]) -> str:
    if not links:
        return "[]"
    return dumps(
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


def concat_columns(parts: list[list[list[Any]]]) -> list[list[Any]] | None:
    """Join the column lists of several jobs into one set (None when there are none)."""
    if not parts:
        return None
    if len(parts) == 1:
        return parts[0]
    out: list[list[Any]] = [[] for _ in parts[0]]
    for cols in parts:
        for target, col in zip(out, cols):
            target.extend(col)
    return out


def span_columns(spans: Sequence[Span]) -> list[list[Any]]:
    """Column lists for :data:`SPAN_INSERT`."""
    cache = _JsonCache()
    rows = [
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
            dumps(s.attributes),
            _events_json(s.events),
            _links_json(s.links),
            s.dropped_attributes_count,
            s.dropped_events_count,
            s.dropped_links_count,
            s.resource.schema_url,
            s.scope.schema_url,
        )
        for s in spans
    ]
    return [list(col) for col in zip(*rows)] if rows else [[] for _ in range(26)]


def log_columns(records: Sequence[LogRecord]) -> list[list[Any]]:
    """Column lists for :data:`LOG_INSERT`."""
    cache = _JsonCache()
    rows = [
        (
            r.time_unix_nano,
            r.observed_time_unix_nano,
            r.severity_number,
            r.severity_text,
            r.event_name,
            dumps(r.body),
            dumps(r.attributes),
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
        )
        for r in records
    ]
    return [list(col) for col in zip(*rows)] if rows else [[] for _ in range(18)]


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
        scope=Scope(
            name=scope_name, version=scope_version, attributes=loads(scope_attrs), schema_url=scope_url
        ),
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
        scope=Scope(
            name=scope_name, version=scope_version, attributes=loads(scope_attrs), schema_url=scope_url
        ),
    )
