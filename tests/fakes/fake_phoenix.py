"""A fake Arize Phoenix server: the REST annotation endpoints a Phoenix 20.x server documents.

``POST /v1/span_annotations`` and ``POST /v1/session_annotations`` take ``{"data": [...]}``
of ``{name, annotator_kind (LLM|CODE|HUMAN), result {label, score, explanation}, metadata,
identifier}`` plus ``span_id`` / ``session_id``; they upsert on (name, span|session, identifier)
as Phoenix does; with ``?sync=true`` an unknown span or session fails the whole request with 404
(Phoenix's sync mode), and the response is ``{"data": [{"id": ...}]}``. ``GET
/v1/projects/{project}/span_annotations?span_ids=...`` and ``.../session_annotations?session_ids=...``
list them. Spans and sessions exist once the test registers them (:meth:`add_span`,
:meth:`add_session`) as if the agent's traces had arrived.
"""

from __future__ import annotations

import itertools
from typing import Any

from aiohttp import web

from fakes.backend_server import BackendServer, Handler

__all__ = ["FakePhoenix"]

_KINDS = {"LLM", "CODE", "HUMAN"}


class FakePhoenix(BackendServer):
    def __init__(self, *, api_key: str | None = None) -> None:
        super().__init__()
        self.api_key = api_key
        self.spans: set[str] = set()
        self.sessions: set[str] = set()
        self.span_annotations: dict[tuple[str, str, str], dict[str, Any]] = {}
        self.session_annotations: dict[tuple[str, str, str], dict[str, Any]] = {}
        self._ids = itertools.count(1)

    def add_span(self, *span_ids: str) -> None:
        with self.lock:
            self.spans.update(span_ids)

    def add_session(self, *session_ids: str) -> None:
        with self.lock:
            self.sessions.update(session_ids)

    def routes(self) -> list[tuple[str, str, Handler]]:
        return [
            ("POST", "/v1/span_annotations", self._annotate_spans),
            ("POST", "/v1/session_annotations", self._annotate_sessions),
            ("GET", "/v1/projects/{project}/span_annotations", self._list_spans),
            ("GET", "/v1/projects/{project}/session_annotations", self._list_sessions),
        ]

    def _denied(self, request: web.Request) -> web.Response | None:
        if self.api_key is not None and request.headers.get("Authorization") != f"Bearer {self.api_key}":
            return web.json_response({"detail": "Invalid token"}, status=401)
        return None

    async def _annotate_spans(self, request: web.Request, body: Any) -> web.Response:
        return self._annotate(request, body, "span_id", self.spans, self.span_annotations, "Spans")

    async def _annotate_sessions(self, request: web.Request, body: Any) -> web.Response:
        return self._annotate(request, body, "session_id", self.sessions, self.session_annotations, "Sessions")

    def _annotate(
        self,
        request: web.Request,
        body: Any,
        key: str,
        known: set[str],
        store: dict[tuple[str, str, str], dict[str, Any]],
        noun: str,
    ) -> web.Response:
        if (denied := self._denied(request)) is not None:
            return denied
        data = body.get("data") if isinstance(body, dict) else None
        if not isinstance(data, list):
            return web.json_response({"detail": "data: field required"}, status=422)
        for item in data:
            if (
                not isinstance(item, dict)
                or not isinstance(item.get(key), str)
                or not isinstance(item.get("name"), str)
                or item.get("annotator_kind") not in _KINDS
            ):
                return web.json_response({"detail": f"invalid annotation {item!r}"}, status=422)
            if item["name"] == "note":
                return web.json_response({"detail": "The name 'note' is reserved"}, status=400)
        sync = request.query.get("sync", "false").lower() == "true"
        with self.lock:
            missing = sorted({item[key] for item in data} - known)
            if sync and missing:
                return web.json_response({"detail": f"{noun} with IDs {', '.join(missing)} do not exist."}, status=404)
            ids = []
            for item in data:
                k = (item["name"], item[key], item.get("identifier", ""))
                previous = store.get(k)
                ann_id = previous["id"] if previous else f"{noun[:-1]}Annotation:{next(self._ids)}"
                store[k] = {
                    **item,
                    "id": ann_id,
                    "identifier": item.get("identifier", ""),
                    "source": "API",
                    "result": item.get("result"),
                    "metadata": item.get("metadata") or {},
                }
                ids.append({"id": ann_id})
        return web.json_response({"data": ids if sync else []})

    async def _list_spans(self, request: web.Request, body: Any) -> web.Response:
        wanted = set(request.query.getall("span_ids", []))
        with self.lock:
            data = [a for (_, sid, _), a in self.span_annotations.items() if sid in wanted]
        return web.json_response({"data": data, "next_cursor": None})

    async def _list_sessions(self, request: web.Request, body: Any) -> web.Response:
        wanted = set(request.query.getall("session_ids", []))
        with self.lock:
            data = [a for (_, sid, _), a in self.session_annotations.items() if sid in wanted]
        return web.json_response({"data": data, "next_cursor": None})
