"""Transport-independent ingest: admit, decode, store, wait for durability.

Both receivers (gRPC and HTTP) call :meth:`Ingestor.ingest` and map its outcome or exception to
their protocol's status codes. Nothing is acknowledged before its rows are committed.

Admission is bounded by the whole pipeline, not only the write queue: the requests in flight
(counted from the moment a receiver gets one: at HTTP before its body is read, whose announced
length is held meanwhile; at gRPC as grpc's own loop hands it over), the bytes of requests in
flight (being received, decoded or waiting for their commit), the store's queue of uncommitted
items, and whatever the downstream stages report through their backlog checks (traces waiting
for assembly, targets waiting for a scorer). When any is over its bound the request is refused as retryable
backpressure before it is decoded, so a client that keeps sending is slowed down instead of
filling the daemon's memory.

Short of a bound, a stage that reports its load (:data:`Pressure`) sheds load from
:data:`SHED_FROM` of its bound on: when it also reports its throughput (items it takes in per
second), new requests are admitted at that rate, a little less the further behind it is, so the
backlog stops growing; otherwise a share of new requests that grows with the load is refused.
Refusing nothing until a bound is reached and then everything until the backlog was gone made
admission swing between both for tens of seconds at a time under a 2x overload (~20 s open at the
full offered rate, ~20 s closed while assembly caught up); a share that grows with assembly's lag
still swung (the lag shows what was admitted seconds before); matching its throughput does not.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Protocol

from tracescorer.metrics import Metrics
from tracescorer.model import LogRecord, Span
from tracescorer.receiver import decode
from tracescorer.store.api import AppendOutcome, Intake, QueueFull, StoreClosed, StoreError

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


class TelemetryListener(Protocol):
    """Told about telemetry after it was committed, with the range of ``received_at`` it got
    (epoch seconds; called on the event loop; must not block)."""

    def on_committed(self, spans: Sequence[Span], logs: Sequence[LogRecord], received: tuple[float, float]) -> None: ...


#: Takes items out of a decoded request before it is stored (other tools' evaluations,
#: :mod:`tracescorer.calibration.intake`): returns the spans and log records left to store.
Prefilter = Callable[[Sequence[Span], Sequence[LogRecord]], Awaitable[tuple[Sequence[Span], Sequence[LogRecord]]]]
#: A downstream stage's backlog check: None while under its bound, else why not.
BacklogCheck = Callable[[], str | None]
#: A downstream stage's load as a share of its bound (0: idle, 1.0: at the bound).
Pressure = Callable[[], float]
#: A downstream stage's throughput: items (spans and log records) it takes in per second.
Throughput = Callable[[], float]
#: the load from which load is shed; the share shed grows as (load - SHED_FROM) / (1 - SHED_FROM)
SHED_FROM = 0.3
BURST_S = 0.5  # admission at a stage's throughput allows a burst of this many seconds of it

_Decoded = decode.DecodedTraces | decode.DecodedLogs
#: bodies from this size on are decoded in a worker thread, so the event loop keeps turning
#: (decoding runs at roughly 20-40 MB/s here: 256 KiB holds the loop under ~10 ms)
DECODE_INLINE_BYTES = 256 * 1024

_DECODERS: dict[tuple[Signal, Encoding], Callable[[bytes], _Decoded]] = {
    (Signal.TRACES, Encoding.PROTOBUF): decode.decode_traces_protobuf,
    (Signal.TRACES, Encoding.JSON): decode.decode_traces_json,
    (Signal.LOGS, Encoding.PROTOBUF): decode.decode_logs_protobuf,
    (Signal.LOGS, Encoding.JSON): decode.decode_logs_json,
}


def _timed(decoder: Callable[[bytes], _Decoded], body: bytes) -> tuple[_Decoded | decode.DecodeError, float]:
    """``decoder(body)`` (or the error it raised) and the CPU time the calling thread spent on it."""
    started = time.thread_time()
    result: _Decoded | decode.DecodeError
    try:
        result = decoder(body)
    except decode.DecodeError as exc:
        result = exc
    return result, time.thread_time() - started


class Ingestor:
    def __init__(
        self,
        store: Intake,
        metrics: Metrics,
        *,
        retry_after_s: int = 1,
        max_inflight_bytes: int = 64 * 1024 * 1024,
        max_requests: int = 64,
        listeners: Sequence[TelemetryListener] = (),
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._store = store
        self._clock = clock
        self._metrics = metrics
        self._retry_after_s = retry_after_s
        self._max_inflight = max_inflight_bytes
        self._inflight = 0
        self._max_requests = max_requests
        self._requests = 0  # requests seen by a receiver and not answered yet
        self._receiving = 0  # bytes reserved for bodies being received
        self._listeners = list(listeners)
        self._checks: list[tuple[str, BacklogCheck]] = []
        self._pressures: list[tuple[str, Pressure, Throughput | None]] = []
        self._saturation: list[tuple[str, BacklogCheck]] = []
        self._shed_debt = 0.0  # refusals owed by the shares so far: spreads them evenly over requests
        self._credit = 0.0  # items that may be admitted now while admission follows a throughput
        self._credit_at: float | None = None  # when _credit was last topped up (None: not following)
        self._items_per_request = 100.0  # moving average: what an admitted request is charged
        self._closing = False
        self._prefilter: Prefilter | None = None

    def set_prefilter(self, prefilter: Prefilter) -> None:
        """Run ``prefilter`` on every decoded request before its items are stored."""
        self._prefilter = prefilter

    def add_listener(self, listener: TelemetryListener) -> None:
        self._listeners.append(listener)

    def add_backlog_check(
        self, stage: str, check: BacklogCheck, pressure: Pressure | None = None, throughput: Throughput | None = None
    ) -> None:
        """Refuse new requests while ``check()`` says ``stage`` is over its bound; from
        ``pressure()`` :data:`SHED_FROM` on, admit them at ``throughput()`` (a little less as the
        pressure grows) or, without one, refuse a share of them that grows with the pressure."""
        self._checks.append((stage, check))
        if pressure is not None:
            self._pressures.append((stage, pressure, throughput))

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
        self.shed(signal)
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

    def shed(self, signal: Signal) -> None:
        """Raise :class:`IngestRefused` when this request is part of the load the most loaded
        stage sheds (once per request: :meth:`enter` calls it)."""
        if self._closing or not self._pressures:
            return
        stage, load, throughput = max(
            ((name, pressure(), taken) for name, pressure, taken in self._pressures), key=lambda p: p[1]
        )
        share = min(1.0, (load - SHED_FROM) / (1.0 - SHED_FROM))
        if share <= 0.0:
            self._shed_debt, self._credit_at = 0.0, None
            return
        if throughput is None:
            self._shed_debt += share
            if self._shed_debt >= 1.0:
                self._shed_debt -= 1.0
                raise self._refuse(
                    signal,
                    stage,
                    f"pipeline busy ({stage} at {load:.0%} of its bound: refusing {share:.0%} of new requests)",
                )
            return
        rate = throughput() * (1.0 - share / 2)  # below what it takes in: its backlog shrinks
        now = self._clock()
        top_up = rate * BURST_S if self._credit_at is None else self._credit + (now - self._credit_at) * rate
        self._credit, self._credit_at = min(top_up, rate * BURST_S), now
        if self._credit <= 0.0:
            raise self._refuse(
                signal,
                stage,
                f"pipeline busy ({stage} at {load:.0%} of its bound: admitting "
                f"{rate:.0f} items/s, about what it takes in)",
            )
        self._credit -= self._items_per_request

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
        """Admit, decode ``body`` and return once its valid items are committed; the bytes the
        request's ``ticket`` held for it are now counted as the body's."""
        if ticket is not None:
            self._receiving -= ticket.reserved
            ticket.reserved = 0
        self.admit(signal, len(body))
        if ticket is None:  # not entered: its share of shedding is taken here
            self.shed(signal)
        self._inflight += len(body)
        try:
            return await self._ingest(signal, encoding, body)
        finally:
            self._inflight -= len(body)

    async def _ingest(self, signal: Signal, encoding: Encoding, body: bytes) -> IngestOutcome:
        decoder = _DECODERS[(signal, encoding)]
        if len(body) < DECODE_INLINE_BYTES:
            decoded, cpu_s = _timed(decoder, body)
        else:  # a large body would hold the event loop (50 spans x 10k attributes: 455 ms)
            decoded, cpu_s = await asyncio.to_thread(_timed, decoder, body)
        self._metrics.stage_cpu.labels("decode").inc(cpu_s)
        if isinstance(decoded, decode.DecodeError):
            raise IngestRefused("decode_error", str(decoded), retryable=False)
        spans: Sequence[Span]
        logs: Sequence[LogRecord]
        if isinstance(decoded, decode.DecodedTraces):
            spans, logs = decoded.spans, []
        else:
            spans, logs = [], decoded.records
        self._items_per_request += 0.1 * (len(spans) + len(logs) - self._items_per_request)
        rejected, errors = decoded.rejected, list(decoded.errors)
        accepted = 0
        if self._prefilter is not None and (spans or logs):
            spans, logs = await self._filtered(signal, spans, logs)
        if spans or logs:
            outcome = await self._commit(signal, spans, logs)
            accepted = outcome.stored
            if outcome.rejected:
                rejected += outcome.rejected
                errors.append(outcome.message)
        if rejected:
            self._metrics.rejected.labels(signal.value, "invalid").inc(rejected)
        message = decode.error_summary(rejected, errors) if rejected else ""
        return IngestOutcome(accepted=accepted, rejected=rejected, message=message)

    async def _filtered(
        self, signal: Signal, spans: Sequence[Span], logs: Sequence[LogRecord]
    ) -> tuple[Sequence[Span], Sequence[LogRecord]]:
        assert self._prefilter is not None
        try:
            return await asyncio.shield(self._prefilter(spans, logs))
        except QueueFull as exc:
            self._metrics.backpressure.labels("write_queue").inc()
            raise IngestRefused("backpressure", str(exc), retryable=True, retry_after_s=self._retry_after_s) from None
        except StoreClosed as exc:
            raise IngestRefused("shutting_down", str(exc), retryable=True, retry_after_s=self._retry_after_s) from None
        except StoreError as exc:
            self._metrics.rejected.labels(signal.value, "store_error").inc(len(spans) + len(logs))
            raise IngestRefused("store_error", str(exc), retryable=True, retry_after_s=self._retry_after_s) from None

    async def _commit(self, signal: Signal, spans: Sequence[Span], logs: Sequence[LogRecord]) -> AppendOutcome:
        count = len(spans) + len(logs)
        try:
            # shield: a client that hangs up must not cancel the commit wait of others' batch
            outcome = await asyncio.shield(self._store.append(spans, logs))
        except QueueFull as exc:
            self._metrics.rejected.labels(signal.value, "backpressure").inc(count)
            self._metrics.backpressure.labels("write_queue").inc()
            raise IngestRefused("backpressure", str(exc), retryable=True, retry_after_s=self._retry_after_s) from None
        except StoreClosed as exc:
            self._metrics.rejected.labels(signal.value, "shutting_down").inc(count)
            raise IngestRefused("shutting_down", str(exc), retryable=True, retry_after_s=self._retry_after_s) from None
        except StoreError as exc:
            self._metrics.rejected.labels(signal.value, "store_error").inc(count)
            raise IngestRefused("store_error", str(exc), retryable=True, retry_after_s=self._retry_after_s) from None
        self._metrics.accepted.labels(signal.value).inc(outcome.stored)
        if outcome.stored:
            # items the store refused (rare: decode validates ranges) still reach assembly; their
            # runs are rebuilt from what was stored the next time the trace is assembled
            for listener in self._listeners:
                try:
                    listener.on_committed(spans, logs, (outcome.received_from, outcome.received_to))
                except Exception:  # a downstream stage must never fail an acknowledged request
                    log.exception("telemetry listener %r failed", listener)
        return outcome
