"""The daemon: builds every component from :class:`Settings`, starts and stops them in order.

Components start on one :class:`contextlib.AsyncExitStack` in dependency order (store, export,
monitors, scoring, assembly, receivers, ops API), so a failed start closes what had started, and
the stop closes them in reverse. The whole stop is bounded by ``shutdown.grace_s``: each stage
gets what is left of it (scoring drains until its share runs out, then cancels judge calls still
running; their targets are scored after the next start).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import os
import secrets
import signal
import time

from aiohttp import web

from tracescorer import __version__, control
from tracescorer.aio import cancel
from tracescorer.api import ControlApi, OpsApi
from tracescorer.assembly.idle import IdleConversations, LocalIdleConversations, SharedIdleConversations
from tracescorer.assembly.stage import AssemblyStage
from tracescorer.config import Settings
from tracescorer.export import EvaluationExporter
from tracescorer.export.exporter import default_owner
from tracescorer.listeners import HttpListener, bind_socket, server_ssl_context
from tracescorer.metrics import Metrics
from tracescorer.monitors import MonitorService, ScoreMetrics
from tracescorer.receiver.grpc import OtlpGrpcReceiver
from tracescorer.receiver.http import OtlpHttpHandler
from tracescorer.receiver.ingest import Ingestor
from tracescorer.scoring.bindings import build_bindings
from tracescorer.scoring.limits import SharedRateLimiter
from tracescorer.scoring.runner import ScoringRunner
from tracescorer.store import layout
from tracescorer.store.base import ResultsPruned, SharedCoordination
from tracescorer.store.composite import CompositeStore
from tracescorer.store.factory import build_store
from tracescorer.store.postgres.leader import AdvisoryLeader

log = logging.getLogger(__name__)

MONITOR_REBUILD_S = 5.0  # postgres mode: how often the leader recounts its windows from every daemon's scores
MONITOR_LEADER_CHECK_S = 5.0


def _address(host: str, port: int) -> str:
    """``127.0.0.1:4317``, ``[::]:4317``: what a listener bound, as logged at start."""
    if not port:
        return "off"
    return f"[{host}]:{port}" if ":" in host else f"{host or '0.0.0.0'}:{port}"


def _warn_if_exposed(s: Settings) -> None:
    exposed = [
        f"{what} {listener.host}"
        for what, listener in (("receiver.grpc", s.receiver.grpc), ("receiver.http", s.receiver.http))
        if listener.enabled and listener.host not in ("127.0.0.1", "::1", "localhost")
    ]
    if exposed and not s.receiver.auth_token:
        log.warning(
            "%s: OTLP ingest is reachable beyond this host without receiver.auth_token: anyone who reaches "
            "the port can write traces (set TRACESCORER_AUTH_TOKEN, or keep the host 127.0.0.1)",
            ", ".join(exposed),
        )


def _local(host: str) -> str:
    """An address a local client can connect to for a listener bound to ``host``."""
    return "127.0.0.1" if host in ("0.0.0.0", "") else "::1" if host == "::" else host


def _log_bindings(runner: ScoringRunner) -> None:
    bound = runner.bindings
    if not bound:
        log.warning(
            "no scorers are bound: traces are stored and runs rebuilt, but nothing is scored "
            "(add bindings under `scorers:`, see config/scorers.example.yaml)"
        )
        return
    log.info(
        "%d scorer(s) bound: %s",
        len(bound),
        ", ".join(
            f"{b.binding.id} ({b.binding.prebuilt or b.binding.python}, {b.binding.scope}"
            f"{', judge' if b.uses_judge else ''}, sampling {b.binding.sampling.ratio:g})"
            for b in bound
        ),
    )


class App:
    """One daemon instance. ``await app.start()``, then ``await app.stop()`` (or ``run()``)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        s = settings
        self.metrics = Metrics(score_buckets=s.score_metrics.buckets)
        self.owner = default_owner()
        self.store = build_store(s, observer=self.metrics, owner=self.owner)
        # postgres mode: several daemons coordinate through the shared store
        self.coordination: SharedCoordination | None = self.store if isinstance(self.store, CompositeStore) else None
        self.shared = self.coordination is not None
        self._leader: AdvisoryLeader | None = None
        self.ingestor = Ingestor(
            self.store,
            self.metrics,
            retry_after_s=s.receiver.retry_after_s,
            max_inflight_bytes=s.receiver.max_inflight_bytes,
            max_requests=s.receiver.max_concurrent_requests,
        )
        bound = build_bindings(s.scorers, s.judge)
        self.conversations = self._build_idler(any(b.binding.scope == "conversation" for b in bound))
        self.assembly = AssemblyStage(s.assembly, self.store, self.metrics, conversations=self.conversations)
        self.ingestor.add_listener(self.assembly)
        self.ingestor.add_backlog_check(
            "assembly", self.assembly.backlog, self.assembly.pressure, self.assembly.throughput
        )
        self.exporter = self._build_exporter()
        self.runner = ScoringRunner(
            bound,
            self.store,
            self.metrics,
            s,
            listeners=[self.exporter] if self.exporter is not None else [],
            rate=SharedRateLimiter(self.coordination, s.judge.requests_per_minute) if self.coordination else None,
            shared_budget=self.shared,
        )
        self.assembly.add_listener(self.runner)
        self.assembly.set_conversation_sink(self.runner)
        self.monitors = self._new_monitors()
        self.runner.add_score_listener(ScoreMetrics(self.metrics, max_agents=s.score_metrics.max_agents))
        self.runner.add_score_listener(self.monitors)
        self.ingestor.add_backlog_check("scoring", self.runner.backlog, self.runner.pressure)
        # the ops API's own token, new at each start; never the ingest token
        self.api_token = secrets.token_urlsafe(32)
        self.ops = OpsApi(self.store, self.metrics, metrics_token=s.metrics.auth_token, readiness=self.not_ready_reason)
        self.control = ControlApi(
            self.store,
            token=self.api_token,
            max_rows=s.store.query_max_rows,
            timeout_s=s.store.query_timeout_s,
            runner=self.runner,
        )
        self._api: HttpListener | None = None
        self.api_port = 0
        self.grpc: OtlpGrpcReceiver | None = None
        self._web_runner: web.AppRunner | None = None
        self._site: web.BaseSite | None = None
        self.grpc_port = 0
        self.http_port = 0
        self._stack: contextlib.AsyncExitStack | None = None
        self._deadline = 0.0
        self._stopped = asyncio.Event()

    def _build_exporter(self) -> EvaluationExporter | None:
        if not self.settings.export.enabled:
            return None
        return EvaluationExporter(self.store, self.settings.export, observer=self.metrics, owner=self.owner)

    def _new_monitors(self) -> MonitorService:
        s = self.settings
        return MonitorService(
            s.monitors,
            [b.id for b in s.scorers],
            self.store,
            self.metrics,
            rebuild_interval_s=MONITOR_REBUILD_S if self.shared else None,
        )

    def _build_idler(self, needed: bool) -> IdleConversations | None:
        if not needed:
            return None
        s = self.settings
        if self.coordination is None:
            return LocalIdleConversations(self.metrics, idle_s=s.assembly.conversation_idle_s)
        pg = s.store.postgres
        # claims in flight per daemon: enough to keep its judges busy, few enough to spread the work
        in_flight = max(1, min(s.scoring.max_queue // 2, 4 * s.judge.max_concurrency))
        return SharedIdleConversations(
            self.coordination,
            self.metrics,
            idle_s=s.assembly.conversation_idle_s,
            lease_s=pg.claim_lease_s,
            interval_s=pg.claim_interval_s,
            max_in_flight=in_flight,
            max_age_s=s.scoring.recover_window_s,
        )

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

    def _left(self, reserve_s: float = 0.0) -> float:
        """Seconds of the shutdown grace left after keeping ``reserve_s`` for later stages."""
        return max(0.1, self._deadline - time.monotonic() - reserve_s)

    @property
    def _store_reserve_s(self) -> float:
        return min(5.0, self.settings.shutdown.grace_s * 0.2)

    async def start(self) -> None:
        """Start every component; on failure close what had started (then re-raise)."""
        s = self.settings
        stack = contextlib.AsyncExitStack()
        self._deadline = time.monotonic() + s.shutdown.grace_s  # a failed start closes within the grace too
        try:
            await self._start_on(stack)
        except BaseException:
            self._deadline = time.monotonic() + s.shutdown.grace_s
            await stack.aclose()
            raise
        self._stack = stack

    async def _start_on(self, stack: contextlib.AsyncExitStack) -> None:
        s = self.settings
        reserve = self._store_reserve_s
        await self.store.open()
        stack.push_async_callback(self._close_store)
        self.metrics.track_queue(lambda: self.store.pending_items)
        self.metrics.track_readiness(self.not_ready_reason)
        if s.store.path != ":memory:":
            self.metrics.track_db_size(layout.files(s.store.path))
        if self.conversations is not None:  # settles claims after scoring stopped, before the store closes
            conversations = self.conversations
            stack.push_async_callback(lambda: conversations.close(self._left(reserve)))
        if self.exporter is not None:
            exporter = self.exporter
            await exporter.start()
            stack.push_async_callback(lambda: exporter.shutdown(min(s.export.timeout_s, self._left(reserve))))
        if self.shared and s.monitors:  # one daemon of several runs the monitors
            leading = asyncio.create_task(self._lead_monitors(), name="monitors-leader")
            stack.push_async_callback(self._stop_leading, leading)
        else:
            await self.monitors.start()  # before the runner: its windows are rebuilt from the stored scores
            stack.push_async_callback(
                lambda: self.monitors.stop(min(s.scoring.shutdown_timeout_s, self._left(reserve)))
            )
        if any(b.uses_judge for b in self.runner.bindings):
            # litellm's import and first-use set-up take seconds: in a worker thread, before the
            # daemon says it is ready, never on the event loop
            from tracescorer.scorers import judge

            await asyncio.to_thread(judge.preload)
        await self.runner.start()
        stack.push_async_callback(self._stop_scoring)
        await self.assembly.start()
        stack.push_async_callback(self.assembly.stop)
        await self._start_receivers(stack)
        if s.api.enabled:
            self._api = HttpListener(
                self.control.app(),
                host=s.api.host,
                port=s.api.port,
                what="ops API (api)",
                ssl_context=server_ssl_context(s.receiver.tls.cert_file, s.receiver.tls.key_file),
            )
            self.api_port = await self._api.start()
            stack.push_async_callback(self._api.stop)
        retention = asyncio.create_task(self._retention_loop(), name="retention")
        budget = asyncio.create_task(self._index_budget_loop(), name="index-budget")
        stack.push_async_callback(cancel, [retention, budget])
        lag = asyncio.create_task(self._watch_loop_lag(), name="loop-lag")
        stack.push_async_callback(cancel, [lag])
        self.ops.ready = True
        stack.callback(setattr, self.ops, "ready", False)
        self._write_serve_info()
        log.info(
            "tracescorer %s serving (pid %d): OTLP gRPC %s, OTLP HTTP %s (and /metrics, /healthz, /readyz), "
            "ops API %s, store %s%s",
            __version__,
            os.getpid(),
            _address(s.receiver.grpc.host, self.grpc_port),
            _address(s.receiver.http.host, self.http_port),
            _address(s.api.host, self.api_port),
            s.store.path,
            " + PostgreSQL results" if self.shared else "",
        )
        _log_bindings(self.runner)
        _warn_if_exposed(s)

    async def _start_receivers(self, stack: contextlib.AsyncExitStack) -> None:
        s = self.settings
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
            grpc = self.grpc
            self.grpc_port = await grpc.start()
            stack.push_async_callback(lambda: grpc.stop(self._receiver_grace()))
        if s.receiver.http.enabled:
            await self._start_http(stack)
        stack.callback(self.ingestor.stop_accepting)  # first thing at stop: new requests get 503

    def _receiver_grace(self) -> float:
        return min(self.settings.receiver.request_timeout_s, self._left(self._store_reserve_s) / 4)

    async def _start_http(self, stack: contextlib.AsyncExitStack) -> None:
        s = self.settings
        handler = OtlpHttpHandler(
            self.ingestor,
            self.metrics,
            max_message_bytes=s.receiver.max_message_bytes,
            auth_token=s.receiver.auth_token,
        )
        webapp = web.Application(client_max_size=s.receiver.max_message_bytes)
        webapp.add_routes(handler.routes() + self.ops.routes())
        # We decompress ourselves, with the size limit applied to the inflated body.
        self._web_runner = web.AppRunner(
            webapp,
            access_log=None,
            auto_decompress=False,
            shutdown_timeout=min(s.receiver.request_timeout_s, s.shutdown.grace_s / 4),
        )
        sock = bind_socket(s.receiver.http.host, s.receiver.http.port, "OTLP HTTP receiver (receiver.http)")
        await self._web_runner.setup()
        stack.push_async_callback(self._web_runner.cleanup)
        ssl_context = server_ssl_context(s.receiver.tls.cert_file, s.receiver.tls.key_file)
        self._site = web.SockSite(self._web_runner, sock, ssl_context=ssl_context)
        await self._site.start()
        stack.push_async_callback(self._site.stop)
        self.http_port = sock.getsockname()[1]

    def _write_serve_info(self) -> None:
        s = self.settings
        if s.store.path == ":memory:":
            return
        scheme = "https" if s.receiver.tls.enabled else "http"
        control.write_serve_info(
            s.store.path,
            control.ServeInfo(
                pid=os.getpid(),
                url=f"{scheme}://{_local(s.receiver.http.host)}:{self.http_port}" if self.http_port else "",
                api_url=f"{scheme}://{_local(s.api.host)}:{self.api_port}" if self.api_port else "",
                api_token=self.api_token,
                cafile=str(s.receiver.tls.cert_file) if s.receiver.tls.cert_file else None,
                grpc_port=self.grpc_port,
            ),
        )

    async def _lead_monitors(self) -> None:
        """postgres mode: run the monitors while this daemon holds the ``monitors`` advisory lock."""
        pg = self.settings.store.postgres
        self._leader = AdvisoryLeader(pg.dsn, "monitors", connect_timeout_s=pg.connect_timeout_s)
        while True:
            try:
                if not self._leader.leading:
                    if await self._leader.try_acquire():
                        self.monitors = self._new_monitors()
                        await self.monitors.start()
                        log.info("this daemon runs the monitors (it holds their PostgreSQL advisory lock)")
                elif not await self._leader.held():
                    log.error("lost the monitors' advisory lock (PostgreSQL connection); another daemon takes over")
                    await self.monitors.stop(5.0)
            except Exception:  # try again next round
                log.exception("monitor leadership check failed")
            await asyncio.sleep(MONITOR_LEADER_CHECK_S)

    async def _stop_leading(self, task: asyncio.Task[None]) -> None:
        await cancel([task])
        leader = self._leader
        if leader is not None and leader.leading:
            await self.monitors.stop(min(self.settings.scoring.shutdown_timeout_s, self._left(self._store_reserve_s)))
            await leader.release()

    async def _stop_scoring(self) -> None:
        s = self.settings
        # what scoring may take: the grace minus the store's reserve and a little for export and claims
        budget = min(s.scoring.shutdown_timeout_s, self._left(self._store_reserve_s + 1.0))
        if not await self.runner.shutdown(budget):
            log.warning("scoring stopped with work abandoned: those targets are scored after the next start")

    async def _close_store(self) -> None:
        ok = await self.store.close(self._left())
        if self.settings.store.path != ":memory:":
            control.remove_serve_info(self.settings.store.path)
        log.info("tracescorer stopped%s", "" if ok else " (writer did not drain)")

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
        records), and results last written more than ``store.results_retention_days`` ago. Span-log
        age counts from ``received_at``: replayed captures and clients with skewed clocks would
        otherwise be deleted on arrival."""
        s = self.settings.store
        while True:
            try:
                now = dt.datetime.now(dt.UTC)
                self._count_deleted(await self.store.prune_span_log(now - dt.timedelta(days=s.retention_days)))
                if s.results_retention_days is not None:
                    self._count_pruned(
                        await self.store.prune_results(now - dt.timedelta(days=s.results_retention_days))
                    )
            except Exception as exc:  # noqa: BLE001 - retention must never stop the daemon
                log.warning("retention pass failed: %s", exc)
            await asyncio.sleep(s.retention_interval_s)

    async def _index_budget_loop(self) -> None:
        """Keep the results' key indexes within ``store.index_memory_share`` of ``store.memory_limit``
        (DuckDB holds them in memory; past ``memory_limit`` every write fails): the oldest results
        are deleted, loudly."""
        s = self.settings.store
        while True:
            await asyncio.sleep(s.index_check_interval_s)
            try:
                self._count_pruned(await self.store.prune_results(None))
            except Exception as exc:  # noqa: BLE001 - must never stop the daemon
                log.warning("index budget pass failed: %s", exc)

    def _count_deleted(self, deleted: dict[str, int], *, quiet: bool = False) -> None:
        for table, count in deleted.items():
            self.metrics.retention_deleted.labels(table).inc(count)
            if count and not quiet:
                log.info("retention deleted %d rows from %s", count, table)

    def _count_pruned(self, pruned: ResultsPruned) -> None:
        if pruned.keys is not None:
            self.metrics.index_keys.set(pruned.keys)
        if pruned.index_bytes is not None:
            self.metrics.index_bytes.set(pruned.index_bytes)
        self._count_deleted(pruned.deleted, quiet=pruned.budget_cutoff is not None)  # the budget warns below, once
        if pruned.budget_cutoff is None:
            return
        s = self.settings.store
        log.warning(
            "the store's key indexes held %d keys, over their budget of %d (store.index_memory_share %g of "
            "store.memory_limit %s): deleted the results written before %s (%s; in %d "
            "transactions); raise store.memory_limit to keep more, or keep results in PostgreSQL",
            pruned.keys,
            pruned.max_keys,
            s.index_memory_share,
            s.memory_limit,
            pruned.budget_cutoff.isoformat(timespec="seconds"),
            ", ".join(f"{table} {n}" for table, n in pruned.deleted.items() if n) or "nothing",
            pruned.transactions,
        )

    async def stop(self) -> None:
        """Stop intake, finish in-flight requests, score and export what time allows, commit what
        was queued, close the store: all within ``shutdown.grace_s``."""
        if self._stopped.is_set() or self._stack is None:
            return
        self._stopped.set()
        started = time.monotonic()
        self._deadline = started + self.settings.shutdown.grace_s
        stack, self._stack = self._stack, None
        await stack.aclose()
        log.info(
            "shutdown took %.1fs (shutdown.grace_s %gs)", time.monotonic() - started, self.settings.shutdown.grace_s
        )

    async def run(self) -> None:
        """Start, serve until SIGTERM/SIGINT/SIGHUP, stop gracefully.

        SIGHUP (the terminal that ran ``serve &`` closed, or ``kill -HUP``) drains and stops like
        SIGTERM: the configuration is not reloaded (restart to apply a change)."""
        loop = asyncio.get_running_loop()
        stop_requested = asyncio.Event()
        received: list[signal.Signals] = []

        def requested(sig: signal.Signals) -> None:
            received.append(sig)
            stop_requested.set()

        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            loop.add_signal_handler(sig, requested, sig)
        await self.start()
        try:
            await stop_requested.wait()
            log.info(
                "%s received, shutting down (within shutdown.grace_s=%gs)%s",
                received[0].name,
                self.settings.shutdown.grace_s,
                "; SIGHUP stops like SIGTERM, it does not reload the configuration"
                if received[0] == signal.SIGHUP
                else "",
            )
        finally:
            await self.stop()
