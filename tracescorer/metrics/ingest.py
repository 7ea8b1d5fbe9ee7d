"""The families of ingest: the OTLP receivers (requests, items, connections, backpressure), the
process they run in (open files, event-loop lag, CPU per stage) and the segment log with its feed
and triage."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from tracescorer.metrics.families import Families


class IngestFamilies(Families):
    """The receivers', the segment log's and its feed's metrics."""

    requests: Counter
    accepted: Counter
    rejected: Counter
    backpressure: Counter
    connections: Gauge
    connections_closed: Counter
    accept_errors: Counter
    open_files_headroom: Gauge
    loop_lag: Histogram
    feed_lag_seconds: Gauge
    feed_lag_bytes: Gauge
    log_bytes: Gauge
    feed_failures: Counter
    span_rows_skipped_bytes: Counter
    span_rows_lag_bytes: Gauge
    worker_restarts: Counter
    log_damaged: Counter
    log_damaged_bytes: Counter
    triage_items: Counter
    triage_lost_traces: Counter
    stage_cpu: Counter
    request_seconds: Histogram

    def _declare_ingest(self, r: CollectorRegistry) -> None:
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
            "Open connections at a listener (http: OTLP and probes, grpc: OTLP, counted through channelz a few "
            "times a second, api: the ops API)",
            ["listener"],
            registry=r,
        )
        self.connections_closed = Counter(
            "tracescorer_receiver_connections_closed",
            "Connections the daemon closed, by listener and reason (header_timeout, idle_timeout, evicted = the "
            "least recently active idle one closed to make room at receiver.max_connections or when out of file "
            "descriptors (grpc: near its cap), refused = at the cap, none idle)",
            ["listener", "reason"],
            registry=r,
        )
        self.accept_errors = Counter(
            "tracescorer_receiver_accept_errors",
            "Failed accept() calls at an HTTP listener (out of file descriptors, say); retried at once after an "
            "idle connection is evicted, else with backoff",
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
        self.span_rows_lag_bytes = Gauge(
            "tracescorer_span_rows_lag_bytes",
            "Bytes of the segment log the span-rows feeds (store.spans) have not stored rows of yet "
            "(summed over the workers; they wait while the pipeline is behind)",
            registry=r,
        )
        self.span_rows_skipped_bytes = Counter(
            "tracescorer_span_rows_skipped_bytes",
            "Bytes of the segment log released before the span-rows feed (store.spans) stored their rows: it "
            "fell segment_log.max_lag_bytes behind the pipeline; those spans have no rows",
            registry=r,
        )
        self.worker_restarts = Counter(
            "tracescorer_worker_restarts",
            "Worker processes started again after they exited unexpectedly (workers.count)",
            registry=r,
        )
        self.log_damaged = Counter(
            "tracescorer_log_damaged_records",
            "Stretches of the segment log lost to damage (a record or more each), by where they were found: open "
            "(a damaged stretch or a torn tail of the last segment, a segment's lost end), read (skipped by the "
            "first worker's feed); only the damaged bytes are skipped, never the records after them",
            ["where"],
            registry=r,
        )
        self.log_damaged_bytes = Counter(
            "tracescorer_log_damaged_bytes",
            "Bytes of the segment log lost to damage, by where they were found (see tracescorer_log_damaged_records)",
            ["where"],
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
            "CPU time of the daemon's own thread spent per pipeline stage (decode, assembly, scoring: code "
            "scorers, estimated from one score in 8 timed)",
            ["stage"],
            registry=r,
        )
        self.request_seconds = Histogram(
            "tracescorer_receiver_request_seconds",
            "Time from request received to response (includes the commit wait)",
            ["transport"],
            registry=r,
        )
