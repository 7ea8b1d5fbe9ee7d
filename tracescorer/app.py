"""The daemon: builds every component from :class:`Settings` and wires them; starts and stops them in order.

Components share one lifecycle (:mod:`tracescorer.lifecycle`) and start on one exit stack in
dependency order — the store's parts, conversation idling, export, monitors, scoring, assembly,
receivers, ops API — so a failed start stops what had started, and the stop runs in reverse. The
whole stop is bounded by ``shutdown.grace_s``: each stage gets what is left of it, less what the
store keeps to commit what was queued (scoring drains until its share runs out, then cancels
judge calls still running; their targets are scored after the next start).

Only the wiring is here: readiness, the listeners' construction, the state file's content, the
signals, reloading the configuration and the start-up lines are in :mod:`tracescorer.daemon`, the
monitors' construction in :mod:`tracescorer.monitors.build`.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from pathlib import Path
from typing import Any

from tracescorer import control
from tracescorer.aio import LoopLagWatch
from tracescorer.api import ControlApi, OpsApi
from tracescorer.calibration.gauges import AgreementGauges
from tracescorer.calibration.routes import LabelRoutes
from tracescorer.clock import SYSTEM_CLOCK, Clock
from tracescorer.config import Settings
from tracescorer.daemon import announce, listeners
from tracescorer.daemon.readiness import Readiness
from tracescorer.daemon.reload import Reloaded, Reloader, ReloadRefused
from tracescorer.daemon.serve_info import serve_info
from tracescorer.daemon.signals import StopSignals
from tracescorer.export import EvaluationExporter
from tracescorer.http_server import HttpServer
from tracescorer.lifecycle import Stages
from tracescorer.metrics import Metrics
from tracescorer.monitors import ScoreMetrics
from tracescorer.monitors.build import build_monitors
from tracescorer.receiver import fdlimit
from tracescorer.receiver.grpc import OtlpGrpcReceiver
from tracescorer.receiver.ingest import Ingestor
from tracescorer.runner.heal import Healer
from tracescorer.runner.recovery import RecoveryScope
from tracescorer.runner.writer import ScoreListener
from tracescorer.runtime import default_owner
from tracescorer.seglog import build_segment_log
from tracescorer.store.api import disk_full
from tracescorer.store.factory import BothHealthy, build_stores
from tracescorer.workers.child import InProcess
from tracescorer.workers.pipeline import Pipeline, build_runner
from tracescorer.workers.pool import WorkerPool

log = logging.getLogger(__name__)


class App:
    """One daemon instance. ``await app.start()``, then ``await app.stop()`` (or ``run()``)."""

    def __init__(
        self, settings: Settings, *, clock: Clock = SYSTEM_CLOCK, config_path: str | Path | None = None
    ) -> None:
        self.settings = s = settings
        self.clock = clock  # what every period below is measured with (tests pass one they move)
        self.metrics = Metrics(score_buckets=s.score_metrics.buckets)
        self.owner = default_owner()
        workers = s.workers.resolved()
        self.stores = st = build_stores(s, self.metrics, owner=self.owner)
        self.segment_log = build_segment_log(s, self.metrics)
        self.ingestor = Ingestor(
            self.segment_log,
            self.metrics,
            retry_after_s=s.receiver.retry_after_s,
            max_inflight_bytes=s.receiver.max_inflight_bytes,
            max_requests=s.receiver.max_concurrent_requests,
        )
        # built without sinks too (export.enabled false): a reload may add some
        self.exporter = EvaluationExporter(st.deliveries, s.export, observer=self.metrics, owner=self.owner)
        shared = st.coordination is not None
        score_listeners: list[ScoreListener] = [self.exporter]
        # backfills and the healer use it; each worker recovers its own runs and conversations
        recovery = RecoveryScope(runs=False, conversations=False)
        self.runner = build_runner(
            s, st, self.metrics, score_listeners, recovery=recovery, shared_spend=True, clock=self.clock
        )
        self.healer = Healer(
            self.runner,
            s.scoring.heal,
            self.metrics,
            leadership=st.leadership("heal") if st.leadership is not None else None,  # one daemon of several heals
            clock=self.clock,
        )
        # the stages after the log run in the workers, a share of the traces each (with
        # workers.count 0, one on this process's loop)
        assert st.attach is not None  # the daemon's stores always have their store process
        self.pool = self.feed = WorkerPool(
            s,
            self.segment_log,
            st.attach,
            self.metrics,
            count=workers,
            owner=self.owner,
            listeners=score_listeners,
            clock=self.clock,
        )
        self.readiness = Readiness(
            # the workers do most writes: the daemon's own channel may not hear of failures for long
            health=BothHealthy([st.health, self.pool]),
            intake=self.pool,  # the workers' queues: they append
            segment_log=self.segment_log,
            feed=self.feed,
            ingestor=self.ingestor,
            max_lag_bytes=s.segment_log.max_lag_bytes,
            workers=self.pool.describe,
            store_path=s.store.path if st.files else None,
        )
        self.ingestor.add_backlog_check("log", self.readiness.feed_backlog)
        scorer_ids = [b.id for b in s.scorers]
        self.monitors = build_monitors(
            s.monitors,
            scorer_ids,
            st.monitors,
            self.metrics,
            shared=shared,
            rebuild_s=s.store.monitor_rebuild_s,
            leadership=st.leadership,
            clock=self.clock,
        )
        score_listeners.append(self.monitors)
        score_listeners.append(ScoreMetrics(self.metrics, max_agents=s.score_metrics.max_agents))
        for listener in score_listeners[len(self.runner.writer.listeners) :]:
            self.runner.add_score_listener(listener)
            self.pool.listeners.append(listener)  # the workers' scores go to the same listeners
        # the ops API's own token, new at each start; never the ingest token
        self.api_token = secrets.token_urlsafe(32)
        self.ops = OpsApi(
            st.health,
            self.metrics,
            metrics_token=s.metrics.auth_token,
            readiness=self.readiness.not_ready_reason,
            detail=self.readiness.detail,
            refresh=self.pool.refresh_metrics,
        )
        self.labels = LabelRoutes(st.labels, st.reads, {b.id: b.scope for b in s.scorers})
        self.agreement = AgreementGauges(st.reads, self.metrics)
        self.labels.on_labels.append(self.agreement.poke)
        self.pool.on_evaluations.append(self.agreement.poke)  # the workers store other tools' evaluations
        self.reloader = Reloader(
            s,
            config_path=config_path,
            metrics=self.metrics,
            runner=self.runner,
            pool=self.pool,
            monitors=self.monitors,
            exporter=self.exporter,
        )
        self.reloader.on_applied.append(lambda new: self.labels.rebind({b.id: b.scope for b in new.scorers}))
        self._reloads: set[asyncio.Task[None]] = set()  # SIGHUP's, until done
        self.control = ControlApi(
            st.queries,
            reads=st.reads,
            token=self.api_token,
            max_rows=s.store.query_max_rows,
            timeout_s=s.store.query_timeout_s,
            max_concurrent=s.store.query_max_concurrent,
            runner=self.runner,
            labels=self.labels,
            reload=self._reload_call,
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

    @property
    def pipeline(self) -> Pipeline | None:
        """The in-process worker's stages (``workers.count: 0``) once started; None with processes."""
        process = self.pool.workers[0].process
        return process.worker.pipeline if isinstance(process, InProcess) and process.worker is not None else None

    def not_ready_reason(self) -> str | None:
        """Why the daemon should not get traffic now (None when ready): see :class:`Readiness`."""
        return self.readiness.not_ready_reason()

    def readiness_detail(self) -> dict[str, Any]:
        """What ``/readyz`` tells beside its verdict (:meth:`Readiness.detail`)."""
        return self.readiness.detail()

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
        try:
            await stages.enter(self.segment_log)  # after the store: stopped once nothing appends any more
        except OSError as exc:  # a full disk: say which one, and how full
            raise disk_full(self.segment_log.directory, exc) or exc from None
        self.metrics.feed_lag_bytes.set_function(lambda: self.feed.lag_bytes)
        self.metrics.feed_lag_seconds.set_function(lambda: self.feed.lag_s)  # the slowest worker's
        self.metrics.log_bytes.set_function(lambda: self.segment_log.kept_bytes)
        self.metrics.track_queue(lambda: st.intake.pending_items)
        self.metrics.track_readiness(self.readiness.not_ready_reason)
        if st.files:
            self.metrics.track_db_size(st.files)
        reserve = self._store_reserve_s
        await stages.enter(self.exporter, reserve_s=reserve)
        # before the runner: the monitors' windows are rebuilt from the stored scores
        await stages.enter(self.monitors, reserve_s=reserve)
        await stages.enter(self.agreement, reserve_s=reserve)  # agreement gauges from the stored labels
        await stages.enter(self.runner, reserve_s=reserve + 1.0)  # a little for export and claims
        await stages.enter(self.healer, reserve_s=reserve + 1.0)  # stops before the runner it feeds
        # the workers: stopped after the receivers, before scoring and the store
        await stages.enter(self.pool, reserve_s=reserve + 1.0)
        await self._start_receivers(stages)
        if s.api.enabled:
            self._api = listeners.ops_api(s, self.control, self.metrics)
            self.api_port = (await stages.enter(self._api)).port
        await stages.enter(LoopLagWatch(self.metrics.loop_lag.observe))
        self.ops.ready = True
        stages.stack.callback(setattr, self.ops, "ready", False)
        info = serve_info(
            s, http_port=self.http_port, api_port=self.api_port, grpc_port=self.grpc_port, api_token=self.api_token
        )
        try:
            control.publish_serve_info(s.store.path, info)
        except OSError as exc:
            raise disk_full(control.serve_info_path(s.store.path), exc) or exc from None
        announce.serving(
            log,
            s,
            grpc_port=self.grpc_port,
            http_port=self.http_port,
            api_port=self.api_port,
            store=st.description,
            runner=self.runner,
        )

    async def _start_receivers(self, stages: Stages) -> None:
        s = self.settings
        caps = listeners.shared_connections(s)
        self.metrics.open_files_headroom.set_function(lambda: fdlimit.headroom() or 0)
        if s.receiver.grpc.enabled:
            self.grpc = listeners.grpc_receiver(
                s,
                self.ingestor,
                self.metrics,
                max_connections=caps["grpc"],
                readiness=self.readiness.while_serving(lambda: self.ops.ready),
            )
            self.grpc_port = (await stages.enter(self.grpc, reserve_s=self._store_reserve_s)).port
        if s.receiver.http.enabled:
            self.http = listeners.otlp_http(s, self.ingestor, self.metrics, self.ops, max_connections=caps["http"])
            self.http_port = (await stages.enter(self.http)).port
            self.ingestor.add_saturation_check("connections", self.http.guard.saturated)
        stages.stack.callback(self.ingestor.stop_accepting)  # first thing at stop: new requests get 503
        fdlimit.log_room(caps, listeners.wanted_connections(s))

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

    # --- reload ---------------------------------------------------------------------------------

    async def reload(self, settings: Settings | None = None) -> Reloaded:
        """Apply the configuration file again (or ``settings``): see :mod:`tracescorer.daemon.reload`;
        raises :class:`ReloadRefused` with the reason (the running configuration stays)."""
        if self._stages is None or self._stopped.is_set():
            raise ReloadRefused("the daemon is not running (starting or stopping)")
        done = await self.reloader.reload(settings)
        self.settings = self.reloader.settings
        return done

    async def _reload_call(self) -> tuple[int, dict[str, Any]]:
        """The ops API's reload: 200 applied; 409 a key that needs a restart; 400 invalid."""
        try:
            return 200, (await self.reload()).to_json()
        except ReloadRefused as exc:
            return 409 if exc.restart else 400, {"error": f"reload refused: {exc}", "restart": exc.restart}

    def _reload_on_signal(self) -> None:
        task = asyncio.create_task(self._reload_quietly(), name="reload")
        self._reloads.add(task)
        task.add_done_callback(self._reloads.discard)

    async def _reload_quietly(self) -> None:
        log.info("SIGHUP received: reloading the configuration")
        try:
            await self.reload()
        except ReloadRefused:
            pass  # logged with its reason; the running configuration stays

    async def run(self) -> None:
        """Start, reload at each SIGHUP, serve until SIGTERM/SIGINT (:mod:`tracescorer.daemon.signals`),
        stop gracefully."""
        signals = StopSignals()  # before the start: a stop signal meanwhile stops the daemon once started
        await self.start()
        signals.on_reload(self._reload_on_signal)
        try:
            received = await signals.wait()
            log.info(
                "%s received, shutting down (within shutdown.grace_s=%gs)",
                received.name,
                self.settings.shutdown.grace_s,
            )
        finally:
            await self.stop()
