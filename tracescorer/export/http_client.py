"""A small JSON-over-HTTP client for the native backend sinks (aiohttp; nothing blocks the loop)."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp

from tracescorer.export.sink import ExportResult, ItemResult, http_result

log = logging.getLogger(__name__)

__all__ = ["JsonClient", "Reply"]


@dataclass(frozen=True, slots=True)
class Reply:
    """An HTTP answer (``status`` 0: no answer; ``error`` then says why)."""

    status: int
    body: str
    retry_after: str | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    def json(self) -> Any:
        try:
            return json.loads(self.body)
        except ValueError:
            return None

    def result(self) -> ItemResult:
        """SUCCESS for 2xx, else RETRY/REJECTED as :func:`~tracescorer.export.sink.http_result` says."""
        if self.ok:
            return ItemResult.ok()
        if self.status == 0:
            return ItemResult(result=ExportResult.RETRY, error=self.error)
        return http_result(self.status, self.body, self.retry_after)


class JsonClient:
    """Requests with fixed headers against one base URL; a failure is a :class:`Reply`, never raised."""

    def __init__(self, base_url: str, headers: Mapping[str, str], timeout_s: float) -> None:
        self.base_url = base_url.rstrip("/")
        self._headers = {"Accept": "application/json", **headers}
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)
        self._session: aiohttp.ClientSession | None = None

    async def request(self, method: str, path: str, body: Any = None, params: Mapping[str, str] | None = None) -> Reply:
        if self._session is None:
            self._session = aiohttp.ClientSession(headers=self._headers, timeout=self._timeout)
        url = self.base_url + path
        try:
            async with self._session.request(method, url, json=body, params=params) as resp:
                text = await resp.text(errors="replace")
                return Reply(resp.status, text, resp.headers.get("Retry-After"))
        except Exception as exc:  # unreachable, timeout, reset: the request is retried
            log.debug("%s %s failed", method, url, exc_info=True)
            return Reply(0, "", error=f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
