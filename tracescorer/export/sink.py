"""The export plug-in point: a sink delivers score versions to one backend.

Modelled on OpenTelemetry's ``SpanExporter`` (``export(batch) -> result``, ``force_flush``,
``shutdown``), with one result per score because backends accept or refuse scores one by one
(a Phoenix annotation for a span it does not know, an MLflow assessment that exists already).
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from tracescorer.httpretry import is_retryable_status, parse_retry_after
from tracescorer.records.deliveries import DueScore

__all__ = ["ExportResult", "ItemResult", "ScoreExporter", "http_result", "is_retryable_status"]


class ExportResult(enum.Enum):
    """How the backend answered for one score."""

    SUCCESS = "success"
    RETRY = "retry"  # transient (unreachable, timeout, 408, 425, 429, 5xx): try again after a backoff
    REJECTED = "rejected"  # permanent (other 4xx, bad request): tried a bounded number of times


@dataclass(frozen=True, slots=True, kw_only=True)
class ItemResult:
    """The answer for one score: a result, the backend's error text, and its Retry-After if any."""

    result: ExportResult
    error: str | None = None
    retry_after_s: float | None = None

    @staticmethod
    def ok() -> ItemResult:
        return _OK


_OK = ItemResult(result=ExportResult.SUCCESS)


class ScoreExporter(Protocol):
    """One export sink: the destination of exported scores (OTLP spans, OTLP logs, Phoenix, MLflow, ...),
    named like OpenTelemetry's ``SpanExporter`` (not the scorer library's :class:`~tracescorer.scorers.registry.ScoreSink`).

    Called on the daemon's event loop, one ``export`` at a time per sink; an implementation does
    its I/O asynchronously (or in a worker thread) and never blocks the loop. ``export`` returns
    one :class:`ItemResult` per score, in order, and never raises: failures are results. The
    same score version may be sent again after a crash or a lost reply, so a backend write must be
    idempotent per (score id, version) and a newer version must replace an older one in place.
    """

    @property
    def kind(self) -> str:
        """The sink kind as written in the config: ``otlp``, ``otlp_logs``, ``phoenix``, ``mlflow``."""
        ...

    async def export(self, batch: Sequence[DueScore]) -> Sequence[ItemResult]: ...

    async def force_flush(self, timeout_s: float) -> bool: ...

    async def shutdown(self) -> None: ...


def http_result(status: int, body: str, retry_after: str | None = None) -> ItemResult:
    """The :class:`ItemResult` for a non-2xx HTTP reply (``body`` is kept, cut to 500 chars)."""
    error = f"HTTP {status}: {body.strip()[:500]}" if body.strip() else f"HTTP {status}"
    if not is_retryable_status(status):
        return ItemResult(result=ExportResult.REJECTED, error=error)
    return ItemResult(result=ExportResult.RETRY, error=error, retry_after_s=parse_retry_after(retry_after))
