"""Settings: ``config/tracescorer.yaml`` + ``${VAR:-default}`` expansion + ``TRACESCORER_*`` env.

One pydantic model validates everything at start; unknown keys and bad values fail with one
message naming the key (and the key meant, for a misspelt one). Environment overrides use
``TRACESCORER_<SECTION>__<KEY>`` (nested keys joined by ``__``), e.g.
``TRACESCORER_STORE__PATH=/data/ts.duckdb``; variables whose first part is not a section
(``TRACESCORER_AUTH_TOKEN``, ``TRACESCORER_JUDGE_MODEL``) are only used for expansion
(:mod:`tracescorer.envexpand`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator, model_validator

from tracescorer import config_errors, envexpand
from tracescorer.filters import RunFilter
from tracescorer.monitors.config import MonitorSettings, ScoreMetricsSettings, check_monitors
from tracescorer.sizes import size_bytes

#: the smallest ``store.memory_limit`` the store writes within
MIN_MEMORY_BYTES = 128 * 1000**2

ENV_PREFIX = "TRACESCORER_"
# TRACESCORER_* variables the CLI reads itself (never configuration overrides)
_NOT_OVERRIDES = frozenset({"TRACESCORER_CONFIG"})
# the key ``log_level`` of earlier releases (and TRACESCORER_LOG_LEVEL) sets ``log.level``
_ALIASES: dict[tuple[str, ...], tuple[str, ...]] = {("log_level",): ("log", "level")}
SECRET_KEYS = frozenset({"auth_token", "api_key", "api_token", "headers", "token", "slack"})


class ConfigError(ValueError):
    """The configuration is invalid; the message names the offending key."""


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_default=True)


class ListenerSettings(_Section):
    # loopback, as the Collector's receivers since v0.104: exposing OTLP is a choice
    # (TRACESCORER_RECEIVER__GRPC__HOST=0.0.0.0; the Docker image makes it)
    host: str = "127.0.0.1"
    port: int = Field(4317, ge=0, le=65535, description="0 = any free port")
    enabled: bool = True


# One class per listener, so a partial override (only `host`) keeps that listener's own port.
class GrpcListenerSettings(ListenerSettings):
    port: int = Field(4317, ge=0, le=65535, description="0 = any free port")


class HttpListenerSettings(ListenerSettings):
    port: int = Field(4318, ge=0, le=65535, description="0 = any free port")


class ApiSettings(ListenerSettings):
    """The ops API (queries, backfill): its own listener and token, never the ingest token."""

    host: str = "127.0.0.1"
    port: int = Field(4320, ge=0, le=65535, description="0 = any free port")


class MetricsSettings(_Section):
    auth_token: str = Field("", description="bearer token /metrics requires; empty = open")


class TLSSettings(_Section):
    cert_file: Path | None = None
    key_file: Path | None = None

    @model_validator(mode="after")
    def _both_or_neither(self) -> TLSSettings:
        if (self.cert_file is None) != (self.key_file is None):
            raise ValueError("cert_file and key_file must be given together")
        for path in (self.cert_file, self.key_file):
            if path is not None and not path.is_file():
                raise ValueError(f"file not found: {path}")
        return self

    @property
    def enabled(self) -> bool:
        return self.cert_file is not None


class ReceiverSettings(_Section):
    grpc: GrpcListenerSettings = GrpcListenerSettings()
    http: HttpListenerSettings = HttpListenerSettings()
    max_message_bytes: int = Field(16 * 1024 * 1024, gt=0)
    auth_token: str = ""
    tls: TLSSettings = TLSSettings()
    max_queue_items: int = Field(20_000, gt=0, description="spans + log records waiting for commit")
    max_inflight_bytes: int = Field(
        32 * 1024 * 1024,
        gt=0,
        description="request bytes received (counted as they arrive), decoded or waiting for commit; beyond: 429",
    )
    max_concurrent_requests: int = Field(
        64,
        gt=0,
        description="requests in flight at both receivers (an HTTP request counts from its body's first "
        "bytes); beyond: 429 / RESOURCE_EXHAUSTED",
    )
    retry_after_s: int = Field(1, ge=0)
    request_timeout_s: float = Field(30.0, gt=0)
    max_connections: int = Field(
        1024,
        gt=0,
        description="open connections at each receiver (HTTP, gRPC); at HTTP a new one past it closes the "
        "longest-idle one (refused when all are busy), at gRPC it is refused; lowered at start to what the "
        "open-files limit leaves room for",
    )
    header_timeout_s: float = Field(
        10.0,
        gt=0,
        description="a new connection's request headers (HTTP) or HTTP/2 handshake (gRPC) must arrive within "
        "this; at HTTP also the next request's headers from their first byte",
    )
    idle_timeout_s: float = Field(
        60.0, gt=0, description="a connection with no request in flight for this long is closed (keep-alive)"
    )
    body_timeout_s: float = Field(
        10.0,
        gt=0,
        description="an HTTP request body must arrive within this plus one second per min_body_bytes_per_s "
        "bytes received; a slower one is cut off with 408",
    )
    min_body_bytes_per_s: int = Field(
        1024, gt=0, description="the slowest HTTP request body accepted (see body_timeout_s)"
    )

    @model_validator(mode="after")
    def _timeouts(self) -> ReceiverSettings:
        if self.header_timeout_s > self.idle_timeout_s:
            raise ValueError("header_timeout_s must not exceed idle_timeout_s")
        return self


class PostgresSettings(_Section):
    """``store.postgres``: the shared result store when ``store.backend`` is ``postgres``."""

    dsn: str = Field("", description="libpq connection string or URL, e.g. postgresql://ts:${PGPASSWORD}@db/ts")
    schema_name: str = Field("tracescorer", min_length=1, description="schema holding the tables (created if missing)")
    pool_min_size: int = Field(1, ge=0)
    pool_max_size: int = Field(8, gt=0, description="connections per daemon")
    connect_timeout_s: float = Field(10, gt=0)
    query_role: str = Field("tracescorer_query", description="SELECT-only role read-only queries run as; empty = none")
    claim_lease_s: float = Field(60, gt=0, description="a conversation claim's lease; renewed while it is scored")
    claim_interval_s: float = Field(1.0, gt=0, description="how often a daemon looks for idle conversations")

    @model_validator(mode="after")
    def _pool(self) -> PostgresSettings:
        if self.pool_min_size > self.pool_max_size:
            raise ValueError("pool_min_size must not exceed pool_max_size")
        return self


class StoreSettings(_Section):
    backend: Literal["duckdb", "postgres"] = Field(
        "duckdb",
        description="duckdb: everything in the file at path; postgres: the span log there, results shared "
        "in PostgreSQL (several daemons)",
    )
    postgres: PostgresSettings = PostgresSettings()
    path: str = "tracescorer.duckdb"
    spans: Literal["agent", "all"] = Field(
        "agent",
        description="agent: only spans and log records that may be part of a run are decoded, stored and "
        "assembled (triage); the traces skipped are counted in skipped_traces. all: every span, as received",
    )
    retention_days: float = Field(30, gt=0, description="span-log rows received longer ago than this are deleted")
    retention_interval_s: float = Field(3600, gt=0)
    results_retention_days: float | None = Field(
        None,
        gt=0,
        description="runs, scores, decisions (and their export deliveries) last written longer ago than "
        "this are deleted at each retention pass; unset: kept, within the index budget",
    )
    index_memory_share: float = Field(
        0.4,
        gt=0,
        le=0.8,
        description="DuckDB holds the key indexes of the results tables in memory, inside "
        "memory_limit (~80 bytes a key, ~7 keys a trace with two scorers): past this "
        "share of memory_limit the oldest results are deleted (and logged)",
    )
    index_check_interval_s: float = Field(15, gt=0, description="how often the index budget is checked")
    max_batch_items: int = Field(20_000, gt=0, description="rows per group commit")
    memory_limit: str = Field("1GB", pattern=r"^\d+(\.\d+)?\s*(B|KB|MB|GB|TB|KiB|MiB|GiB|TiB)$")
    checkpoint_threshold: str = Field(
        "256MB",
        pattern=r"^\d+(\.\d+)?\s*(B|KB|MB|GB|TB|KiB|MiB|GiB|TiB)$",
        description="WAL size at which a database of the store is checkpointed (checkpoints run beside the "
        "writers; fewer, larger ones cost a quarter of the CPU of 64MB ones on span-log data)",
    )
    compression: Literal["zstd", "auto"] = Field(
        "zstd",
        description="how checkpoints compress the tables: zstd (half the CPU and a third less disk than "
        "DuckDB's per-column choice on span-log text), or auto",
    )
    threads: int = Field(
        1,
        ge=1,
        le=64,
        description="DuckDB worker threads in the store process: with 1 the store's writes "
        "cost ~15% less CPU than with one per core (measured on 2 cores); more "
        "speed up large queries",
    )
    results_delay_s: float = Field(
        0.15,
        ge=0,
        le=5,
        description="results writes (runs, scores, decisions) wait up to this long to be committed "
        "together: fewer, larger commits (a commit has a fixed cost of several ms); "
        "acknowledgements of telemetry never wait for it",
    )
    query_max_rows: int = Field(10_000, gt=0)
    query_timeout_s: float = Field(30.0, gt=0)
    query_max_concurrent: int = Field(
        2,
        ge=1,
        le=64,
        description="ops-API queries (the read commands') run at once, each in a query process of its own; "
        "more are refused with 429 and Retry-After (the CLI waits and retries)",
    )
    query_memory_limit: str = Field(
        "512MB",
        pattern=r"^\d+(\.\d+)?\s*(B|KB|MB|GB|TB|KiB|MiB|GiB|TiB)$",
        description="what one query may hold: DuckDB's memory_limit in its query process, whose address space "
        "is capped at this above what it needs to start; a query past it fails, nothing else is touched",
    )
    query_max_result_bytes: int = Field(
        64 * 1024 * 1024, gt=0, description="a query's result (its rows, serialized) larger than this is refused"
    )

    @field_validator("memory_limit")
    @classmethod
    def _room_for_the_indexes(cls, value: str) -> str:
        # measured at 2k spans/s: with 64MB every few seconds a commit failed "out of memory" (the key
        # indexes take index_memory_share of it, the commits and the checkpoints need the rest)
        if size_bytes(value) < MIN_MEMORY_BYTES:
            raise ValueError(
                f"store.memory_limit {value} is below 128MB: DuckDB holds the results' key indexes and "
                "each commit inside it, and writes fail with less"
            )
        return value

    @field_validator("query_memory_limit")
    @classmethod
    def _room_for_a_query(cls, value: str) -> str:
        if size_bytes(value) < 64 * 1024 * 1024:
            raise ValueError(f"store.query_memory_limit {value} is below 64MB: a query process needs that to start")
        return value

    @model_validator(mode="after")
    def _dsn_for_postgres(self) -> StoreSettings:
        if self.backend == "postgres" and not self.postgres.dsn.strip():
            raise ValueError("store.backend is postgres: set store.postgres.dsn (e.g. ${TRACESCORER_PG_DSN})")
        return self


class AssemblySettings(_Section):
    idle_s: float = Field(5, gt=0)
    max_wait_s: float = Field(300, gt=0)
    conversation_idle_s: float = Field(900, gt=0)
    max_traces: int = Field(100_000, gt=0, description="traces tracked until complete; beyond: ingest pushes back")
    max_spans: int = Field(
        50_000, ge=0, description="spans + log records kept in memory; beyond: read back from the span log"
    )
    max_lag_s: float = Field(
        10,
        gt=0,
        description="ingest pushes back while assembly takes complete traces later "
        "than this; from 30% of it on, admits new requests at the rate "
        "assembly keeps up with",
    )
    conversation_keys: list[str] = []


class JudgeSettings(_Section):
    model: str = ""
    api_base: str | None = None
    api_key: str | None = None
    max_concurrency: int = Field(16, gt=0)
    requests_per_minute: int = Field(600, gt=0)
    daily_budget_usd: float | None = Field(None, ge=0)
    timeout_s: float = Field(60, gt=0)
    retries: int = Field(
        2,
        ge=0,
        le=10,
        description="retries of a judge request the provider did not answer (timeouts, connection errors, "
        "408/409/429, 5xx; never 400/401/403/404), so a request makes at most retries + 1 attempts",
    )
    retry_initial_s: float = Field(
        1.0, gt=0, le=60, description="wait before the first retry, doubling per retry; a longer Retry-After wins"
    )


class HealSettings(_Section):
    """``scoring.heal``: judge scores that failed for a transient error (connection refused,
    timeout, 429, 5xx) are re-scored automatically, with a doubling backoff, a bounded number of
    times and only while recent (:mod:`tracescorer.scoring.heal`)."""

    enabled: bool = True
    max_attempts: int = Field(5, ge=0, description="automatic re-scores of one error score; 0 turns healing off")
    max_age_s: float = Field(86_400, gt=0, description="error scores first stored longer ago than this are left alone")
    initial_backoff_s: float = Field(30, gt=0, description="wait before the first re-score; doubles after each failure")
    max_backoff_s: float = Field(600, gt=0, description="cap of the doubling wait")
    check_s: float = Field(10, gt=0, description="how often the store is asked for error scores due a re-score")
    max_batch: int = Field(100, gt=0, description="error scores re-scored per check at most")


class ScoringSettings(_Section):
    max_queue: int = Field(
        10_000,
        gt=0,
        description="targets waiting for a scorer: past half of it the segment log's feed waits; live runs"
        " already assembled still queue, backfills and recovery are rate_limited when full",
    )
    workers: int = Field(4, gt=0, description="concurrent code-scorer runs (judge runs: judge.max_concurrency)")
    recover_window_s: float = Field(3600, ge=0, description="at start, runs this recent without a decision are scored")
    shutdown_timeout_s: float = Field(30, ge=0)
    heal: HealSettings = Field(default_factory=HealSettings)


class ShutdownSettings(_Section):
    grace_s: float = Field(
        20,
        gt=0,
        description="the whole shutdown (SIGTERM/SIGINT/SIGHUP) ends within this; judge calls "
        "still running then are cancelled and scored after the next start",
    )


class SamplingSettings(_Section):
    ratio: float = Field(1.0, ge=0, le=1)


class BindingLimits(_Section):
    """``scorers[].limits``: caps of one binding beside the global ``judge:`` ones (a target over a
    cap gets a decision naming the cap: ``budget_exhausted`` or ``rate_limited``)."""

    daily_budget_usd: float | None = Field(
        None, ge=0, description="judge spend of this binding per UTC day; once reached its targets are refused"
    )
    requests_per_minute: int | None = Field(
        None,
        gt=0,
        description="judge requests of this binding per minute; a target that would exceed it is refused (not "
        "queued: a full bucket would hold the judge workers every binding shares)",
    )


class ScorerBinding(_Section):
    id: str
    prebuilt: str | None = None
    python: str | None = None
    options: dict[str, Any] = {}
    scope: Literal["run", "conversation"] = "run"
    sampling: SamplingSettings = SamplingSettings()
    filter: RunFilter = RunFilter()
    threshold: float | None = None
    judge: dict[str, Any] = {}
    limits: BindingLimits = BindingLimits()
    enabled: bool = True

    @model_validator(mode="after")
    def _one_source(self) -> ScorerBinding:
        if (self.prebuilt is None) == (self.python is None):
            raise ValueError("exactly one of 'prebuilt' or 'python' is required")
        return self


class OtlpSinkSettings(_Section):
    """``export.sinks[].otlp`` / ``.otlp_logs``: unset values come from ``OTEL_EXPORTER_OTLP_*``."""

    name: str | None = Field(None, min_length=1, description="stable id (default: the kind, otlp#2 when repeated)")
    endpoint: str | None = None
    protocol: Literal["grpc", "http/protobuf"] | None = None
    headers: dict[str, str] = {}
    timeout_s: float | None = Field(None, gt=0)
    compression: Literal["gzip", "none"] | None = None
    log_records: bool = Field(
        False,
        description="otlp sinks: also send each score as a gen_ai.evaluation.result log record (the evaluated "
        "span's trace and span id) to the same endpoint, the form the GenAI conventions now prefer",
    )
    span_events: bool = Field(
        True, description="otlp sinks: the gen_ai.evaluation.result span event on each evaluation span"
    )


class PhoenixSinkSettings(_Section):
    """``export.sinks[].phoenix``: Arize Phoenix span / session annotations."""

    name: str | None = Field(None, min_length=1)
    endpoint: str = Field(min_length=1, description="Phoenix base URL, e.g. http://phoenix:6006")
    api_key: str = ""
    headers: dict[str, str] = {}
    timeout_s: float | None = Field(None, gt=0)


class MlflowSinkSettings(_Section):
    """``export.sinks[].mlflow``: MLflow 3 trace assessments (feedback)."""

    name: str | None = Field(None, min_length=1)
    tracking_uri: str = Field(min_length=1, description="MLflow tracking server URL, e.g. http://mlflow:5000")
    experiment_id: str | None = None
    token: str = ""
    headers: dict[str, str] = {}
    timeout_s: float | None = Field(None, gt=0)


class SinkEntry(_Section):
    """One item of ``export.sinks``: a mapping with exactly one key, the sink kind."""

    otlp: OtlpSinkSettings | None = None
    otlp_logs: OtlpSinkSettings | None = None
    phoenix: PhoenixSinkSettings | None = None
    mlflow: MlflowSinkSettings | None = None

    @model_validator(mode="before")
    @classmethod
    def _null_means_defaults(cls, data: Any) -> Any:
        # `- otlp:` (no settings) means an otlp sink configured from the environment
        if isinstance(data, dict) and len(data) == 1:
            ((kind, value),) = data.items()
            if value is None and kind in ("otlp", "otlp_logs"):
                return {kind: {}}
        return data

    @model_validator(mode="after")
    def _exactly_one(self) -> SinkEntry:
        if len(self.kinds()) != 1:
            raise ValueError("each sink is a mapping with exactly one of: otlp, otlp_logs, phoenix, mlflow")
        if self.otlp_logs is not None and (self.otlp_logs.log_records or not self.otlp_logs.span_events):
            raise ValueError(
                "log_records and span_events are otlp sink keys (an otlp_logs sink sends log records only)"
            )
        return self

    def kinds(self) -> list[str]:
        return [k for k in ("otlp", "otlp_logs", "phoenix", "mlflow") if getattr(self, k) is not None]

    @property
    def kind(self) -> str:
        return self.kinds()[0]

    @property
    def settings(self) -> OtlpSinkSettings | PhoenixSinkSettings | MlflowSinkSettings:
        value = getattr(self, self.kind)
        assert value is not None
        return value  # type: ignore[no-any-return]


class ExportSettings(_Section):
    enabled: bool = False
    sinks: list[SinkEntry] = []
    # without `sinks`: one otlp sink with these (the form before sinks existed)
    endpoint: str | None = None
    protocol: Literal["grpc", "http/protobuf"] | None = None
    headers: dict[str, str] = {}
    timeout_s: float = Field(10, gt=0)
    batch_size: int = Field(256, gt=0, description="most scores per export request")
    interval_s: float = Field(2.0, gt=0, description="export scores written since the last export this often")
    retry_initial_s: float = Field(1.0, gt=0, description="first wait after a failed export; doubles per failure")
    retry_max_s: float = Field(60.0, gt=0, description="longest wait between retries of a failing export")
    max_rejected_attempts: int = Field(
        5,
        gt=0,
        description="a score a backend rejects (4xx other than 408/425/429) is marked failed after this many tries",
    )

    @model_validator(mode="after")
    def _one_form(self) -> ExportSettings:
        if self.sinks and (self.endpoint is not None or self.protocol is not None or self.headers):
            raise ValueError(
                "export.endpoint/protocol/headers configure the single otlp sink used without "
                "export.sinks; with sinks, set them on the sink: sinks: [{otlp: {endpoint: ...}}]"
            )
        return self


class SegmentLogSettings(_Section):
    """``segment_log``: where accepted requests are appended before they are acknowledged."""

    path: str | None = Field(
        None, description="directory of the segment files (default: store.path + '.log'; a temporary one for :memory:)"
    )
    segment_bytes: int = Field(64 << 20, ge=1 << 16, description="a segment file's size before the next starts")
    min_free_bytes: int = Field(
        64 << 20, ge=0, description="free disk space kept: appends are refused (retryable) below it"
    )
    max_lag_bytes: int = Field(
        1 << 30,
        gt=0,
        description="acknowledged bytes the feed may be behind: past it new requests are refused (retryable)",
    )
    feed_batch_bytes: int = Field(4 << 20, gt=0, description="bytes of requests the feed stores in one transaction")
    retain_bytes: int = Field(0, ge=0, description="bytes kept after the feed passed them (for inspection)")
    sync: bool = Field(True, description="fdatasync before acknowledging (false only for tests and benchmarks)")


class TriageSettings(_Section):
    """``triage`` (with ``store.spans: agent``): how long a skipped trace is remembered, so its spans
    are read back from the segment log when its agent content comes later."""

    window_s: float = Field(
        60, ge=0, description="a trace's skipped spans are read back when agent content follows within this"
    )
    max_traces: int = Field(100_000, gt=0, description="traces remembered at most (skipped ones, agent ones)")


LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]


class LogSettings(_Section):
    """``log``: the daemon's own log (third-party libraries log at WARNING and above)."""

    level: LogLevel = Field("INFO", description="debug, info, warning, error or critical, in any case")
    format: Literal["text", "json"] = Field(
        "text", description="json: one object per line (time, level, logger, message, exception)"
    )

    @field_validator("level", mode="before")
    @classmethod
    def _any_case(cls, value: Any) -> Any:
        if isinstance(value, str):
            upper = value.strip().upper()
            return "WARNING" if upper == "WARN" else upper
        return value

    @field_validator("format", mode="before")
    @classmethod
    def _lower(cls, value: Any) -> Any:
        return value.strip().lower() if isinstance(value, str) else value


