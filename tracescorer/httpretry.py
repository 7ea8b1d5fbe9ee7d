"""When an HTTP request is worth sending again, and how long the server asks us to wait.

Shared by the export sinks and the monitors' webhooks.
"""

from __future__ import annotations

from datetime import UTC, datetime
from email.utils import parsedate_to_datetime


def is_retryable_status(status: int) -> bool:
    """HTTP statuses worth retrying: 408, 425, 429 and every 5xx; other 4xx are the request's fault."""
    return status in (408, 425, 429) or status >= 500


def parse_retry_after(value: str | None) -> float | None:
    """``Retry-After`` in seconds (delta-seconds or an HTTP date), None when absent or unreadable."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())
