"""Transport-independent ingest: admit, check, append to the segment log, wait for the sync.

Both receivers (gRPC and HTTP) call :meth:`Ingestor.ingest` and map its outcome or exception to
their protocol's status codes. A request is acknowledged once it is in the segment log
(:mod:`tracescorer.seglog`: appended and synced); its spans are decoded, stored and assembled
later by the log's feed (:mod:`tracescorer.feed`). Before the append a request is only parsed and
its ids checked (:mod:`tracescorer.receiver.checks`): what is acknowledged is what the feed can
store.

Admission is bounded by what the receivers hold — requests in flight (counted from the moment a
receiver gets one's first body bytes, at gRPC as grpc's own loop hands it over) and the bytes of
requests in flight (being received, checked, or waiting for their sync) — and by the segment log:
once its feed is ``segment_log.max_lag_bytes`` behind, or the disk is short of
``segment_log.min_free_bytes``, new requests are refused as retryable backpressure. The stages
after the log (assembly, scoring) never refuse a client: they hold the feed back, and their
backlog waits in the log, on disk, not in memory.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Protocol

from tracescorer.metrics import Metrics
from tracescorer.receiver import checks, decode
from tracescorer.seglog import LOGS, TRACES, LogClosed, LogError, LogFull

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


@dataclass(slots=True)
class Ticket:
    """A request's place among those in flight (:meth:`Ingestor.enter`); ``reserved``: the bytes
    held for its body while it is received."""

    reserved: int
    left: bool = False


@dataclass(frozen=True, slots=True)
class IngestOutcome:
    accepted: int
    rejected: int
    message: str = ""


class RequestLog(Protocol):
    """Where accepted requests go (the segment log): ``append`` returns once the record is synced."""

    async def append(self, kind: int, payload: bytes) -> int: ...


#: A downstream stage's backlog check: None while under its bound, else why not.
BacklogCheck = Callable[[], str | None]

#: bodies from this size on are checked in a worker thread, so the event loop keeps turning
#: (a protobuf body is checked at ~500 MB/s, an OTLP/JSON one decoded at roughly 20-40 MB/s)
CHECK_INLINE_BYTES = {Encoding.PROTOBUF: 4 * 1024 * 1024, Encoding.JSON: 256 * 1024}

_CHECKS: dict[tuple[Signal, Encoding], Callable[[bytes], checks.Checked]] = {
    (Signal.TRACES, Encoding.PROTOBUF): checks.check_traces_protobuf,
    (Signal.TRACES, Encoding.JSON): checks.check_traces_json,
    (Signal.LOGS, Encoding.PROTOBUF): checks.check_logs_protobuf,
    (Signal.LOGS, Encoding.JSON): checks.check_logs_json,
}
_KIND = {Signal.TRACES: TRACES, Signal.LOGS: LOGS}


def _timed(check: Callable[[bytes], checks.Checked], body: bytes) -> tuple[checks.Checked | decode.DecodeError, float]:
    """``check(body)`` (or the error it raised) and the CPU time the calling thread spent on it."""
    started = time.thread_time()
    result: checks.Checked | decode.DecodeError
    try:
        result = check(body)
    except decode.DecodeError as exc:
        result = exc
    return result, time.thread_time() - started


class Ingestor:
    def __init__(
        self,
        requests: RequestLog,
        metrics: Metrics,
        *,
        retry_after_s: int = 1,
        max_inflight_bytes: int = 64 * 1024 * 1024,
        max_requests: int = 64,
    ) -> None:
        self._log = requests
        self._metrics = metrics
        self._retry_after_s = retry_after_s
        self._max_inflight = max_inflight_bytes
        self._inflight = 0
        self._max_requests = max_requests
        self._requests = 0  # requests seen by a receiver and not answered yet
        self._receiving = 0  # bytes reserved for bodies being received
        self._checks: list[tuple[str, BacklogCheck]] = []
        self._saturation: list[tuple[str, BacklogCheck]] = []
        self._closing = False

    def add_backlog_check(self, bound: str, check: BacklogCheck) -> None:
        """Refuse new requests (retryable) while ``check()`` says ``bound`` is over its limit."""
        self._checks.append((bound, check))

    def stop_accepting(self) -> None:
        self._closing = True

    @property
    def inflight_bytes(self) -> int:
        """Bytes of requests in flight: bodies being ingested and those reserved while received."""
        return self._inflight + self._receiving

    @property
    def ingesting_bytes(self) -> int:
        """Bytes of bodies received whole and taken for ingest (being decoded or awaiting their commit)."""
        return self._inflight

    @property
    def requests_in_flight(self) -> int:
        return self._requests

    def enter(self, signal: Signal, announced: int = 0) -> Ticket:
        """Take a place among the requests in flight (at HTTP with the body's first bytes, at gRPC
        once grpc has the whole message); raise :class:`IngestRefused` when none may be taken now,
        or when ``announced`` more bytes (a Content-Length) would not fit. Nothing is reserved:
        :meth:`reserve` holds bytes as they arrive. Every ticket is given back with :meth:`leave`
        once the request is answered, whatever happened to it."""
        if not self._closing:
            self.check_requests(signal, self._requests)
        self.admit(signal, announced)
        self._requests += 1
        return Ticket(0)

    def reserve(self, signal: Signal, ticket: Ticket, size: int) -> None:
        """Hold ``size`` more bytes of ``ticket``'s body, received just now, until :meth:`ingest`
        takes the body or :meth:`leave` drops it; raise :class:`IngestRefused` when they would
        take the bytes in flight past ``receiver.max_inflight_bytes`` (a body alone in flight may
        still grow, so it can progress)."""
        held = self._inflight + self._receiving
        if held > ticket.reserved and held + size > self._max_inflight:
            raise self._refuse(
                signal, "inflight_bytes", f"too much in flight ({held} bytes being received or ingested)"
            )
        self._receiving += size
        ticket.reserved += size

    def add_saturation_check(self, bound: str, check: BacklogCheck) -> None:
        """Report ``check()`` from :meth:`saturated` (a receiver's own bound, its connections say)."""
        self._saturation.append((bound, check))

    def saturated(self) -> str | None:
        """Which of the receivers' own bounds is hit now (None when none is): requests in flight,
        bytes in flight, or one added by :meth:`add_saturation_check`. For readiness: a client
        would be refused while it holds."""
        if self._requests >= self._max_requests:
            return f"requests: {self._requests} in flight (receiver.max_concurrent_requests {self._max_requests})"
        if self.inflight_bytes >= self._max_inflight:
            return f"inflight_bytes: {self.inflight_bytes} bytes in flight (receiver.max_inflight_bytes {self._max_inflight})"
        for bound, check in self._saturation:
            reason = check()
            if reason is not None:
                return f"{bound}: {reason}"
        return None

    def check_requests(self, signal: Signal, count: int) -> None:
        """Raise :class:`IngestRefused` when ``count`` requests in flight are as many as may be.
        Safe from another thread (the gRPC receiver's loop): it reads a setting and counts a metric."""
        if count >= self._max_requests:
            raise self._refuse(
                signal, "requests", f"too many requests in flight ({count}; receiver.max_concurrent_requests)"
            )

    def leave(self, ticket: Ticket) -> None:
        if ticket.left:
            return
        ticket.left = True
        self._requests -= 1
        self._receiving -= ticket.reserved
        ticket.reserved = 0

    def over_bound(self) -> str | None:
        """Why new requests are refused right now (None when they are admitted)."""
        for stage, check in self._checks:
            reason = check()
            if reason is not None:
                return f"{stage}: {reason}"
        return None

    def _refuse(self, signal: Signal, reason: str, message: str) -> IngestRefused:
        self._metrics.backpressure.labels(reason).inc()
        return IngestRefused("backpressure", message, retryable=True, retry_after_s=self._retry_after_s)

    def admit(self, signal: Signal, size: int) -> None:
        """Raise :class:`IngestRefused` unless a request of ``size`` bytes may be taken now."""
        if self._closing:
            raise IngestRefused(
                "shutting_down", "server is shutting down", retryable=True, retry_after_s=self._retry_after_s
            )
        # an oversized request is still admitted when nothing else is in flight, so it can progress
        held = self._inflight + self._receiving
        if held and held + size > self._max_inflight:
            raise self._refuse(signal, "inflight_bytes", f"too much in flight ({held} bytes being ingested)")
        reason = self.over_bound()
        if reason is not None:
            raise self._refuse(signal, reason.split(":", 1)[0], f"pipeline busy ({reason})")

    async def ingest(
        self, signal: Signal, encoding: Encoding, body: bytes, ticket: Ticket | None = None
    ) -> IngestOutcome:
        """Admit, check ``body`` and return once its valid items are in the segment log; the bytes
        the request's ``ticket`` held for it are now counted as the body's."""
        if ticket is not None:
            self._receiving -= ticket.reserved
            ticket.reserved = 0
        self.admit(signal, len(body))
        self._inflight += len(body)
        try:
            return await self._ingest(signal, encoding, body)
        finally:
            self._inflight -= len(body)

    async def _ingest(self, signal: Signal, encoding: Encoding, body: bytes) -> IngestOutcome:
        check = _CHECKS[(signal, encoding)]
        if len(body) < CHECK_INLINE_BYTES[encoding]:
            checked, cpu_s = _timed(check, body)
        else:  # a large body would hold the event loop (50 spans x 10k attributes as JSON: 455 ms)
            checked, cpu_s = await asyncio.to_thread(_timed, check, body)
        self._metrics.stage_cpu.labels("check").inc(cpu_s)
        if isinstance(checked, decode.DecodeError):
            raise IngestRefused("decode_error", str(checked), retryable=False)
        if checked.accepted:
            await self._append(signal, checked)
        if checked.rejected:
            self._metrics.rejected.labels(signal.value, "invalid").inc(checked.rejected)
        message = decode.error_summary(checked.rejected, checked.errors) if checked.rejected else ""
        return IngestOutcome(accepted=checked.accepted, rejected=checked.rejected, message=message)

    async def _append(self, signal: Signal, checked: checks.Checked) -> None:
        try:
            # shield: a client that hangs up must not cancel the sync wait of others' batch
            await asyncio.shield(self._log.append(_KIND[signal], checked.payload))
        except LogFull as exc:  # 503 / UNAVAILABLE: nothing can be kept until space is freed
            self._metrics.rejected.labels(signal.value, "disk_full").inc(checked.accepted)
            raise IngestRefused("disk_full", str(exc), retryable=True, retry_after_s=self._retry_after_s) from None
        except LogClosed as exc:
            self._metrics.rejected.labels(signal.value, "shutting_down").inc(checked.accepted)
            raise IngestRefused("shutting_down", str(exc), retryable=True, retry_after_s=self._retry_after_s) from None
        except LogError as exc:
            self._metrics.rejected.labels(signal.value, "store_error").inc(checked.accepted)
            raise IngestRefused("store_error", str(exc), retryable=True, retry_after_s=self._retry_after_s) from None
        self._metrics.accepted.labels(signal.value).inc(checked.accepted)