class ReportSettings(_Section):
    """``tracescorer report``: links from the report to the trace backend."""

    trace_url: str | None = Field(
        None, description="trace link template, e.g. https://jaeger/trace/{trace_id} ({run_id}, {conversation_id} too)"
    )

    @field_validator("trace_url")
    @classmethod
    def _template(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if not value.startswith(("http://", "https://")):
            raise ValueError(f"{value!r} must be an http:// or https:// URL")
        try:
            value.format(trace_id="t", run_id="r", conversation_id="c", scorer_id="s")
        except (KeyError, IndexError, ValueError) as exc:
            raise ValueError(
                f"placeholders may be {{trace_id}}, {{run_id}}, {{conversation_id}}, {{scorer_id}}: {exc}"
            ) from None
        return value


class Settings(_Section):
    """The whole daemon configuration (see config/tracescorer.yaml for every key)."""

    receiver: ReceiverSettings = ReceiverSettings()
    store: StoreSettings = StoreSettings()
    segment_log: SegmentLogSettings = SegmentLogSettings()
    triage: TriageSettings = TriageSettings()
    assembly: AssemblySettings = AssemblySettings()
    judge: JudgeSettings = JudgeSettings()
    scoring: ScoringSettings = ScoringSettings()
    scorers: list[ScorerBinding] = []
    export: ExportSettings = ExportSettings()
    api: ApiSettings = ApiSettings()
    metrics: MetricsSettings = MetricsSettings()
    shutdown: ShutdownSettings = ShutdownSettings()
    score_metrics: ScoreMetricsSettings = ScoreMetricsSettings()
    monitors: list[MonitorSettings] = []
    log: LogSettings = LogSettings()
    report: ReportSettings = ReportSettings()
    # read commands: variables left unset under keys only serve uses (see tracescorer.envexpand)
    _deferred: tuple[envexpand.Unset, ...] = PrivateAttr(default=())

    @model_validator(mode="before")
    @classmethod
    def _log_level_alias(cls, data: Any) -> Any:
        if isinstance(data, dict) and "log_level" in data:
            data = dict(data)
            level = data.pop("log_level")
            log = data.get("log")
            if isinstance(log, dict) and "level" in log:
                raise ValueError("log_level is the old name of log.level: set only log.level")
            data["log"] = {**(log if isinstance(log, dict) else {}), "level": level}
        return data

    @field_validator("scorers")
    @classmethod
    def _unique_ids(cls, value: list[ScorerBinding]) -> list[ScorerBinding]:
        seen: set[str] = set()
        for binding in value:
            if binding.id in seen:
                raise ValueError(f"duplicate scorer id {binding.id!r}")
            seen.add(binding.id)
        return value

    @model_validator(mode="after")
    def _monitors_match_scorers(self) -> Settings:
        check_monitors(self.monitors, self.scorers)
        return self

    @property
    def deferred(self) -> tuple[envexpand.Unset, ...]:
        """Variables a read command left unset (their keys are left out); empty for ``serve``."""
        return self._deferred

    def require_environment(self) -> None:
        """Raise :class:`ConfigError` listing every variable a read command's load left unset:
        what needs the judge, export or notifications (``backfill`` on the file) calls this."""
        if self._deferred:
            raise ConfigError(f"invalid configuration: {envexpand.UnsetVariables(self._deferred)}")

    def masked(self) -> dict[str, Any]:
        """The effective configuration as plain data, secrets replaced by ``***``."""
        masked: dict[str, Any] = _mask(self.model_dump(mode="json"))
        return masked


_URL_PASSWORD = re.compile(r"(://[^:/@\s]*:)[^@\s]*@")
_KV_PASSWORD = re.compile(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", re.IGNORECASE)


def mask_dsn(dsn: str) -> str:
    """A PostgreSQL connection string with its password replaced by ``***`` (URL and
    ``key=value`` forms): for messages and ``check-config``."""
    return _KV_PASSWORD.sub(r"\1***", _URL_PASSWORD.sub(r"\1***@", dsn))


def _mask(value: Any, key: str = "") -> Any:
    if key == "dsn" and isinstance(value, str):
        return mask_dsn(value)
    if key in SECRET_KEYS and value:
        return dict.fromkeys(value, "***") if isinstance(value, dict) else "***"
    if isinstance(value, dict):
        return {k: _mask(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [_mask(v) for v in value]
    return value


def _apply_env(data: dict[str, Any], env: Mapping[str, str]) -> dict[tuple[str, ...], str]:
    """Apply ``TRACESCORER_<SECTION>__<KEY>`` overrides; returns {key path: variable name}.

    A variable with ``__`` is an override and its first part must be a section; a single-part
    name is an expansion variable (``TRACESCORER_AUTH_TOKEN``) unless it names a top-level key.
    """
    sections = set(Settings.model_fields)
    sources: dict[tuple[str, ...], str] = {}
    for name, raw in sorted(env.items()):
        if not name.startswith(ENV_PREFIX) or name in _NOT_OVERRIDES:
            continue
        path = name[len(ENV_PREFIX) :].lower().split("__")
        alias = _ALIASES.get(tuple(path))
        if alias is not None:
            for old in _ALIASES:  # the variable wins over the file's old spelling of the key
                data.pop(old[0], None)
            path = list(alias)
        if len(path) == 1:
            if path[0] not in sections:
                continue  # an expansion variable such as TRACESCORER_AUTH_TOKEN, not an override
            raise ConfigError(
                f"invalid configuration: {name}: {path[0]!r} is a section; set one key with "
                f"{ENV_PREFIX}{path[0].upper()}__<KEY>"
            )
        if path[0] not in sections:
            raise ConfigError(
                f"invalid configuration: {name}: unknown section {path[0]!r}"
                f"{config_errors.did_you_mean(path[0], sections)} (sections: {', '.join(sorted(sections))})"
            )
        if any(not part for part in path):
            raise ConfigError(f"invalid configuration: {name}: empty key part (use one '__' between keys)")
        node = data
        for depth, part in enumerate(path[:-1]):
            child = node.get(part)
            if child is None:
                child = {}
                node[part] = child
            elif not isinstance(child, dict):
                where = ".".join(path[: depth + 1])
                raise ConfigError(
                    f"invalid configuration: {name}: {where} is not a section, it cannot have key {path[depth + 1]!r}"
                )
            node = child
        try:
            parsed = yaml.safe_load(raw) if raw.strip() else ""
        except yaml.YAMLError:
            parsed = raw  # not YAML: plain text (validation says if the key wants something else)
        # keep secrets and free text verbatim; YAML-typed only for numbers, booleans, lists
        node[path[-1]] = parsed if isinstance(parsed, (int, float, bool, list, dict)) else raw
        sources[tuple(path)] = name
    return sources


def load_settings(
    path: str | Path | None = None, env: Mapping[str, str] | None = None, *, reading: bool = False
) -> Settings:
    """Load and validate settings from ``path`` (optional) and the environment.

    ``reading``: for the read commands, which neither call the judge nor export nor notify:
    variables only those keys use may be unset (:mod:`tracescorer.envexpand`); the keys are left
    out and :meth:`Settings.require_environment` reports them if something needs them after all.
    """
    env = os.environ if env is None else env
    data: Any = {}
    if path is not None:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
        try:
            data = yaml.safe_load(text) or {}
        except yaml.YAMLError as exc:
            raise ConfigError(f"config file {path} is not valid YAML: {exc}") from None
        if not isinstance(data, dict):
            raise ConfigError(f"config file {path}: the top level must be a mapping")
    try:
        data, deferred = envexpand.expand(data, env, reading=reading)
    except envexpand.UnsetVariables as exc:
        raise ConfigError(f"invalid configuration: {exc}") from None
    sources = _apply_env(data, env)
    try:
        settings = Settings.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(config_errors.describe(exc, Settings, sources, data)) from None
    settings._deferred = deferred
    return settings


def check_store_path(path: str) -> Path | None:
    """Check that ``store.path`` can hold a database. Returns the directory that does not exist
    yet (``serve`` creates it and says so), else None. Raises :class:`ConfigError`."""
    if path == ":memory:":
        return None
    target = Path(path).absolute()
    if target.is_dir():
        raise ConfigError(
            f"store.path: {path!r} is a directory; give a file name, e.g. {str(Path(path) / 'tracescorer.duckdb')!r}"
        )
    existing = next(p for p in target.parents if p.exists())
    if not existing.is_dir():
        raise ConfigError(f"store.path: {path!r} is below {str(existing)!r}, which is a file, not a directory")
    missing = existing != target.parent
    if (missing or not target.exists()) and not os.access(existing, os.W_OK | os.X_OK):
        raise ConfigError(f"store.path: {path!r}: directory {str(existing)!r} is not writable")
    return target.parent if missing else None
