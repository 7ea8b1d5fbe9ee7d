"""The daemon: builds every component from :class:`Settings` and wires them; starts and stops them in order.

Components share one lifecycle (:mod:`tracescorer.lifecycle`) and start on one exit stack in
dependency order — the store's parts, conversation idling, export, monitors, scoring, assembly,
receivers, ops API — so a failed start stops what had started, and the stop runs in reverse. The
whole stop is bounded by ``shutdown.grace_s``: each stage gets what is left of it, less what the
store keeps to commit what was queued (scoring drains until its share runs out, then cancels
judge calls still running; their targets are scored after the next start).
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import signal
import time
from typing import Any

from aiohttp import web

from tracescorer import __version__, control
from tracescorer.aio import LoopLagWatch
from tracescorer.api import ControlApi, OpsApi
from tracescorer.assembly.idle import build_idler
from tracescorer.assembly.stage import AssemblyStage
from tracescorer.calibration.gauges import AgreementGauges
from tracescorer.calibration.intake import EvaluationIntake
from tracescorer.calibration.routes import LabelRoutes
from tracescorer.config import Settings
from tracescorer.conventions.registry import markers
from tracescorer.export import EvaluationExporter
from tracescorer.export.exporter import default_owner
from tracescorer.feed.stage import LogFeed
from tracescorer.feed.triage import Triage
from tracescorer.http_server import API_LIMITS, HttpServer, server_ssl_context
from tracescorer.lifecycle import Stages
from tracescorer.metrics import Metrics
from tracescorer.monitors import MonitorService, ScoreMetrics
from tracescorer.monitors.leader import LeadingMonitors
from tracescorer.receiver import fdlimit
from tracescorer.receiver.body import BodyLimits
from tracescorer.receiver.connections import ConnectionLimits
from tracescorer.receiver.grpc import OtlpGrpcReceiver
from tracescorer.receiver.http import OtlpHttpHandler
from tracescorer.receiver.ingest import Ingestor
from tracescorer.scoring.bindings import build_bindings
from tracescorer.scoring.caps import BindingCaps
from tracescorer.scoring.heal import Healer
from tracescorer.scoring.limits import SharedRateLimiter
from tracescorer.scoring.runner import ScoringRunner
from tracescorer.seglog import build_segment_log
from tracescorer.store.factory import build_stores

log = logging.getLogger(__name__)

MONITOR_REBUILD_S = 5.0  # postgres mode: how often the leader recounts its windows from every daemon's scores


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
        self.settings = s = settings
        self.metrics = Metrics(score_buckets=s.score_metrics.buckets)
        self.owner = default_owner()
        self.stores = st = build_stores(s, self.metrics, owner=self.owner)
        self.segment_log = build_segment_log(s)
        self.ingestor = Ingestor(
            self.segment_log,
            self.metrics,
            retry_after_s=s.receiver.retry_after_s,
            max_inflight_bytes=s.receiver.max_inflight_bytes,
            max_requests=s.receiver.max_concurrent_requests,
        )
        self.exporter = (
            EvaluationExporter(st.deliveries, s.export, observer=self.metrics, owner=self.owner)
            if s.export.enabled
            else None
        )
        shared = st.coordination is not None
        bound = build_bindings(s.scorers, s.judge)
        self.runner = ScoringRunner(
            bound,
            st.runs,
            st.scores,
            self.metrics,
            s,
            listeners=[self.exporter] if self.exporter is not None else [],
            rate=SharedRateLimiter(st.coordination, s.judge.requests_per_minute) if st.coordination else None,
            shared_budget=shared,
            caps=BindingCaps(bound, shared=st.coordination),  # per-binding caps, shared in postgres mode
        )
        self.healer = Healer(
            self.runner,
            s.scoring.heal,
            self.metrics,
            leadership=st.leadership("heal") if st.leadership is not None else None,  # one daemon of several heals
        )
        needs_idler = any(b.binding.scope == "conversation" for b in self.runner.bindings)
        self.conversations = build_idler(self.runner, self.metrics, s, st.coordination) if needs_idler else None
        self.assembly = AssemblyStage(s.assembly, st.span_log, st.runs, self.metrics, conversations=self.conversations)
        self.evaluations = EvaluationIntake(st.evaluations, self.metrics)  # other tools' evaluations
        self.feed = LogFeed(
            self.segment_log,
            st.intake,
            st.feed,
            self.metrics,
            max_batch_bytes=s.segment_log.feed_batch_bytes,
            retain_bytes=s.segment_log.retain_bytes,
            listeners=[self.assembly],
            triage=(
                Triage(markers(), window_s=s.triage.window_s, max_traces=s.triage.max_traces)
                if s.store.spans == "agent"
                else None
            ),
            prefilter=self.evaluations,
        )
        self.ingestor.add_backlog_check("log", self._feed_backlog)
        self.assembly.add_listener(self.runner)
        # the stages hold the feed back, not the receivers: their backlog waits in the log, on disk
        self.feed.add_gate("assembly", self.assembly.backlog)
        self.feed.add_gate("scoring", self.runner.backlog)
        self.monitors: MonitorService | LeadingMonitors | None = None
        if s.monitors:
            self.monitors = (
                LeadingMonitors(self._monitor_service, st.leadership("monitors"))  # one daemon of several runs them
                if st.leadership is not None
                else self._monitor_service()
            )
            self.runner.add_score_listener(self.monitors)
        self.runner.add_score_listener(ScoreMetrics(self.metrics, max_agents=s.score_metrics.max_agents))
        # the ops API's own token, new at each start; never the ingest token
        self.api_token = secrets.token_urlsafe(32)
        self.ops = OpsApi(
            st.health,
            self.metrics,
            metrics_token=s.metrics.auth_token,
            readiness=self.not_ready_reason,
            detail=self.readiness_detail,
        )
        self.labels = LabelRoutes(st.labels, st.queries, {b.id: b.scope for b in s.scorers})
        self.agreement = AgreementGauges(
            st.queries, self.metrics, max_rows=s.store.query_max_rows, timeout_s=s.store.query_timeout_s
        )
        self.labels.on_labels.append(self.agreement.poke)
        self.evaluations.on_evaluations.append(self.agreement.poke)
        self.control = ControlApi(
            st.queries,
            token=self.api_token,
            max_rows=s.store.query_max_rows,
            timeout_s=s.store.query_timeout_s,
            max_concurrent=s.store.query_max_concurrent,
            runner=self.runner,
            labels=self.labels,
        )
        self._api: HttpServer | None = None
        self.api_port = 0
        self.grpc: OtlpGrpcReceiver | None = None
        self.http: HttpServer | None = None
        self.grpc_port = 0
        self.http_port = 0
        self._stages: Stages | None = None
        self._deadline = 0.0
        self._stopped = asyncio.Event()

    def _monitor_service(self) -> MonitorService:
        s = self.settings
        return MonitorService(
            s.monitors,
            [b.id for b in s.scorers],
            self.stores.monitors,
            self.metrics,
            rebuild_interval_s=MONITOR_REBUILD_S if self.stores.coordination is not None else None,
        )

    def _feed_backlog(self) -> str | None:
        behind, bound = self.feed.lag_bytes, self.settings.segment_log.max_lag_bytes
        if behind < bound:
            return None
        return f"the segment log's feed is {behind} bytes behind (segment_log.max_lag_bytes {bound})"

    def readiness_detail(self) -> dict[str, Any]:
        """What ``/readyz`` tells beside its verdict: how far the feed is behind the segment log
        (acknowledged requests not queryable yet) and which stage holds it back, if any."""
        return {
            "feed_lag_bytes": self.feed.lag_bytes,
            "feed_lag_seconds": round(self.feed.lag_s, 3),
            "feed_held_by": self.feed.held_by,
        }

    def not_ready_reason(self) -> str | None:
        """Why the daemon should not get traffic now (None when ready): writes failing, or a
        pipeline stage over its bound."""
        failure = self.stores.health.write_failure
        if failure is not None:
            return f"store writes are failing: {failure}"
        if self.feed.failure is not None:
            return f"the segment log's feed fails: {self.feed.failure}"
        free, keep = self.segment_log.disk_free(), self.segment_log.min_free_bytes
        if free < keep:
            return f"the disk is nearly full: {free} bytes free (segment_log.min_free_bytes {keep})"
        intake = self.stores.intake
        if intake.pending_items >= intake.max_queue_items:
            return "write queue full"
        return self.ingestor.over_bound() or self.ingestor.saturated()

    # --- lifecycle ----------------------------------------------------------------------------

    @property
    def _store_reserve_s(self) -> float:
        """What the store keeps of the stop's deadline to commit what the stages queued."""
        return min(5.0, self.settings.shutdown.grace_s * 0.2)

    async def start(self) -> None:
        """Start every component; on failure stop what had started (then re-raise)."""
        stages = Stages(lambda: self._deadline)
        self._deadline = time.monotonic() + self.settings.shutdown.grace_s  # a failed start stops within the grace too
        try:
            await self._start_on(stages)
        except BaseException:
            self._deadline = time.monotonic() + self.settings.shutdown.grace_s
            await stages.aclose()
            raise
        self._stages = stages

    async def _start_on(self, stages: Stages) -> None:
        s, st = self.settings, self.stores
        stages.stack.callback(control.withdraw_serve_info, s.store.path)  # last thing at stop
        fdlimit.raise_open_files_limit()  # before the store process starts: it inherits the limit
        for component in st.components:
            await stages.enter(component)
        await stages.enter(self.segment_log)  # after the store: stopped once nothing appends any more
        self.metrics.feed_lag_bytes.set_function(lambda: self.feed.lag_bytes)
        self.metrics.log_bytes.set_function(lambda: self.segment_log.kept_bytes)
        self.metrics.track_queue(lambda: st.intake.pending_items)
        self.metrics.track_readiness(self.not_ready_reason)
        if st.files:
            self.metrics.track_db_size(st.files)
        reserve = self._store_reserve_s
        if self.conversations is not None:  # settles claims after scoring stopped, before the store closes
            await stages.enter(self.conversations, reserve_s=reserve)
        if self.exporter is not None:
            await stages.enter(self.exporter, reserve_s=reserve)
        if self.monitors is not None:  # before the runner: its windows are rebuilt from the stored scores
            await stages.enter(self.monitors, reserve_s=reserve)
        await stages.enter(self.agreement, reserve_s=reserve)  # agreement gauges from the stored labels
        await stages.enter(self.runner, reserve_s=reserve + 1.0)  # a little for export and claims
        await stages.enter(self.healer, reserve_s=reserve + 1.0)  # stops before the runner it feeds
        await stages.enter(self.assembly, reserve_s=reserve)
        await stages.enter(self.feed, reserve_s=reserve)  # stopped before assembly, after the receivers
        await self._start_receivers(stages)
        if s.api.enabled:
            self._api = HttpServer(
                self.control.app(),
                host=s.api.host,
                port=s.api.port,
                what="ops API (api)",
                ssl_context=server_ssl_context(s.receiver.tls.cert_file, s.receiver.tls.key_file),
                metrics=self.metrics,
            )
            self.api_port = (await stages.enter(self._api)).port
        await stages.enter(LoopLagWatch(self.metrics.loop_lag.observe))
        self.ops.ready = True
        stages.stack.callback(setattr, self.ops, "ready", False)
        self._publish_serve_info()
        log.info(
            "tracescorer %s serving (pid %d): OTLP gRPC %s, OTLP HTTP %s (and /metrics, /healthz, /readyz), "
            "ops API %s, %s",
            __version__,
            os.getpid(),
            _address(s.receiver.grpc.host, self.grpc_port),
            _address(s.receiver.http.host, self.http_port),
            _address(s.api.host, self.api_port),
            st.description,
        )
        _log_bindings(self.runner)
        _warn_if_exposed(s)

    async def _start_receivers(self, stages: Stages) -> None:
        s = self.settings
        tls = s.receiver.tls
        room = fdlimit.headroom()
        if room is not None and s.api.enabled:
            room -= API_LIMITS.max_connections  # the ops API's own, fixed
        caps = fdlimit.share_connections(self._connection_caps(), room)
        self.metrics.open_files_headroom.set_function(lambda: fdlimit.headroom() or 0)
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
                limits=self._limits(caps["grpc"]),
                max_concurrent_streams=max(128, 2 * s.receiver.max_concurrent_requests),
                readiness=self._grpc_readiness,
                grace_cap_s=s.receiver.request_timeout_s,
            )
            self.grpc_port = (await stages.enter(self.grpc, reserve_s=self._store_reserve_s)).port
        if s.receiver.http.enabled:
            await self._start_http(stages, self._limits(caps["http"]))
        stages.stack.callback(self.ingestor.stop_accepting)  # first thing at stop: new requests get 503
        fdlimit.log_room(caps, self._connection_caps())

    def _connection_caps(self) -> dict[str, int]:
        """Connections each receiver may hold, before the open-files limit."""
        r = self.settings.receiver
        caps: dict[str, int] = {}
        if r.grpc.enabled:
            caps["grpc"] = r.max_connections
        if r.http.enabled:
            caps["http"] = r.max_connections
        return caps

    def _limits(self, max_connections: int) -> ConnectionLimits:
        r = self.settings.receiver
        return ConnectionLimits(
            max_connections=max_connections, header_timeout_s=r.header_timeout_s, idle_timeout_s=r.idle_timeout_s
        )

    def _grpc_readiness(self) -> str | None:
        return self.not_ready_reason() if self.ops.ready else "not started or shutting down"

    async def _start_http(self, stages: Stages, limits: ConnectionLimits) -> None:
        s = self.settings
        r = s.receiver
        handler = OtlpHttpHandler(
            self.ingestor,
            self.metrics,
            max_message_bytes=r.max_message_bytes,
            auth_token=r.auth_token,
            body=BodyLimits(
                max_bytes=r.max_message_bytes, timeout_s=r.body_timeout_s, min_bytes_per_s=r.min_body_bytes_per_s
            ),
        )
        webapp = web.Application(client_max_size=r.max_message_bytes)
        webapp.add_routes(handler.routes() + self.ops.routes())
        self.http = HttpServer(
            webapp,
            host=r.http.host,
            port=r.http.port,
            what="OTLP HTTP receiver (receiver.http)",
            ssl_context=server_ssl_context(r.tls.cert_file, r.tls.key_file),
            shutdown_timeout_s=min(r.request_timeout_s, s.shutdown.grace_s / 4),
            limits=limits,
            listener="http",
            metrics=self.metrics,
            auto_decompress=False,  # we inflate ourselves, the size limit applied to the inflated body
        )
        self.http_port = (await stages.enter(self.http)).port
        self.ingestor.add_saturation_check("connections", self.http.guard.saturated)

    def _publish_serve_info(self) -> None:
        s = self.settings
        scheme = "https" if s.receiver.tls.enabled else "http"
        control.publish_serve_info(
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

    async def stop(self) -> None:
        """Stop intake, finish in-flight requests, score and export what time allows, commit what
        was queued, close the store: all within ``shutdown.grace_s``."""
        if self._stopped.is_set() or self._stages is None:
            return
        self._stopped.set()
        started = time.monotonic()
        self._deadline = started + self.settings.shutdown.grace_s
        stages, self._stages = self._stages, None
        await stages.aclose()
        log.info(
            "tracescorer stopped; shutdown took %.1fs (shutdown.grace_s %gs)",
            time.monotonic() - started,
            self.settings.shutdown.grace_s,
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
