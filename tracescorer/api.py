"""The daemon's operational HTTP routes.

- :class:`OpsApi`, on the OTLP HTTP port: ``/healthz`` and ``/readyz`` (open, for probes and
  load balancers) and ``/metrics`` (Prometheus; bearer token ``metrics.auth_token`` when set).
- :class:`ControlApi`, on its own listener (``api:``, loopback by default): the read-only query
  endpoint (users' SQL), the product's typed reads the read commands make (``/api/v1/reads/<name>``,
  :mod:`tracescorer.store.reads`), backfill jobs and human labels (:mod:`tracescorer.calibration.routes`),
  behind a token generated at each start and published only in the 0600 state file
  (:mod:`tracescorer.control`), and ``POST /api/v1/reload``, which reloads the configuration
  (:mod:`tracescorer.daemon.reload`). The ingest token never opens it. At most
  ``store.query_max_concurrent`` queries run at once (each takes a query process); more are refused
  with 429 and Retry-After (the CLI waits and retries); typed reads run on the store's readers and
  are not counted. While the store process is started again after it died, queries and reads are
  answered 503 with Retry-After.
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from tracescorer.calibration.routes import LabelRoutes
from tracescorer.control import BACKFILL_PATH, QUERY_PATH, READS_PATH, RELOAD_PATH
from tracescorer.metrics import CONTENT_TYPE_LATEST, Metrics
from tracescorer.output import jsonable
from tracescorer.receiver.http import bearer_ok
from tracescorer.runner.backfill import BackfillError, BackfillProgress, BackfillRequest, run_backfill
from tracescorer.runner.stage import ScoringRunner
from tracescorer.store.api import (
    Health,
    QueryResult,
    QueryStore,
    ReadOnlyViolation,
    ReadStore,
    StoreError,
    StoreUnavailable,
)

log = logging.getLogger(__name__)

#: what a query refused for the concurrency bound is told to wait (seconds)
RETRY_AFTER_S = 1

Reload = Callable[[], Awaitable[tuple[int, dict[str, Any]]]]
"""Reloads the configuration: (HTTP status, JSON body): 200 applied, 4xx refused and why."""

Readiness = Callable[[], "str | None"]
"""Returns None when the daemon is ready, else the reason it is not (shown in ``/readyz``)."""


def result_to_json(result: QueryResult) -> dict[str, Any]:
    return {
        "columns": result.columns,
        "types": result.types,
        "rows": [[jsonable(v) for v in row] for row in result.rows],
        "truncated": result.truncated,
    }


def _away(exc: StoreUnavailable) -> web.Response:
    """The store process is being started again (or the daemon stops): not the request's fault."""
    away = web.json_response({"error": f"{exc}; retry in a moment"}, status=503)
    away.headers["Retry-After"] = str(RETRY_AFTER_S)
    return away


def _unauthorized() -> web.Response:
    resp = web.json_response({"error": "missing or invalid bearer token"}, status=401)
    resp.headers["WWW-Authenticate"] = "Bearer"
    return resp


