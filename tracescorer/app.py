"""The daemon: builds every component from :class:`Settings`, starts and stops them in order."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import os
import secrets
import signal

from aiohttp import web

from tracescorer import control
from tracescorer.api import ControlApi, OpsApi
from tracescorer.assembly.stage import AssemblyStage
from tracescorer.export import EvaluationExporter
from tracescorer.scoring.bindings import build_bindings
from tracescorer.scoring.runner import ScoringRunner
from tracescorer.config import Settings
from tracescorer.listeners import HttpListener, bind_socket, server_ssl_context
from tracescorer.metrics import Metrics
from tracescorer.monitors import MonitorService, ScoreMetrics
from tracescorer.receiver.grpc import OtlpGrpcReceiver
from tracescorer.receiver.http import OtlpHttpHandler
from tracescorer.receiver.ingest import Ingestor
from tracescorer.store.duckdb import DuckDBStore

log = logging.getLogger(__name__)


def _local(host: str) -> str:
    """An address a local client can connect to for a listener bound to ``host``."""
    return "127.0.0.1" if host in ("0.0.0.0", "") else "::1" if host == "::" else host


def _log_bindings(runner: ScoringRunner) -> None:
    bound = runner.bindings
    if not bound:
        log.warning("no scorers are bound: traces are stored and runs rebuilt, but nothing is scored "
                    "(add bindings under `scorers:`, see config/scorers.example.yaml)")
        return
    log.info("%d scorer(s) bound: %s", len(bound), ", ".join(
        f"{b.binding.id} ({b.binding.prebuilt or b.binding.python}, {b.binding.scope}"
        f"{', judge' if b.uses_judge else ''}, sampling {b.binding.sampling.ratio:g})" for b in bound))


class App:
    """One daemon instance. ``await app.start()``, then ``await app.stop()`` (or ``run()``)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        s = settings
        self.metrics = Metrics(score_buckets=s.score_metrics.buckets)
        self.store = DuckDBStore(
            s.store.path,
            max_queue_items=s.receiver.max_queue_items,
            max_batch_items=s.store.max_batch_items,
            observer=self.metrics,
            memory_limit=s.store.memory_limit,
            checkpoint_threshold=s.store.checkpoint_threshold,
            compression=s.store.compression,
        )
        self.ingestor = Ingestor(self.store, self.metrics, retry_after_s=s.receiver.retry_after_s,
                                 max_inflight_bytes=s.receiver.max_inflight_bytes)
        self.assembly = AssemblyStage(s.assembly, self.store, self.metrics)
        self.ingestor.add_listener(self.assembly)
        self.ingestor.add_backlog_check("assembly", self.assembly.backlog)
        self.exporter = self._build_exporter()
        self.runner = ScoringRunner(
            build_bindings(s.scorers, s.judge),
            self.store,
            self.metrics,
            s,
            listeners=[self.exporter] if self.exporter is not None else [],
        )
        self.assembly.add_listener(self.runner)
        self.monitors = MonitorService(s.monitors, [b.id for b in s.scorers], self.store, self.metrics)
        self.runner.add_score_listener(ScoreMetrics(self.metrics, max_agents=s.score_metrics.max_agents))
        self.runner.add_score_listener(self.monitors)
        self.ingestor.add_backlog_check("scoring", self.runner.backlog)
        # the ops API's own token, new at each start; never the ingest token
        self.api_token = secrets.token_urlsafe(32)
        self.ops = OpsApi(self.store, self.metrics, metrics_token=s.metrics.auth_token, readiness=self.not_ready_reason)
        self.control = ControlApi(self.store, token=self.api_token, max_rows=s.store.query_max_rows,
                                  timeout_s=s.store.query_timeout_s, runner=self.runner)
        self._api: HttpListener | None = None
        self.api_port = 0
        self.grpc: OtlpGrpcReceiver | None = None
        self._web_runner: web.AppRunner | None = None
        self._site: web.BaseSite | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self.grpc_port = 0
        self.http_port = 0
        self._stopped = asyncio.Event()

    def _build_exporter(self) -> EvaluationExporter | None:
        if not self.settings.export.enabled:
            return None
        return EvaluationExporter(self.store, self.settings.export, observer=self.metrics)

    def not_ready_reason(self) -> str | None:
        """Why the daemon should not get traffic now (None when ready): writes failing, or a
        pipeline stage over its bound."""
        failure = self.store.write_failure
        if failure is not None:
            return f"store writes are failing: {failure}"
        if self.store.pending_items >= self.store.max_queue_items:
            return "write queue full"
        return self.ingestor.over_bound()

    # --- lifecycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        s = self.settings
        await self.store.open()
        self.metrics.track_queue(lambda: self.store.pending_items)
        self.metrics.track_readiness(self.not_ready_reason)
        if s.store.path != ":memory:":
            self.metrics.track_db_size(s.store.path)
        await self.assembly.start()
        await self.monitors.start()  # before the runner: its windows are rebuilt from the stored scores
        if any(b.uses_judge for b in self.runner.bindings):
            # litellm's import and first-use set-up take seconds: in a worker thread, before the
            # daemon says it is ready, never on the event loop
            from tracescorer.scorers import judge

            await asyncio.to_thread(judge.preload)
        await self.runner.start()
        if self.exporter is not None:
            await self.exporter.start()
        tls = s.receiver.tls
        if s.receiver.grpc.enabled:
            self.grpc = OtlpGrpcReceiver(
                self.ingestor,
                self.metrics,
                host=s.receiver.grpc.host,
                port=s.receiver.grpc.port,
                max_message_bytes=s.receiver.max_message_bytes,
                auth_token=s.receiver.auth_token,
                cert_file=tls.cert_file,
                key_file=tls.key_file,
            )
            self.grpc_port = await self.grpc.start()
        if s.receiver.http.enabled:
            await self._start_http()
        if s.api.enabled:
            self._api = HttpListener(self.control.app(), host=s.api.host, port=s.api.port, what="ops API (api)",
                                     ssl_context=server_ssl_context(tls.cert_file, tls.key_file))
            self.api_port = await self._api.start()
        self._tasks.append(asyncio.create_task(self._retention_loop(), name="retention"))
        self._tasks.append(asyncio.create_task(self._watch_loop_lag(), name="loop-lag"))
        self.ops.ready = True
        if s.store.path != ":memory:":
            scheme = "https" if tls.enabled else "http"
            control.write_serve_info(
                s.store.path,
                control.ServeInfo(
                    pid=os.getpid(),
                    url=f"{scheme}://{_local(s.receiver.http.host)}:{self.http_port}" if self.http_port else "",
                    api_url=f"{scheme}://{_local(s.api.host)}:{self.api_port}" if self.api_port else "",
                    api_token=self.api_token,
                    cafile=str(tls.cert_file) if tls.cert_file else None,
                    grpc_port=self.grpc_port,
                ),
            )
        log.info("tracescorer serving: OTLP gRPC :%s, OTLP HTTP :%s, ops API %s:%s, store %s", self.grpc_port,
                 self.http_port, s.api.host, self.api_port, s.store.path)
        _log_bindings(self.runner)

    async def _start_http(self) -> None:
        s = self.settings
        handler = OtlpHttpHandler(
            self.ingestor, self.metrics, max_message_bytes=s.receiver.max_message_bytes, auth_token=s.receiver.auth_token
        )
        webapp = web.Application(client_max_size=s.receiver.max_message_bytes)
        webapp.add_routes(handler.routes() + self.ops.routes())
        # We decompress ourselves, with the size limit applied to the inflated body.
        self._web_runner = web.AppRunner(
            webapp, access_log=None, shutdown_timeout=s.receiver.request_timeout_s, auto_decompress=False
        )
        sock = bind_socket(s.receiver.http.host, s.receiver.http.port, "OTLP HTTP receiver (receiver.http)")
        await self._web_runner.setup()
        ssl_context = server_ssl_context(s.receiver.tls.cert_file, s.receiver.tls.key_file)
        self._site = web.SockSite(self._web_runner, sock, ssl_context=ssl_context)
        await self._site.start()
        self.http_port = sock.getsockname()[1]

    async def _watch_loop_lag(self, interval_s: float = 0.1) -> None:
        """How late the event loop runs a timer: the ``tracescorer_event_loop_lag_seconds`` histogram
        (anything blocking the loop shows here, and in every request's latency)."""
        loop = asyncio.get_running_loop()
        while True:
            due = loop.time() + interval_s
            await asyncio.sleep(interval_s)
            self.metrics.loop_lag.observe(max(0.0, loop.time() - due))

    async def _retention_loop(self) -> None:
        """Delete span-log rows received more than ``store.retention_days`` ago (and their assembly
        records); runs, scores and decisions are the history people query and are kept. Age counts
        from ``received_at``: replayed captures and clients with skewed clocks would otherwise be
        deleted on arrival."""
        s = self.settings.store
        while True:
            try:
                cutoff = dt.datetime.now(dt.timezone.utc) - dt.timedelta(days=s.retention_days)
                deleted = await self.store.prune_span_log(cutoff)
                for table, count in deleted.items():
                    self.metrics.retention_deleted.labels(table).inc(count)
                    if count:
                        log.info("retention deleted %d rows from %s", count, table)
            except Exception as exc:  # noqa: BLE001 - retention must never stop the daemon
                log.warning("retention pass failed: %s", exc)
            await asyncio.sleep(s.retention_interval_s)

    async def stop(self) -> None:
        """Stop intake, finish in-flight requests, commit what was queued, close the store."""
        if self._stopped.is_set():
            return
        self._stopped.set()
        self.ops.ready = False
        grace = self.settings.receiver.request_timeout_s
        self.ingestor.stop_accepting()
        if self._site is not None:
            await self._site.stop()
        if self.grpc is not None:
            await self.grpc.stop(grace)
        if self._web_runner is not None:
            await self._web_runner.cleanup()
        if self._api is not None:
            await self._api.stop()
        await self.assembly.stop()
        await self.runner.stop(self.settings.scoring.shutdown_timeout_s)
        await self.monitors.stop(self.settings.scoring.shutdown_timeout_s)
        if self.exporter is not None:
            await self.exporter.shutdown(self.settings.export.timeout_s)
        for task in self._tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        ok = await self.store.close(grace)
        if self.settings.store.path != ":memory:":
            control.remove_serve_info(self.settings.store.path)
        log.info("tracescorer stopped%s", "" if ok else " (writer did not drain)")

    async def run(self) -> None:
        """Start, serve until SIGTERM/SIGINT, stop gracefully."""
        loop = asyncio.get_running_loop()
        stop_requested = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop_requested.set)
        await self.start()
        try:
            await stop_requested.wait()
            log.info("signal received, shutting down")
        finally:
            await self.stop()
