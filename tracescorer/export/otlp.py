"""Scores back out as OpenTelemetry: one evaluation span per score, in the scored trace.

The ``scores`` table is the queue. :class:`EvaluationExporter` works like the SDK's
``BatchSpanProcessor`` with DuckDB as its buffer: it exports when ``batch_size`` new scores were
announced (:meth:`~EvaluationExporter.notify`) or every ``interval_s``, reads the oldest
unexported score versions (``exported_at IS NULL OR exported_at < updated_at``), sends them with
a standard OTLP ``SpanExporter`` and sets ``exported_at`` for exactly the versions it sent. A
failed export leaves the rows as they are and is retried with exponential backoff, so nothing is
lost across outages or restarts. The span id is derived from the score id and ``updated_at``: a
retry of the same score version sends the same span again, a re-score sends a new one.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import math
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext, SpanKind, TraceFlags
from opentelemetry.trace.status import Status, StatusCode
from opentelemetry.util.types import AttributeValue

from tracescorer.config import ConfigError, ExportSettings
from tracescorer.store.base import Store

log = logging.getLogger(__name__)

__all__ = [
    "EVALUATION_EVENT",
    "EvaluationExporter",
    "ExportObserver",
    "ExportOutcome",
    "ScoreRow",
    "build_evaluation_spans",
    "build_span_exporter",
    "default_resource",
    "evaluation_attributes",
    "evaluation_span_id",
    "mark_exported",
    "read_pending",
]

EVALUATION_EVENT = "gen_ai.evaluation.result"
SCOPE = InstrumentationScope("tracescorer.export")
DEFAULT_SERVICE_NAME = "tracescorer"
_MAX_STATUS_DESCRIPTION = 1024

ExportOutcome = Literal["exported", "failed"]


class ExportObserver(Protocol):
    """Told about every export attempt (called on the event loop; must not block or raise).

    ``outcome`` is ``"exported"`` (the backend accepted ``spans`` evaluation spans) or
    ``"failed"`` (the exporter reported failure or raised; the rows stay unexported and are
    retried); ``seconds`` is the duration of the exporter call.
    """

    def on_export(self, outcome: ExportOutcome, spans: int, seconds: float) -> None: ...


class _NullObserver:
    def on_export(self, outcome: ExportOutcome, spans: int, seconds: float) -> None:
        pass


# --- rows ------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class ScoreRow:
    """The columns of one ``scores`` row an evaluation span is built from.

    ``updated_at_us`` (microseconds since the epoch) identifies the score version: it seeds the
    span id and guards :func:`mark_exported` against marking a version that was never sent.
    """

    id: str
    scorer_id: str
    run_id: str | None
    trace_id: str | None
    span_id: str | None
    conversation_id: str | None
    score: float | None
    reason: str | None
    status: str
    error: str | None
    error_type: str | None
    label: str | None
    judge_cost_usd: float | None
    duration_ms: float | None
    updated_at_us: int


_ROW_FIELDS = [
    "id", "scorer_id", "run_id", "trace_id", "span_id", "conversation_id", "score", "reason",
    "status", "error", "error_type", "label", "judge_cost_usd", "duration_ms",
]  # fmt: skip


async def read_pending(store: Store, limit: int) -> list[ScoreRow]:
    """The oldest ``limit`` score versions not exported yet (new, re-scored or failed before)."""
    rows = await store.pending_exports(_ROW_FIELDS, limit)
    return [ScoreRow(**dict(zip([*_ROW_FIELDS, "updated_at_us"], row))) for row in rows]


async def mark_exported(store: Store, rows: Sequence[ScoreRow]) -> int:
    """Record exactly these score versions as exported; a row re-scored since it was read has
    another version and stays pending, so its new version goes out with a later pass."""
    return await store.mark_exported([(r.id, r.updated_at_us) for r in rows])


def _hex_id(value: str | None, digits: int) -> int | None:
    if not value or len(value) != digits:
        return None
    try:
        parsed = int(value, 16)
    except ValueError:
        return None
    return parsed or None


def _digest_id(text: str, nbytes: int) -> int:
    value = int.from_bytes(hashlib.sha256(text.encode()).digest()[:nbytes], "big")
    return value or 1  # the all-zero id is invalid in OTLP


def evaluation_span_id(row: ScoreRow) -> int:
    """Deterministic per score version: a retried export sends the same span, a re-score a new one."""
    return _digest_id(f"tracescorer.evaluation\0{row.id}\0{row.updated_at_us}", 8)


def evaluation_attributes(row: ScoreRow) -> dict[str, AttributeValue]:
    """The attributes of the evaluation span and of its ``gen_ai.evaluation.result`` event."""
    attrs: dict[str, AttributeValue] = {"gen_ai.evaluation.name": row.scorer_id}
    if row.score is not None and math.isfinite(row.score):
        attrs["gen_ai.evaluation.score.value"] = float(row.score)
    if row.label is not None:
        attrs["gen_ai.evaluation.score.label"] = row.label
    if row.reason:
        attrs["gen_ai.evaluation.explanation"] = row.reason
    if row.conversation_id:
        attrs["gen_ai.conversation.id"] = row.conversation_id
    if row.status == "error":
        attrs["error.type"] = row.error_type or "scorer_error"
    attrs["tracescorer.scorer.id"] = row.scorer_id
    if row.run_id:
        attrs["tracescorer.run.id"] = row.run_id
    if row.judge_cost_usd is not None:
        attrs["tracescorer.judge.cost_usd"] = float(row.judge_cost_usd)
    attrs["tracescorer.score.id"] = row.id
    attrs["tracescorer.score.status"] = row.status
    return attrs


def _build_span(row: ScoreRow, resource: Resource) -> ReadableSpan:
    flags = TraceFlags(TraceFlags.SAMPLED)
    trace_id = _hex_id(row.trace_id, 32)
    parent_span_id = _hex_id(row.span_id, 16) if trace_id is not None else None
    parent: SpanContext | None = None
    links: list[Link] = []
    if trace_id is None:
        # No scored trace to join (should not happen for stored runs): a trace of its own,
        # stable per score so retries and re-scores land together.
        trace_id = _digest_id(f"tracescorer.trace\0{row.id}", 16)
    elif parent_span_id is not None:
        parent = SpanContext(trace_id, parent_span_id, is_remote=True, trace_flags=flags)
        links.append(Link(parent))
    context = SpanContext(trace_id, evaluation_span_id(row), is_remote=False, trace_flags=flags)
    end_ns = row.updated_at_us * 1000
    duration_ns = int(row.duration_ms * 1e6) if row.duration_ms and math.isfinite(row.duration_ms) else 0
    start_ns = max(0, end_ns - max(0, duration_ns))
    attrs = evaluation_attributes(row)
    status = Status(StatusCode.UNSET)
    if row.status == "error":
        status = Status(StatusCode.ERROR, (row.error or "scorer error")[:_MAX_STATUS_DESCRIPTION])
    return ReadableSpan(
        name=f"evaluate {row.scorer_id}",
        context=context,
        parent=parent,
        resource=resource,
        attributes=attrs,
        events=(Event(EVALUATION_EVENT, dict(attrs), timestamp=end_ns),),
        links=links,
        kind=SpanKind.INTERNAL,
        status=status,
        start_time=start_ns,
        end_time=end_ns,
        instrumentation_scope=SCOPE,
    )


def build_evaluation_spans(rows: Sequence[ScoreRow], resource: Resource) -> list[ReadableSpan]:
    """One finished ``evaluate {scorer_id}`` span per score, child of and linked to the scored span.

    Start/end come from the score (``updated_at`` minus the scoring duration), never the wall
    clock, so the same score version always gives an identical span.
    """
    spans = []
    for row in rows:
        try:
            spans.append(_build_span(row, resource))
        except Exception:  # noqa: BLE001 - one malformed row must not hold back the batch
            log.exception("cannot build an evaluation span for score %s", row.id)
    return spans


def default_resource(attributes: Mapping[str, AttributeValue] | None = None) -> Resource:
    """``service.name=tracescorer`` unless given or set by ``OTEL_SERVICE_NAME``; plus
    ``OTEL_RESOURCE_ATTRIBUTES`` and the SDK's ``telemetry.sdk.*`` attributes."""
    attrs = dict(attributes or {})
    if "service.name" not in attrs and not os.environ.get("OTEL_SERVICE_NAME"):
        resource = Resource.create(attrs)
        if str(resource.attributes.get("service.name", "")).startswith("unknown_service"):
            attrs["service.name"] = DEFAULT_SERVICE_NAME
    return Resource.create(attrs)


