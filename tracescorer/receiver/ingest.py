"""Transport-independent ingest: decode, validate, queue for commit, wait for durability.

Both receivers (gRPC and HTTP) call :meth:`Ingestor.ingest` and map its outcome or exception to
their protocol's status codes. Nothing is acknowledged before its rows are committed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Protocol

from tracescorer.metrics import Metrics
from tracescorer.model import LogRecord, Span
from tracescorer.receiver import decode
from tracescorer.store.duckdb import DuckDBStore, QueueFull, StoreClosed, StoreError

log = logging.getLogger(__name__)


class Signal(str, Enum):
    TRACES = "traces"
    LOGS = "logs"


class Encoding(str, Enum):
    PROTOBUF = "protobuf"
    JSON = "json"


class IngestRefused(Exception):
    """The request was refused as a whole; ``reason`` says why, ``retryable`` whether to retry."""

    def __init__(self, reason: str, message: str, *, retryable: bool, retry_after_s: int = 0) -> None:
        super().__init__(message)
        self.reason = reason
        self.retryable = retryable
        self.retry_after_s = retry_after_s


@dataclass(frozen=True, slots=True)
class IngestOutcome:
    accepted: int
    rejected: int
    message: str = ""


class TelemetryListener(Protocol):
    """Told about telemetry after it was committed (called on the event loop; must not block)."""

    def on_committed(self, spans: Sequence[Span], logs: Sequence[LogRecord]) -> None: ...


_DECODERS: dict[tuple[Signal, Encoding], Callable[[bytes], decode.DecodedTraces | decode.DecodedLogs]] = {
    (Signal.TRACES, Encoding.PROTOBUF): decode.decode_traces_protobuf,
    (Signal.TRACES, Encoding.JSON): decode.decode_traces_json,
    (Signal.LOGS, Encoding.PROTOBUF): decode.decode_logs_protobuf,
    (Signal.LOGS, Encoding.JSON): decode.decode_logs_json,
}


class Ingestor:
    def __init__(
        self,
        store: DuckDBStore,
        metrics: Metrics,
        *,
        retry_after_s: int = 1,
        listeners: Sequence[TelemetryListener] = (),
    ) -> None:
        self._store = store
        self._metrics = metrics
        self._retry_after_s = retry_after_s
        self._listeners = list(listeners)
        self._closing = False

    def add_listener(self, listener: TelemetryListener) -> None:
        self._listeners.append(listener)

    def stop_accepting(self) -> None:
        self._closing = True

    async def ingest(self, signal: Signal, encoding: Encoding, body: bytes) -> IngestOutcome:
        """Decode ``body`` and return once its valid items are committed."""
        if self._closing:
            raise IngestRefused("shutting_down", "server is shutting down", retryable=True, retry_after_s=self._retry_after_s)
        try:
            decoded = _DECODERS[(signal, encoding)](body)
        except decode.DecodeError as exc:
            raise IngestRefused("decode_error", str(exc), retryable=False) from None
        if isinstance(decoded, decode.DecodedTraces):
            spans, logs = decoded.spans, []
        else:
            spans, logs = [], decoded.records
        count = len(spans) + len(logs)
        if decoded.rejected:
            self._metrics.rejected.labels(signal.value, "invalid").inc(decoded.rejected)
        message = decode.error_summary(decoded.rejected, decoded.errors) if decoded.rejected else ""
        if count:
            await self._commit(signal, spans, logs, count)
        return IngestOutcome(accepted=count, rejected=decoded.rejected, message=message)

    async def _commit(self, signal: Signal, spans: list[Span], logs: list[LogRecord], count: int) -> None:
        try:
            future = self._store.submit_telemetry(spans, logs)
        except QueueFull as exc:
            self._metrics.rejected.labels(signal.value, "backpressure").inc(count)
            raise IngestRefused("backpressure", str(exc), retryable=True, retry_after_s=self._retry_after_s) from None
        except StoreClosed as exc:
            self._metrics.rejected.labels(signal.value, "shutting_down").inc(count)
            raise IngestRefused("shutting_down", str(exc), retryable=True, retry_after_s=self._retry_after_s) from None
        try:
            # shield: a client that hangs up must not cancel the commit wait of others' batch
            await asyncio.shield(asyncio.wrap_future(future))
        except StoreError as exc:
            self._metrics.rejected.labels(signal.value, "store_error").inc(count)
            raise IngestRefused("store_error", str(exc), retryable=True, retry_after_s=self._retry_after_s) from None
        self._metrics.accepted.labels(signal.value).inc(count)
        for listener in self._listeners:
            try:
                listener.on_committed(spans, logs)
            except Exception:  # noqa: BLE001 - a downstream stage must never fail an acknowledged request
                log.exception("telemetry listener %r failed", listener)
