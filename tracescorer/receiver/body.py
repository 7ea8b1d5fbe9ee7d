"""Reading an HTTP request body as it arrives: a deadline that grows with the bytes received,
a size limit, and each chunk announced before it is kept (so it can be reserved or refused)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

from aiohttp import StreamReader
from aiohttp.http_exceptions import HttpProcessingError
from aiohttp.web_protocol import RequestPayloadError


@dataclass(frozen=True, kw_only=True, slots=True)
class BodyLimits:
    """``receiver.max_message_bytes``, ``body_timeout_s`` and ``min_body_bytes_per_s``."""

    max_bytes: int
    timeout_s: float = 10.0
    min_bytes_per_s: int = 1024

    def deadline_s(self, received: int) -> float:
        """Seconds from the body's start by which it must have ended, ``received`` bytes in."""
        return self.timeout_s + received / self.min_bytes_per_s


class BodyTooSlow(Exception):
    """The body did not arrive by its deadline (``received`` bytes in ``elapsed_s``)."""

    def __init__(self, received: int, elapsed_s: float) -> None:
        super().__init__(f"request body too slow: {received} bytes in {elapsed_s:.1f}s")
        self.received = received
        self.elapsed_s = elapsed_s


class BodyTooLarge(Exception):
    """The body grew past ``max_bytes``."""


class BodyMalformed(Exception):
    """The body's framing is broken (bad chunked encoding, say)."""


class ClientGone(Exception):
    """The client hung up before its body was read."""


async def read_body(stream: StreamReader, limits: BodyLimits, on_chunk: Callable[[int], None]) -> bytes:
    """The whole body; ``on_chunk(n)`` is called before ``n`` more bytes are kept (and once with
    0 for an empty body) and may raise to refuse them. Raises :class:`BodyTooSlow`,
    :class:`BodyTooLarge`, :class:`BodyMalformed` or :class:`ClientGone`."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    chunks: list[bytes] = []
    received = 0
    while True:
        try:
            async with asyncio.timeout_at(started + limits.deadline_s(received)):
                chunk = await stream.readany()
        except TimeoutError:
            raise BodyTooSlow(received, loop.time() - started) from None
        except ConnectionError:
            raise ClientGone() from None
        except (RequestPayloadError, HttpProcessingError) as exc:
            # the client closed before sending what its Content-Length announced
            if stream.is_eof() and "length" in str(exc).lower():
                raise ClientGone() from None
            raise BodyMalformed(str(exc)) from None
        if not chunk:
            if not chunks:
                on_chunk(0)
            return b"".join(chunks)
        received += len(chunk)
        if received > limits.max_bytes:
            raise BodyTooLarge()
        on_chunk(len(chunk))
        chunks.append(chunk)