class OpsApi:
    """``/healthz``, ``/readyz`` and ``/metrics`` beside the OTLP endpoints.

    ``readiness`` decides ``/readyz`` (None = ready, else the reason, answered with 503); the
    default provider is :meth:`default_readiness`.
    """

    def __init__(
        self,
        health: Health,
        metrics: Metrics,
        *,
        metrics_token: str = "",
        readiness: Readiness | None = None,
        detail: Callable[[], dict[str, Any]] | None = None,
        refresh: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self._health = health
        self._refresh = refresh  # before a scrape: the worker processes tell their metrics
        self._detail = detail
        self._metrics = metrics
        self._metrics_token = metrics_token
        self._readiness = readiness or self.default_readiness
        self.ready = False

    def routes(self) -> list[web.RouteDef]:
        return [
            web.get("/healthz", self.healthz),
            web.get("/readyz", self.readyz),
            web.get("/metrics", self.metrics),
        ]

    def default_readiness(self) -> str | None:
        """Not started, shutting down, or the store takes no writes."""
        if not (self.ready and self._health.accepting):
            return "not started or shutting down"
        return None

    async def healthz(self, request: web.Request) -> web.Response:
        if self._health.accepting or not self.ready:
            return web.json_response({"status": "ok"})
        return web.json_response({"status": "writer stopped"}, status=503)

    async def readyz(self, request: web.Request) -> web.Response:
        try:
            reason = self._readiness()
        except Exception as exc:  # noqa: BLE001 - a failing provider means "not ready", never a 500
            reason = f"readiness check failed: {type(exc).__name__}: {exc}"
        body: dict[str, Any] = {"ready": reason is None}
        if reason is not None:
            body["reason"] = reason
        if self._detail is not None:
            try:
                body["detail"] = self._detail()
            except Exception as exc:  # noqa: BLE001 - the detail never decides readiness
                body["detail"] = {"error": f"{type(exc).__name__}: {exc}"}
        return web.json_response(body, status=200 if reason is None else 503)

    async def metrics(self, request: web.Request) -> web.Response:
        if not bearer_ok(request.headers.get("Authorization"), self._metrics_token):
            return _unauthorized()
        if self._refresh is not None:
            await self._refresh()
        resp = web.Response(body=self._metrics.render())
        resp.headers["Content-Type"] = CONTENT_TYPE_LATEST
        return resp


class ControlApi:
    """The token-protected read-only query endpoint, typed reads and backfill jobs (the ops listener)."""

    def __init__(
        self,
        queries: QueryStore,
        *,
        reads: ReadStore,
        token: str,
        max_rows: int,
        timeout_s: float,
        max_concurrent: int = 2,
        runner: ScoringRunner | None = None,
        labels: LabelRoutes | None = None,
        reload: Reload | None = None,
    ) -> None:
        if not token:
            raise ValueError("the ops API needs a token")
        self._runner = runner
        self._reload = reload
        self._max_concurrent = max_concurrent
        self._running = 0  # queries in flight (the event loop's only: no lock)
        self._labels = labels
        self._jobs: dict[str, tuple[BackfillProgress, asyncio.Task[BackfillProgress]]] = {}
        self._queries = queries
        self._reads = reads
        self._token = token
        self._max_rows = max_rows
        self._timeout_s = timeout_s

    def app(self) -> web.Application:
        """The aiohttp application serving these routes (every one needs the token)."""
        webapp = web.Application(middlewares=[self._auth], client_max_size=1024 * 1024)
        webapp.add_routes(
            [
                web.post(QUERY_PATH, self.query),
                web.post(READS_PATH + "/{read}", self.read),
                web.post(BACKFILL_PATH, self.start_backfill),
                web.get(BACKFILL_PATH + "/{job}", self.backfill_status),
                web.post(RELOAD_PATH, self.reload),
                *(self._labels.routes() if self._labels is not None else ()),
            ]
        )
        return webapp

    @web.middleware
    async def _auth(self, request: web.Request, handler: Callable[[web.Request], Any]) -> web.StreamResponse:
        if not bearer_ok(request.headers.get("Authorization"), self._token):
            return _unauthorized()
        response: web.StreamResponse = await handler(request)
        return response

    async def reload(self, request: web.Request) -> web.Response:
        """Read the configuration file again and apply it (or refuse it, saying why)."""
        if self._reload is None:
            return web.json_response({"error": "this daemon cannot reload"}, status=503)
        status, body = await self._reload()
        return web.json_response(body, status=status)

    async def query(self, request: web.Request) -> web.Response:
        if self._running >= self._max_concurrent:
            # each query takes a query process of the store's box: past the bound, the client waits
            busy = web.json_response(
                {
                    "error": f"{self._running} queries are running, as many as store.query_max_concurrent allows; "
                    "retry in a moment"
                },
                status=429,
            )
            busy.headers["Retry-After"] = str(RETRY_AFTER_S)
            return busy
        self._running += 1
        try:
            return await self._query(request)
        finally:
            self._running -= 1

    async def _query(self, request: web.Request) -> web.Response:
        try:
            payload = await request.json()
            sql = payload["sql"]
            max_rows = min(int(payload.get("max_rows", self._max_rows)), self._max_rows)
            params = payload.get("params", [])
        except (ValueError, KeyError, TypeError):
            return web.json_response(
                {"error": 'expected JSON {"sql": ..., "max_rows": n, "params": [...]}'}, status=400
            )
        if not isinstance(sql, str):
            return web.json_response({"error": "sql must be a string"}, status=400)
        if not isinstance(params, list) or not all(p is None or isinstance(p, (str, int, float, bool)) for p in params):
            return web.json_response(
                {"error": "params must be a list of strings, numbers, booleans or null"}, status=400
            )
        try:
            result = await self._queries.query(sql, max_rows=max(1, max_rows), timeout_s=self._timeout_s, params=params)
        except ReadOnlyViolation as exc:
            return web.json_response({"error": str(exc)}, status=403)
        except StoreUnavailable as exc:
            return _away(exc)
        except StoreError as exc:
            return web.json_response({"error": str(exc)}, status=400)
        return web.Response(text=json.dumps(result_to_json(result)), content_type="application/json")

    async def read(self, request: web.Request) -> web.Response:
        """One typed read by name (``{"args": {name: value}}``), on the store's readers: no query
        process, so not bounded by ``store.query_max_concurrent``."""
        name = request.match_info["read"]
        try:
            payload = await request.json()
            args = payload.get("args", {}) if isinstance(payload, dict) else None
            if not isinstance(args, dict):
                raise ValueError('expected JSON {"args": {...}}')
            result = await self._reads.perform_named(name, args)
        except StoreUnavailable as exc:
            return _away(exc)
        except StoreError as exc:
            return web.json_response({"error": str(exc)}, status=500)
        except (ValueError, KeyError, TypeError) as exc:  # an unknown read, or arguments it refuses
            return web.json_response({"error": f"read {name}: {exc}"}, status=400)
        return web.Response(text=json.dumps(result_to_json(result)), content_type="application/json")

    async def start_backfill(self, request: web.Request) -> web.Response:
        """Start a backfill job in the daemon (the CLI polls its progress)."""
        if self._runner is None:
            return web.json_response({"error": "scoring is not running"}, status=503)
        try:
            req = BackfillRequest.from_json(await request.json())
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
        entry = self._jobs.get(request.match_info["job"])
        if entry is None:
            return web.json_response({"error": "no such backfill job"}, status=404)
        return web.json_response(entry[0].to_json())