# --- the SDK exporter --------------------------------------------------------------------------------


def _protocol(settings: ExportSettings) -> str:
    if settings.protocol is not None:
        return settings.protocol
    for name in ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"):
        value = os.environ.get(name, "").strip()
        if value:
            if value not in ("grpc", "http/protobuf"):
                raise ConfigError(f"{name}: unsupported protocol {value!r} (use grpc or http/protobuf)")
            return value
    return "grpc"  # the Python SDK's (opentelemetry-distro's) default


def build_span_exporter(settings: ExportSettings) -> SpanExporter:
    """The OTLP ``SpanExporter`` for ``settings``; unset values come from ``OTEL_EXPORTER_OTLP_*``.

    ``protocol``: ``export.protocol``, else ``OTEL_EXPORTER_OTLP_TRACES_PROTOCOL`` /
    ``OTEL_EXPORTER_OTLP_PROTOCOL``, else ``grpc``. ``endpoint``: ``export.endpoint``, else the
    SDK exporter reads ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` / ``OTEL_EXPORTER_OTLP_ENDPOINT``
    (gRPC: ``http://host:port`` means plaintext, as in the SDK; HTTP: a base URL, to which
    ``/v1/traces`` is appended unless present). ``headers``: ``export.headers``, else
    ``OTEL_EXPORTER_OTLP_(TRACES_)HEADERS``. TLS files and compression follow the SDK variables.
    """
    headers = dict(settings.headers) or None
    if _protocol(settings) == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter

        return GrpcExporter(endpoint=settings.endpoint, headers=headers, timeout=settings.timeout_s)
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter

    endpoint = settings.endpoint
    if endpoint is not None and not endpoint.rstrip("/").endswith("/v1/traces"):
        endpoint = endpoint.rstrip("/") + "/v1/traces"
    return HttpExporter(endpoint=endpoint, headers=headers, timeout=settings.timeout_s)


