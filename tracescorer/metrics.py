"""Prometheus self-metrics, on a registry owned by the app (no global state).

Besides the ``tracescorer_*`` metrics: the daemon process's ``process_*`` (CPU, resident memory,
open files, start time; the store process is not included) and ``tracescorer_build_info``. No
``*_created`` series: each counter would expose a second, constant series beside it.
"""

from __future__ import annotations

import os
import platform
from collections.abc import Callable, Sequence
from typing import Any

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    ProcessCollector,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from tracescorer import __version__

__all__ = ["CONTENT_TYPE_LATEST", "DEFAULT_SCORE_BUCKETS", "Metrics"]

DEFAULT_SCORE_BUCKETS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)


class Metrics:
    """Every metric the daemon exports; components receive this object explicitly."""

    def __init__(self, *, score_buckets: Sequence[float] = DEFAULT_SCORE_BUCKETS) -> None:
        # prometheus_client's own switch (process-wide, read at each scrape): counters and
        # histograms without their *_created series
        disable_created_metrics()  # type: ignore[no-untyped-call]
        self.registry = CollectorRegistry(auto_describe=True)
        self._children: dict[tuple[int, tuple[str, ...]], Any] = {}
        r = self.registry
        ProcessCollector(registry=r)
        self.build_info = Gauge(
            "tracescorer_build_info",
            "1, labelled with the running version of tracescorer and of Python",
            ["version", "python"],
            registry=r,
        )
        self.build_info.labels(__version__, platform.python_version()).set(1)
        self.requests = Counter(
            "tracescorer_receiver_requests",
            "OTLP export requests by transport, signal and outcome (ok, partial, a refusal's reason, body_timeout, "
            "disconnected = the client hung up before its body was read)",
            ["transport", "signal", "outcome"],
            registry=r,
        )
        self.accepted = Counter(
            "tracescorer_receiver_items_accepted",
            "Spans / log records acknowledged (appended to the segment log and synced)",
            ["signal"],
            registry=r,
        )
        self.rejected = Counter(
            "tracescorer_receiver_items_rejected",
            "Spans / log records refused, by reason (invalid, backpressure, store_error, shutting_down)",
            ["signal", "reason"],
            registry=r,
        )
        self.backpressure = Counter(
            "tracescorer_receiver_backpressure",
            "Requests refused as retryable backpressure, by the bound that was hit (requests, inflight_bytes, "
            "write_queue, assembly, scoring)",
            ["bound"],
            registry=r,
        )
        self.connections = Gauge(
            "tracescorer_receiver_connections",
            "Open connections at an HTTP listener (http: OTLP and probes, api: the ops API)",
            ["listener"],
            registry=r,
        )
        self.connections_closed = Counter(
            "tracescorer_receiver_connections_closed",
            "Connections the daemon closed, by listener and reason (header_timeout, idle_timeout, evicted = the "
            "longest-idle one closed for a new one at receiver.max_connections, refused = at the cap, none idle)",
            ["listener", "reason"],
            registry=r,
        )
        self.accept_errors = Counter(
            "tracescorer_receiver_accept_errors",
            "Failed accept() calls at an HTTP listener (out of file descriptors, say); retried with backoff",
            ["listener"],
            registry=r,
        )
        self.open_files_headroom = Gauge(
            "tracescorer_open_files_headroom",
            "File descriptors the daemon process may still open (its RLIMIT_NOFILE soft limit minus those open)",
            registry=r,
        )
        self.loop_lag = Histogram(
            "tracescorer_event_loop_lag_seconds",
            "How late the daemon's event loop ran a 100 ms timer (a blocked loop delays every request)",
            buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
            registry=r,
        )
        self.feed_lag_seconds = Gauge(
            "tracescorer_feed_lag_seconds",
            "How long ago the request the segment log's feed handled last was acknowledged (0 when caught up)",
            registry=r,
        )
        self.feed_lag_bytes = Gauge(
            "tracescorer_feed_lag_bytes",
            "Bytes of acknowledged requests in the segment log the feed has not handled yet",
            registry=r,
        )
        self.log_bytes = Gauge(
            "tracescorer_log_bytes",
            "Bytes the segment log keeps on disk (acknowledged requests not yet released)",
            registry=r,
        )
        self.feed_failures = Counter(
            "tracescorer_feed_failures",
            "Batches the segment log's feed failed to handle (a bug: logged, tried again from what is stored)",
            registry=r,
        )
        self.log_damaged = Counter(
            "tracescorer_log_damaged_records",
            "Records of the segment log whose checksum did not hold: skipped with the rest of their segment",
            registry=r,
        )
        self.triage_items = Counter(
            "tracescorer_triage_items",
            "Spans and log records by what triage did with them: kept (may be part of a run: decoded, "
            "stored, assembled), skipped (no convention can use them: never decoded), read_back (skipped "
            "first, kept once their trace showed agent content)",
            ["signal", "decision"],
            registry=r,
        )
        self.triage_lost_traces = Counter(
            "tracescorer_triage_lost_traces",
            "Traces whose skipped items were to be read back (agent content came later) from a segment "
            "already released: their runs lack those spans (triage.window_s, segment_log.retain_bytes)",
            registry=r,
        )
        self.stage_cpu = Counter(
            "tracescorer_stage_cpu_seconds",
            "CPU time of the daemon's own thread spent per pipeline stage (decode, assembly, scoring)",
            ["stage"],
            registry=r,
        )
        self.request_seconds = Histogram(
            "tracescorer_receiver_request_seconds",
            "Time from request received to response (includes the commit wait)",
            ["transport"],
            registry=r,
        )
        self.commit_seconds = Histogram(
            "tracescorer_store_commit_seconds",
            "Duration of one group commit",
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
            registry=r,
        )
        self.checkpoint_seconds = Histogram(
            "tracescorer_store_checkpoint_seconds",
            "Duration of one checkpoint of a store database (its commits wait meanwhile)",
            ["database"],
            buckets=(0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 16),
            registry=r,
        )
        self.commits = Counter("tracescorer_store_commits", "Group commits", registry=r)
        self.write_errors = Counter("tracescorer_store_write_errors", "Failed write transactions", registry=r)
        self.retention_deleted = Counter(
            "tracescorer_store_retention_deleted_rows",
            "Rows deleted by retention",
            ["table"],
            registry=r,
        )
        self.queue_items = Gauge("tracescorer_store_queue_items", "Items waiting for the writer", registry=r)
        self.index_keys = Gauge(
            "tracescorer_store_index_keys",
            "Keys in the DuckDB store's key indexes at the last budget check (kept within "
            "store.index_memory_share of store.memory_limit, ~80 bytes a key)",
            registry=r,
        )
        self.index_bytes = Gauge(
            "tracescorer_store_index_memory_bytes",
            "Memory DuckDB held for key indexes at the last budget check",
            registry=r,
        )
        self.ready = Gauge(
            "tracescorer_ready",
            "1 while the daemon takes traffic; 0 while writes fail or a pipeline stage is over its "
            "bound (see tracescorer_receiver_backpressure and /readyz for the reason)",
            registry=r,
        )
        self.db_size = Gauge(
            "tracescorer_store_db_size_bytes", "Size of the store's files (both databases and their WALs)", registry=r
        )

        self.buffered_traces = Gauge("tracescorer_assembly_buffered_traces", "Traces waiting to complete", registry=r)
        self.traces_assembled = Counter(
            "tracescorer_assembly_traces",
            "Traces assembled, by reason (complete, max_wait, overflow, recovered) and pass (first, late)",
            ["reason", "pass"],
            registry=r,
        )
        self.traces_unmatched = Counter(
            "tracescorer_assembly_traces_unmatched",
            "Traces no convention adapter could rebuild a run from",
            registry=r,
        )
        self.traces_refused = Counter(
            "tracescorer_assembly_traces_refused",
            "Traces whose runs the store refused as data: recorded as assembled without runs, the reason "
            "in assembled_traces.unmatched_reason",
            registry=r,
        )
        self.traces_recovered = Counter(
            "tracescorer_assembly_traces_recovered",
            "Traces assembled at start from the span log",
            registry=r,
        )
        self.runs_extracted = Counter(
            "tracescorer_assembly_runs", "Agent runs rebuilt, by convention", ["convention"], registry=r
        )
        self.assembly_seconds = Histogram(
            "tracescorer_assembly_extract_seconds",
            "Time to extract the runs of one trace",
            buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5),
            registry=r,
        )

        self.score_rows_refused = Counter(
            "tracescorer_scoring_rows_refused",
            "Score rows the store refused as data, stored as error rows instead (error_type StoreRefused)",
            registry=r,
        )
        self.decisions = Counter(
            "tracescorer_scoring_decisions",
            "Scoring decisions by scorer and kind (scored, sampled_out, filtered_out, not_scorable, "
            "rate_limited, budget_exhausted, failed)",
            ["scorer", "decision"],
            registry=r,
        )
        self.scoring_queue = Gauge(
            "tracescorer_scoring_queue_depth", "Targets waiting for a scorer", ["pool"], registry=r
        )
        self.conversations_tracked = Gauge(
            "tracescorer_scoring_conversations_tracked", "Conversations waiting to go idle", registry=r
        )
        self.conversation_claims = Counter(
            "tracescorer_conversation_claims",
            "postgres mode: conversation claims by outcome (claimed, takeover = taken from an expired lease, "
            "finished, released = not scored (shutdown), lost = another daemon took it over meanwhile)",
            ["outcome"],
            registry=r,
        )
        self.scoring_abandoned = Counter(
            "tracescorer_scoring_abandoned",
            "Targets whose scoring was cancelled at shutdown (scored again after the next start)",
            ["pool"],
            registry=r,
        )
        self.judge_heal = Counter(
            "tracescorer_judge_heal",
            "Automatic re-scores of transient judge errors (scoring.heal): retried, healed (now ok or "
            "not_scorable), gave_up (the last allowed attempt failed too)",
            ["result"],
            registry=r,
        )
        self.judge_calls = Counter(
            "tracescorer_judge_calls", "Judge calls by model and status", ["model", "status"], registry=r
        )
        self.judge_seconds = Histogram(
            "tracescorer_judge_call_seconds",
            "Judge call latency (including retries)",
            buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
            registry=r,
        )
        self.judge_tokens = Counter("tracescorer_judge_tokens", "Judge tokens by direction", ["direction"], registry=r)
        self.exports = Counter(
            "tracescorer_export_spans",
            "Evaluation spans sent, by result (exported, failed)",
            ["result"],
            registry=r,
        )
        self.deliveries = Counter(
            "tracescorer_export_deliveries",
            "Score deliveries per sink, by result (delivered, retry, rejected, failed = given up)",
            ["sink", "result"],
            registry=r,
        )

        # Score quality (tracescorer.monitors.score_metrics): live scores only, after commit;
        # `agent` is capped at score_metrics.max_agents names (then "_other").
        self.score_value = Histogram(
            "tracescorer_score_value",
            "Values of live ok scores, by scorer and agent",
            ["scorer", "agent"],
            buckets=tuple(score_buckets),
            registry=r,
        )
        # the one count of scores (live: backfills re-score history; tracescorer_scoring_decisions
        # counts them); tracescorer_score_judge_cost_usd the one count of judge spend
        self.score_results = Counter(
            "tracescorer_score_results",
            "Live scores stored, by scorer, agent, label (pass, fail, none) and status (ok, error, not_scorable)",
            ["scorer", "agent", "label", "status"],
            registry=r,
        )
        self.score_judge_cost = Counter(
            "tracescorer_score_judge_cost_usd",
            "Judge spend in USD by scorer (live and backfill)",
            ["scorer"],
            registry=r,
        )
        # Calibration (tracescorer.calibration): other tools' evaluations in, agreement of each
        # judge version with human labels out; `version` is bounded by the versions labelled.
        self.external_evaluations = Counter(
            "tracescorer_external_evaluations",
            "Other tools' gen_ai.evaluation.result events received over OTLP, by result (stored; own = "
            "tracescorer's own exported evaluations, dropped; invalid = no gen_ai.evaluation.name, dropped)",
            ["result"],
            registry=r,
        )
        agreement = ["scorer", "version", "reference"]
        self.agreement_pairs = Gauge(
            "tracescorer_agreement_pairs",
            "Targets a judge version and its reference (human labels) both judged",
            agreement,
            registry=r,
        )
        self.agreement_kappa = Gauge(
            "tracescorer_agreement_kappa",
            "Cohen's kappa of a judge version's labels against the reference's (NaN: undefined)",
            agreement,
            registry=r,
        )
        self.agreement_accuracy = Gauge(
            "tracescorer_agreement_accuracy",
            "Share of labelled targets where a judge version and the reference agree",
            agreement,
            registry=r,
        )
        self.agreement_mae = Gauge(
            "tracescorer_agreement_mae",
            "Mean absolute error of a judge version's scores against the reference's numbers",
            agreement,
            registry=r,
        )
        self.agreement_spearman = Gauge(
            "tracescorer_agreement_spearman",
            "Spearman's rho of a judge version's scores against the reference's numbers",
            agreement,
            registry=r,
        )
        self.agreement_updated = Gauge(
            "tracescorer_agreement_last_update_timestamp_seconds",
            "When the agreement gauges were last computed from the stored labels and scores",
            registry=r,
        )
        # Built-in monitors (tracescorer.monitors): one series per configured monitor.
        self.monitor_state = Gauge(
            "tracescorer_monitor_state",
            "1 for the monitor's current state (ok, pending, firing, resolved), else 0",
            ["monitor", "state"],
            registry=r,
        )
        self.monitor_value = Gauge(
            "tracescorer_monitor_value",
            "The monitor's last aggregate over its window (NaN: no data)",
            ["monitor"],
            registry=r,
        )
        self.monitor_samples = Gauge(
            "tracescorer_monitor_samples",
            "Scores in the monitor's window that its aggregate counts",
            ["monitor"],
            registry=r,
        )
        self.monitor_evaluated = Gauge(
            "tracescorer_monitor_last_evaluation_timestamp_seconds",
            "When the monitor was last evaluated",
            ["monitor"],
            registry=r,
        )
        self.monitor_transitions = Counter(
            "tracescorer_monitor_transitions",
            "Monitor state changes, by the state entered (pending, firing, resolved)",
            ["monitor", "state"],
            registry=r,
        )
        self.monitor_notifications = Counter(
            "tracescorer_monitor_notifications",
            "Notifications per target, by channel (webhook, slack) and result "
            "(sent, failed, deferred, cancelled, dropped)",
            ["monitor", "channel", "result"],
            registry=r,
        )

    def child(self, metric: Any, *values: str) -> Any:
        """``metric.labels(*values)``, kept: the hot paths count per trace and per score, and a
        lookup through ``labels()`` costs three times the increment. Label values are bounded
        (binding ids, statuses, conventions, agents up to ``max_agents``)."""
        key = (id(metric), values)
        found = self._children.get(key)
        if found is None:
            found = self._children[key] = metric.labels(*values)
        return found

    def track_readiness(self, reason: Callable[[], str | None]) -> None:
        """``tracescorer_ready`` is 1 while ``reason()`` is None; the info metric names the reason."""
        self.ready.set_function(lambda: 0.0 if reason() else 1.0)

    def track_queue(self, depth: Callable[[], int]) -> None:
        self.queue_items.set_function(depth)

    def track_db_size(self, files: Sequence[str]) -> None:
        """The store's size: the sum of ``files`` (those missing count 0)."""

        def size() -> float:
            total = 0
            for name in files:
                try:
                    total += os.stat(name).st_size
                except OSError:
                    pass
            return float(total)

        self.db_size.set_function(size)

    # CommitObserver
    def on_commit(self, seconds: float, spans: int, logs: int) -> None:
        self.commit_seconds.observe(seconds)
        self.commits.inc()

    def on_checkpoint(self, database: str, seconds: float) -> None:
        self.child(self.checkpoint_seconds, database).observe(seconds)

    def on_error(self, error: BaseException) -> None:
        self.write_errors.inc()

    # MaintenanceObserver (the store's retention and index budget passes)
    def on_retention(self, table: str, rows: int) -> None:
        self.retention_deleted.labels(table).inc(rows)

    def on_index_budget(self, keys: int | None, index_bytes: int | None) -> None:
        if keys is not None:
            self.index_keys.set(keys)
        if index_bytes is not None:
            self.index_bytes.set(index_bytes)

    # ExportObserver (tracescorer.export.exporter)
    def on_export(self, outcome: object, count: int, seconds: float) -> None:
        self.exports.labels(str(getattr(outcome, "value", outcome))).inc(count)

    def on_delivery(self, sink: str, result: str, count: int) -> None:
        self.deliveries.labels(sink, result).inc(count)

    def render(self) -> bytes:
        return generate_latest(self.registry)
