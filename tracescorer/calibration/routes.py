"""``POST /api/v1/labels`` on the ops API (the same token as every ops route).

The body is ``{"labels": [{"target", "scorer", "value", "by", "note", "at"}, ...]}`` (or one such
object), with optional ``by`` (who, for items that name nobody), ``source`` (where the labels
come from, stored with them: ``api`` when not given; the CLI says ``cli`` or ``import:<file>``), ``skip_blank`` (items without a value are counted, not refused) and ``names``
(how to name each item in errors, e.g. a file's lines). Labels are stored all or none: a bad item
is a 400 naming it. The answer says how many were written, how many were older than the stored
label of the same person, and the scorer ids no binding has.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from aiohttp import web

from tracescorer.calibration import labelling
from tracescorer.records.labels import API_SOURCE
from tracescorer.store.api import LabelStore, ReadStore, StoreError

log = logging.getLogger(__name__)

LABELS_PATH = "/api/v1/labels"
MAX_LABELS = 10_000  # per request: a larger import is sent in parts


class LabelRoutes:
    """The label route of the ops API; ``on_labels`` callbacks are told after labels were stored."""

    def __init__(self, labels: LabelStore, reads: ReadStore, scopes: Mapping[str, str]) -> None:
        self._labels = labels
        self._reads = reads
        self._scopes = dict(scopes)
        self.on_labels: list[Callable[[], None]] = []

    def rebind(self, scopes: Mapping[str, str]) -> None:
        """The bound scorers' scopes after a configuration reload."""
        self._scopes = dict(scopes)

    def routes(self) -> list[web.RouteDef]:
        return [web.post(LABELS_PATH, self.post)]

    async def post(self, request: web.Request) -> web.Response:
        try:
            payload = await request.json()
        except ValueError:
            return _error('expected JSON {"labels": [{"target", "scorer", "value", "by", "note", "at"}, ...]}', 400)
        if isinstance(payload, dict) and "labels" not in payload and "target" in payload:
            payload = {"labels": [payload]}
        items = payload.get("labels") if isinstance(payload, dict) else None
        if not isinstance(items, list) or not items:
            return _error('expected JSON {"labels": [...]} with at least one label', 400)
        if len(items) > MAX_LABELS:
            return _error(f"{len(items)} labels in one request; send at most {MAX_LABELS} at a time", 413)
        names = payload.get("names")
        where = _namer(names if isinstance(names, list) and len(names) == len(items) else None)
        given = payload.get("source")
        source = given[:200] if isinstance(given, str) and given.strip() else API_SOURCE
        author = payload.get("by") if isinstance(payload.get("by"), str) else None
        try:
            stored = await labelling.store(
                items,
                labels=self._labels,
                scopes=self._scopes,
                source=source,
                reads=self._reads,
                author=author,
                where=where,
                skip_blank=bool(payload.get("skip_blank", False)),
            )
        except labelling.LabelError as exc:
            return _error(str(exc), 400)
        except StoreError as exc:
            return _error(f"the store refused the labels: {exc}", 503)
        if stored.written:
            log.info("stored %d label(s) from the ops API (%s)", stored.written, source)
            for callback in self.on_labels:
                callback()
        return web.json_response(labelling.answer(stored, items, self._scopes))


def _namer(names: Sequence[Any] | None) -> Callable[[int], str]:
    if names is None:
        return lambda i: f"labels[{i}]"
    return lambda i: str(names[i])


def _error(message: str, status: int) -> web.Response:
    return web.json_response({"error": message}, status=status)