# --- the batching loop ---------------------------------------------------------------------------------


class EvaluationExporter:
    """Exports stored scores as evaluation spans, batched like OTel's ``BatchSpanProcessor``.

    Runs on the daemon's event loop; the blocking SDK exporter runs in a worker thread. No
    method raises into its caller: failures are logged (once per failure streak), counted via
    the observer, and retried from the ``scores`` table.
    """

    def __init__(
        self,
        store: Store,
        settings: ExportSettings,
        *,
        exporter: SpanExporter | None = None,
        observer: ExportObserver | None = None,
        resource_attributes: Mapping[str, AttributeValue] | None = None,
    ) -> None:
        """Raises :class:`~tracescorer.config.ConfigError` when export is enabled with a bad
        ``OTEL_EXPORTER_OTLP_PROTOCOL``. With ``settings.enabled`` false nothing is built and
        every method is a no-op."""
        self._store = store
        self._settings = settings
        self._observer: ExportObserver = observer or _NullObserver()
        self._resource = default_resource(resource_attributes)
        self._exporter: SpanExporter | None = None
        if settings.enabled:
            self._exporter = exporter if exporter is not None else build_span_exporter(settings)
        self._lock = asyncio.Lock()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._flushes: set[asyncio.Task[bool]] = set()
        self._stopped = False
        self._dirty = True  # at start, pick up whatever an earlier process left unexported
        self._announced = 0
        self._failures = 0
        self._backoff_s = 0.0
        self._retry_at = 0.0

    @property
    def enabled(self) -> bool:
        return self._exporter is not None

    @property
    def span_exporter(self) -> SpanExporter | None:
        """The SDK exporter in use (None when export is disabled)."""
        return self._exporter

    @property
    def resource(self) -> Resource:
        return self._resource

    async def start(self) -> None:
        """Start the export loop (the first pass also exports rows left from earlier runs)."""
        if self._exporter is None or self._task is not None or self._stopped:
            return
        self._task = asyncio.create_task(self._run(), name="evaluation-export")

    def notify(self, count: int = 1) -> None:
        """``count`` scores were written: export now once ``batch_size`` are waiting, else on the timer.

        Call on the event loop's thread; cheap, never blocks.
        """
        if self._exporter is None or self._stopped:
            return
        self._dirty = True
        self._announced += max(count, 0)
        if self._announced >= self._settings.batch_size and time.monotonic() >= self._retry_at:
            self._wake.set()

    def on_scores(self, scores: Sequence[Any]) -> None:
        """ScoreListener: new score rows were committed."""
        self.notify(len(scores))

    async def force_flush(self, timeout_s: float = 30.0) -> bool:
        """Export every pending score now (ignoring any retry backoff).

        True when nothing is left pending; False on an export failure, on timeout, or after
        shutdown. A batch in flight at the timeout still completes in the background.
        """
        if self._exporter is None:
            return True
        if self._stopped:
            return False
        return await self._flush(timeout_s)

    async def shutdown(self, timeout_s: float = 30.0) -> bool:
        """Stop intake, export what is pending until the deadline, then shut the SDK exporter down.

        Returns whether everything pending was exported. Whatever is left stays unexported in the
        ``scores`` table for the next start. Idempotent.
        """
        if self._exporter is None or self._stopped:
            return True
        deadline = time.monotonic() + timeout_s
        self._stopped = True
        self._wake.set()
        if self._task is not None:
            await asyncio.wait({self._task}, timeout=max(0.0, deadline - time.monotonic()))
        drained = await self._flush(max(0.0, deadline - time.monotonic()))
        exporter = self._exporter
        try:
            await asyncio.to_thread(exporter.shutdown)
        except Exception:  # noqa: BLE001 - a failing exporter shutdown must not fail ours
            log.exception("span exporter shutdown failed")
        # Past the deadline: abandon the wait (an exporter call may still be finishing in its
        # thread; its rows stay unexported and go out after the next start).
        pending = [t for t in (self._task, *self._flushes) if t is not None and not t.done()]
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)
            log.warning("evaluation export shutdown: deadline passed with an export in flight")
        return drained and not pending

    # --- internals ---------------------------------------------------------------------------

    async def _flush(self, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        task = asyncio.create_task(self._drain(deadline), name="evaluation-export-flush")
        self._flushes.add(task)
        task.add_done_callback(self._flushes.discard)
        done, _ = await asyncio.wait({task}, timeout=timeout_s)
        return task in done and not task.cancelled() and task.result()

    async def _run(self) -> None:
        interval_s = self._settings.interval_s
        while not self._stopped:
            # after a failure the backoff decides (not the timer): retries slow down, then recover
            wait_s = max(0.0, self._retry_at - time.monotonic()) if self._failures else interval_s
            try:
                await asyncio.wait_for(self._wake.wait(), wait_s)
            except TimeoutError:
                pass
            self._wake.clear()
            if self._stopped:
                break
            if self._dirty and time.monotonic() >= self._retry_at:
                await self._drain(None)

    async def _drain(self, deadline: float | None) -> bool:
        """Export batches until none is full; True when nothing is pending any more."""
        try:
            async with self._lock:
                while deadline is None or time.monotonic() < deadline:
                    self._dirty = False
                    self._announced = 0
                    read, marked = await self._export_once()
                    if read < 0:
                        self._dirty = True
                        return False
                    # a row re-scored while its old version was in flight is pending again
                    if read < self._settings.batch_size and marked == read:
                        return True
                return False
        except Exception:  # noqa: BLE001 - the loop must survive anything; the rows stay pending
            log.exception("evaluation export pass failed")
            self._dirty = True
            return False

    async def _export_once(self) -> tuple[int, int]:
        """Read, send and mark one batch: (rows read, rows marked exported); (-1, 0) on failure."""
        exporter = self._exporter
        assert exporter is not None
        limit = self._settings.batch_size
        try:
            rows = await read_pending(self._store, limit)
        except Exception as exc:  # noqa: BLE001 - store closed or failing: try again later
            self._failed("cannot read pending scores: %s", exc)
            return -1, 0
        if not rows:
            return 0, 0
        spans = build_evaluation_spans(rows, self._resource)
        started = time.perf_counter()
        try:
            result = await asyncio.to_thread(exporter.export, spans)
        except Exception as exc:  # noqa: BLE001 - SpanExporter.export should not raise; some do
            result = SpanExportResult.FAILURE
            log.debug("span exporter raised", exc_info=exc)
        seconds = time.perf_counter() - started
        if result is not SpanExportResult.SUCCESS:
            self._observer_call("failed", len(spans), seconds)
            self._failed("evaluation export of %d spans failed", len(spans))
            return -1, 0
        self._observer_call("exported", len(spans), seconds)
        try:
            marked = await mark_exported(self._store, rows)
        except Exception as exc:  # noqa: BLE001 - sent but not marked: sent again later (same span ids)
            self._failed("exported %d evaluation spans but cannot record it: %s", len(rows), exc)
            return -1, 0
        self._succeeded()
        return len(rows), marked

    def _observer_call(self, outcome: ExportOutcome, spans: int, seconds: float) -> None:
        try:
            self._observer.on_export(outcome, spans, seconds)
        except Exception:  # noqa: BLE001 - metrics must not break export
            log.exception("export observer failed")

    def _failed(self, message: str, *args: Any) -> None:
        settings = self._settings
        self._failures += 1
        self._backoff_s = min(settings.retry_max_s, self._backoff_s * 2 if self._backoff_s else settings.retry_initial_s)
        self._retry_at = time.monotonic() + self._backoff_s
        if self._failures == 1:
            log.warning(message + "; retrying with backoff (up to %gs) until it succeeds", *args, settings.retry_max_s)
        else:
            log.debug(message + " (failure %d in a row)", *args, self._failures)

    def _succeeded(self) -> None:
        if self._failures:
            log.info("evaluation export recovered after %d failed attempts", self._failures)
        self._failures = 0
        self._backoff_s = 0.0
        self._retry_at = 0.0
