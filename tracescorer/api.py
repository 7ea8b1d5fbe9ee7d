"""Operational HTTP routes beside the OTLP endpoints: health, readiness, metrics, local queries."""

from __future__ import annotations

import asyncio
import datetime as dt
import decimal
import json
import uuid
from collections.abc import Callable
from typing import Any

from aiohttp import web

from tracescorer.metrics import CONTENT_TYPE_LATEST, Metrics
from tracescorer.receiver.http import bearer_ok
from tracescorer.scoring.backfill import BackfillError, BackfillProgress, BackfillRequest, run_backfill
from tracescorer.scoring.runner import ScoringRunner
from tracescorer.store.base import QueryResult, ReadOnlyViolation, Store, StoreError

from tracescorer.control import BACKFILL_PATH, QUERY_PATH


def jsonable(value: Any) -> Any:
    """DuckDB result values as JSON-friendly data (timestamps ISO 8601, decimals as numbers)."""
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    if isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, (bytes, bytearray)):
        return value.hex()
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    return value


def result_to_json(result: QueryResult) -> dict[str, Any]:
    return {
        "columns": result.columns,
        "types": result.types,
        "rows": [[jsonable(v) for v in row] for row in result.rows],
        "truncated": result.truncated,
    }


class OpsApi:
    """``/healthz``, ``/readyz``, ``/metrics`` and the token-protected read-only query endpoint."""

    def __init__(self, store: Store, metrics: Metrics, *, query_token: str, max_rows: int, timeout_s: float,
                 runner: ScoringRunner | None = None, readiness: Callable[[], str | None] | None = None) -> None:
        self._runner = runner
        self._jobs: dict[str, tuple[BackfillProgress, asyncio.Task[BackfillProgress]]] = {}
        self._store = store
        self._metrics = metrics
        self._token = query_token
        self._max_rows = max_rows
        self._timeout_s = timeout_s
        self._readiness = readiness
        self.ready = False

    def routes(self) -> list[web.RouteDef]:
        return [
            web.get("/healthz", self.healthz),
            web.get("/readyz", self.readyz),
            web.get("/metrics", self.metrics),
            web.post(QUERY_PATH, self.query),
            web.post(BACKFILL_PATH, self.start_backfill),
            web.get(BACKFILL_PATH + "/{job}", self.backfill_status),
        ]

    async def healthz(self, request: web.Request) -> web.Response:
        if self._store.accepting or not self.ready:
            return web.json_response({"status": "ok"})
        return web.json_response({"status": "writer stopped"}, status=503)

    async def readyz(self, request: web.Request) -> web.Response:
        if not (self.ready and self._store.accepting):
            return web.json_response({"ready": False, "reason": "not started or shutting down"}, status=503)
        reason = self._readiness() if self._readiness is not None else None
        if reason is not None:
            return web.json_response({"ready": False, "reason": reason}, status=503)
        return web.json_response({"ready": True})

    async def metrics(self, request: web.Request) -> web.Response:
        resp = web.Response(body=self._metrics.render())
        resp.headers["Content-Type"] = CONTENT_TYPE_LATEST
        return resp

    async def query(self, request: web.Request) -> web.Response:
        if not bearer_ok(request.headers.get("Authorization"), self._token):
            return web.json_response({"error": "missing or invalid bearer token"}, status=401)
        try:
            payload = await request.json()
            sql = payload["sql"]
            max_rows = min(int(payload.get("max_rows", self._max_rows)), self._max_rows)
        except (ValueError, KeyError, TypeError):
            return web.json_response({"error": "expected JSON {\"sql\": ..., \"max_rows\": n}"}, status=400)
        if not isinstance(sql, str):
            return web.json_response({"error": "sql must be a string"}, status=400)
        try:
            result = await self._store.query(sql, max_rows=max_rows, timeout_s=self._timeout_s)
        except ReadOnlyViolation as exc:
            return web.json_response({"error": str(exc)}, status=403)
        except StoreError as exc:
            return web.json_response({"error": str(exc)}, status=400)
        return web.Response(text=json.dumps(result_to_json(result)), content_type="application/json")

    async def start_backfill(self, request: web.Request) -> web.Response:
        """Start a backfill job in the daemon (the CLI polls its progress)."""
        if not bearer_ok(request.headers.get("Authorization"), self._token):
            return web.json_response({"error": "missing or invalid bearer token"}, status=401)
        if self._runner is None:
            return web.json_response({"error": "scoring is not running"}, status=503)
        try:
            payload = await request.json()
            req = BackfillRequest(
                scorer_id=str(payload["scorer"]),
                since=dt.datetime.fromisoformat(payload["since"]) if payload.get("since") else None,
                until=dt.datetime.fromisoformat(payload["until"]) if payload.get("until") else None,
                filter=dict(payload.get("filter") or {}),
                dry_run=bool(payload.get("dry_run", False)),
            )
        except (ValueError, KeyError, TypeError) as exc:
            return web.json_response({"error": f"bad backfill request: {exc}"}, status=400)
        progress = BackfillProgress()
        # validate before answering, so a bad scorer id or filter is a 400 and not a failed job
        if self._runner.binding(req.scorer_id) is None:
            known = ", ".join(b.binding.id for b in self._runner.bindings) or "none"
            return web.json_response({"error": f"scorer {req.scorer_id!r} is not bound (bound: {known})"}, status=400)
        job = uuid.uuid4().hex[:12]
        # keep the progress of recent jobs only: finished ones beyond the newest 100 are dropped
        finished = [j for j, (p, _) in self._jobs.items() if p.finished]
        for old in finished[: max(0, len(self._jobs) - 100)]:
            del self._jobs[old]
        task = asyncio.create_task(self._backfill(req, progress), name=f"backfill-{job}")
        self._jobs[job] = (progress, task)
        return web.json_response({"job": job}, status=202)

    async def _backfill(self, req: BackfillRequest, progress: BackfillProgress) -> BackfillProgress:
        assert self._runner is not None
        try:
            return await run_backfill(self._runner, req, progress)
        except BackfillError as exc:
            progress.error = str(exc)
        except Exception as exc:  # noqa: BLE001 - reported to the polling CLI instead of lost in a task
            progress.error = f"{type(exc).__name__}: {exc}"
        progress.finished = True
        return progress

    async def backfill_status(self, request: web.Request) -> web.Response:
        if not bearer_ok(request.headers.get("Authorization"), self._token):
            return web.json_response({"error": "missing or invalid bearer token"}, status=401)
        entry = self._jobs.get(request.match_info["job"])
        if entry is None:
            return web.json_response({"error": "no such backfill job"}, status=404)
        return web.json_response(entry[0].to_json())
