"""Sending notifications: HTTP POST with a timeout and retries, one ordered queue per monitor.

A failed attempt (connection error, timeout, HTTP 408/425/429/5xx) is retried ``retries`` times
with a doubling backoff (``Retry-After`` is honoured up to :data:`MAX_BACKOFF_S`); other HTTP
errors are final. Redirects are not followed. Every target of a notification is tried
concurrently; a monitor's notifications go out in the order they were decided, and a slow
endpoint of one monitor never delays another's.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import aiohttp

from tracescorer.aio import cancel
from tracescorer.config.monitors import NotifySettings
from tracescorer.httpretry import is_retryable_status, parse_retry_after
from tracescorer.monitors.messages import Notification, encode

log = logging.getLogger(__name__)

MAX_BACKOFF_S = 60.0
MAX_QUEUED_PER_MONITOR = 100
_USER_AGENT = "tracescorer-monitors/1"


@dataclass(frozen=True, slots=True, kw_only=True)
class Delivery:
    """The outcome of sending one notification to one target."""

    target: NotifySettings
    ok: bool
    attempts: int
    status: int | None = None
    error: str | None = None


async def deliver(session: aiohttp.ClientSession, target: NotifySettings, body: bytes) -> Delivery:
    """POST ``body`` to ``target`` until it succeeds or the retries are spent (never raises)."""
    headers = {"Content-Type": "application/json", "User-Agent": _USER_AGENT, **target.headers}
    timeout = aiohttp.ClientTimeout(total=target.timeout_s)
    error, status = "not attempted", None
    attempts = 0
    for attempt in range(target.retries + 1):
        attempts = attempt + 1
        wait: float | None = None
        try:
            async with session.post(
                target.url, data=body, headers=headers, timeout=timeout, allow_redirects=False
            ) as resp:
                status = resp.status
                await resp.content.read(65536)  # drain a little so the connection can be reused
                if 200 <= status < 300:
                    return Delivery(target=target, ok=True, attempts=attempts, status=status)
                error = f"HTTP {status}" + (" (redirects are not followed)" if 300 <= status < 400 else "")
                retryable = is_retryable_status(status)
                wait = parse_retry_after(resp.headers.get("Retry-After")) if status in (429, 503) else None
        except TimeoutError:
            error, status, retryable = f"timed out after {target.timeout_s:g}s", None, True
        except aiohttp.ClientError as exc:
            error, status, retryable = f"{type(exc).__name__}: {exc}", None, True
        if not retryable or attempt == target.retries:
            break
        backoff = target.retry_initial_s * (2**attempt)
        await asyncio.sleep(min(MAX_BACKOFF_S, wait if wait is not None else backoff))
    return Delivery(target=target, ok=False, attempts=attempts, status=status, error=error)


DoneCallback = Callable[[Notification, Sequence[Delivery]], None]


class Dispatcher:
    """Queues notifications per monitor and sends them in the background (on the event loop).

    ``on_done(notification, deliveries)`` is called on the loop once every target was tried.
    """

    def __init__(self, on_done: DoneCallback, *, max_queued: int = MAX_QUEUED_PER_MONITOR) -> None:
        self._on_done = on_done
        self._max_queued = max_queued
        self._queues: dict[str, asyncio.Queue[tuple[Notification, tuple[NotifySettings, ...]]]] = {}
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._session: aiohttp.ClientSession | None = None
        self._accepting = False
        self._outstanding = 0  # queued or being sent

    async def start(self) -> None:
        self._session = aiohttp.ClientSession()
        self._accepting = True

    def submit(self, notification: Notification, targets: Sequence[NotifySettings]) -> bool:
        """Queue ``notification`` for ``targets``; False when shut down or the monitor's queue is full."""
        if not self._accepting or not targets:
            return False
        queue = self._queues.get(notification.monitor_id)
        if queue is None:
            queue = self._queues[notification.monitor_id] = asyncio.Queue(self._max_queued)
            self._tasks[notification.monitor_id] = asyncio.create_task(
                self._worker(queue), name=f"monitor-notify-{notification.monitor_id}"
            )
        try:
            queue.put_nowait((notification, tuple(targets)))
        except asyncio.QueueFull:
            return False
        self._outstanding += 1
        return True

    async def _worker(self, queue: asyncio.Queue[tuple[Notification, tuple[NotifySettings, ...]]]) -> None:
        while True:
            notification, targets = await queue.get()
            try:
                body = {kind: encode(kind, notification) for kind in {t.kind for t in targets}}
                assert self._session is not None
                deliveries = await asyncio.gather(*(deliver(self._session, t, body[t.kind]) for t in targets))
                self._on_done(notification, deliveries)
            except Exception:  # one bad notification must not stop the monitor's later ones
                log.exception("the notification of monitor %s failed", notification.monitor_id)
            finally:
                self._outstanding -= 1
                queue.task_done()

    @property
    def outstanding(self) -> int:
        return self._outstanding

    async def shutdown(self, timeout_s: float) -> int:
        """Stop intake, send what is queued until the deadline, then stop; returns how many
        notifications were abandoned (their monitors keep them pending for the next start)."""
        self._accepting = False
        deadline = time.monotonic() + timeout_s
        for queue in self._queues.values():
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(queue.join(), max(0.0, deadline - time.monotonic()))
        abandoned = self._outstanding
        await cancel(self._tasks.values())
        if self._session is not None:
            await self._session.close()
            self._session = None
        return abandoned
