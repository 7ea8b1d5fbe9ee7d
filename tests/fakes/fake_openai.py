"""A fake OpenAI-compatible chat completions server for tests and benchmarks.

It is a real HTTP server (aiohttp, its own event loop in a background thread) bound to
``127.0.0.1`` on port 0, so clients such as litellm talk to it over real sockets. Replies are
scripted with :meth:`FakeOpenAI.script`: a rule matches when its key occurs in the request's
prompt text (every message's content joined), and hands out its replies in order, the last
one repeating; the Batch API answers a batch's lines the same way (:mod:`fakes.openai_batches`).
Every request is recorded (:attr:`FakeOpenAI.requests`) and counted.

Example::

    with FakeOpenAI() as server:
        server.script("grade this", [Reply.rate_limited(retry_after_s=0), Reply.json({"score": 1})])
        ...  # call litellm with api_base=server.base_url
        assert server.attempts("grade this") == 2
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from .openai_batches import FakeBatches
from .prompt_cache import AutomaticCache

__all__ = ["FakeOpenAI", "RecordedRequest", "Reply"]

Matcher = str | Callable[["RecordedRequest"], bool]


@dataclass(frozen=True, kw_only=True)
class Reply:
    """One scripted response.

    ``kind`` is ``json`` (a JSON value as the assistant content), ``text`` (raw assistant
    text), ``error`` (an HTTP error with an OpenAI error body), ``malformed`` (HTTP 200 whose
    body is not JSON), ``disconnect`` (the connection is dropped) or ``hang`` (never answers
    until the server stops).
    """

    kind: str
    value: Any = None
    status: int = 200
    headers: Mapping[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    fenced: bool | None = None
    usage: Mapping[str, int] | None = None

    @staticmethod
    def json(
        value: Any, *, delay_s: float = 0.0, fenced: bool | None = None, usage: Mapping[str, int] | None = None
    ) -> Reply:
        """Reply with ``value`` as JSON content.

        Like a real model: bare JSON when the request asks for ``response_format``, else (by
        default) JSON in a ```json fence after a line of prose. ``fenced=True/False`` forces
        either form.
        """
        return Reply(kind="json", value=value, delay_s=delay_s, fenced=fenced, usage=usage)

    @staticmethod
    def text(value: str, *, delay_s: float = 0.0, usage: Mapping[str, int] | None = None) -> Reply:
        """Reply with ``value`` as the assistant's text content, verbatim."""
        return Reply(kind="text", value=value, delay_s=delay_s, usage=usage)

    @staticmethod
    def error(
        status: int,
        message: str,
        *,
        type: str = "api_error",
        code: str | None = None,
        headers: Mapping[str, str] | None = None,
        delay_s: float = 0.0,
    ) -> Reply:
        """An HTTP error with the OpenAI body ``{"error": {"message", "type", "code"}}``."""
        return Reply(
            kind="error",
            status=status,
            headers=dict(headers or {}),
            delay_s=delay_s,
            value={"message": message, "type": type, "code": code},
        )

    @staticmethod
    def rate_limited(*, retry_after_s: float | str | None = None, retry_after_ms: float | None = None) -> Reply:
        """HTTP 429, optionally with ``Retry-After`` (seconds or HTTP date) and ``retry-after-ms``."""
        headers: dict[str, str] = {}
        if retry_after_s is not None:
            headers["Retry-After"] = str(retry_after_s)
        if retry_after_ms is not None:
            headers["retry-after-ms"] = str(retry_after_ms)
        return Reply.error(
            429, "Rate limit reached for requests", type="requests", code="rate_limit_exceeded", headers=headers
        )

    @staticmethod
    def server_error(status: int = 500) -> Reply:
        """HTTP 500 (or 502/503/...) with a server error body."""
        return Reply.error(status, "The server had an error while processing your request.", type="server_error")

    @staticmethod
    def unauthorized() -> Reply:
        """HTTP 401 invalid API key."""
        return Reply.error(
            401, "Incorrect API key provided: sk-bad.", type="invalid_request_error", code="invalid_api_key"
        )

    @staticmethod
    def context_length() -> Reply:
        """HTTP 400 context length exceeded (litellm maps it to ContextWindowExceededError)."""
        return Reply.error(
            400,
            "This model's maximum context length is 8192 tokens. However, your messages resulted "
            "in 9000 tokens. Please reduce the length of the messages.",
            type="invalid_request_error",
            code="context_length_exceeded",
        )

    @staticmethod
    def malformed() -> Reply:
        """HTTP 200 whose body is not valid JSON."""
        return Reply(kind="malformed")

    @staticmethod
    def disconnect() -> Reply:
        """Close the connection without answering (a connection reset for the client)."""
        return Reply(kind="disconnect")

    @staticmethod
    def hang() -> Reply:
        """Never answer (until the server stops): for client timeouts."""
        return Reply(kind="hang")


@dataclass(frozen=True, kw_only=True)
class RecordedRequest:
    """One request the server received."""

    path: str
    headers: Mapping[str, str]
    body: Mapping[str, Any]
    received_at: float

    @property
    def messages(self) -> list[dict[str, Any]]:
        msgs = self.body.get("messages")
        return list(msgs) if isinstance(msgs, list) else []

    @property
    def prompt_text(self) -> str:
        """Every message's text content (after an Anthropic request's ``system``), joined by newlines."""
        system = self.body.get("system")
        head = [_content_text(system)] if system else []
        return "\n".join([*head, *(_content_text(m.get("content")) for m in self.messages)])

    @property
    def key(self) -> str:
        """A stable hash of the messages: the same logical request retried has the same key."""
        blob = json.dumps(self.messages, sort_keys=True, default=str).encode()
        return hashlib.sha256(blob).hexdigest()[:16]

    @property
    def response_format(self) -> Any:
        return self.body.get("response_format")


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


class _Rule:
    def __init__(self, match: Matcher, replies: Sequence[Reply]) -> None:
        if not replies:
            raise ValueError("a rule needs at least one reply")
        self.match = match
        self.replies = list(replies)
        self.served = 0

    def matches(self, request: RecordedRequest) -> bool:
        if isinstance(self.match, str):
            return self.match in request.prompt_text
        return self.match(request)

    def next_reply(self) -> Reply:
        reply = self.replies[min(self.served, len(self.replies) - 1)]
        self.served += 1
        return reply


class FakeOpenAI:
    """A scriptable OpenAI-compatible server on ``127.0.0.1:0`` in a background thread.

    Use as a context manager or call :meth:`start` / :meth:`stop`. :attr:`base_url` ends in
    ``/v1``; ``POST {base_url}/chat/completions`` and ``POST /chat/completions`` are served; a request with
    ``stream: true`` gets the same reply as server-sent chunks.
    Rules are checked newest first; with no matching rule :attr:`default` is used.
    With ``prompt_cache=True`` the usage reports ``prompt_tokens_details.cached_tokens`` as
    OpenAI's automatic prompt caching would (:class:`~tests.fakes.prompt_cache.AutomaticCache`).
    Thread-safe: scripting and inspection may happen from the test thread at any time.
    """

    PATHS: tuple[str, ...] = ("/v1/chat/completions", "/chat/completions")

    def __init__(self, *, default: Reply | None = None, model: str = "fake-judge", prompt_cache: bool = False) -> None:
        self.default = default or Reply.json({"score": 1})
        self.model = model
        self.prompt_cache = AutomaticCache() if prompt_cache else None
        self.batches = FakeBatches(self)  # the Batch API: /v1/files, /v1/batches
        self._rules: list[_Rule] = []
        self._requests: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        self._port = 0
        self._stopping: asyncio.Event | None = None

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self, timeout_s: float = 10.0) -> FakeOpenAI:
        """Start serving; returns once the port is bound (or raises after ``timeout_s``)."""
        ready = threading.Event()
        errors: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            asyncio.set_event_loop(loop)
            self._loop = loop
            try:
                loop.run_until_complete(self._serve_start())
            except BaseException as exc:  # reported to the starting thread
                errors.append(exc)
                ready.set()
                return
            ready.set()
            loop.run_forever()
            loop.run_until_complete(self._serve_stop())
            # Cancel whatever is still running (slow replies) before closing the loop.
            pending = asyncio.all_tasks(loop)
            for task in pending:
                task.cancel()
            if pending:
                loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            loop.close()

        self._thread = threading.Thread(target=run, name="fake-openai", daemon=True)
        self._thread.start()
        if not ready.wait(timeout_s):
            raise TimeoutError("fake OpenAI server did not start in time")
        if errors:
            raise errors[0]
        return self

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop serving; hanging requests are released. Idempotent."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        loop.call_soon_threadsafe(self._release_and_stop)
        thread.join(timeout_s)
        self._loop = None
        self._thread = None

    def __enter__(self) -> FakeOpenAI:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:{port}/v1``."""
        return f"http://127.0.0.1:{self._port}/v1"

    # -- scripting ---------------------------------------------------------------------------
    def script(self, match: Matcher, replies: Reply | Sequence[Reply]) -> None:
        """Answer requests whose prompt contains ``match`` (or for which it returns True).

        ``replies`` are served in order; the last one repeats. Newer rules win.
        """
        seq = [replies] if isinstance(replies, Reply) else list(replies)
        with self._lock:
            self._rules.insert(0, _Rule(match, seq))

    def reset(self) -> None:
        """Forget every rule and recorded request."""
        with self._lock:
            self._rules.clear()
            self._requests.clear()

    # -- inspection --------------------------------------------------------------------------
    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received so far, in arrival order."""
        with self._lock:
            return list(self._requests)

    def attempts(self, match: Matcher | None = None) -> int:
        """How many requests arrived (whose prompt contains ``match``, when given)."""
        reqs = self.requests
        if match is None:
            return len(reqs)
        if isinstance(match, str):
            return sum(1 for r in reqs if match in r.prompt_text)
        return sum(1 for r in reqs if match(r))

    def attempts_by_request(self) -> dict[str, int]:
        """Attempt counts per logical request (same messages = same request, see ``key``)."""
        counts: dict[str, int] = {}
        for r in self.requests:
            counts[r.key] = counts.get(r.key, 0) + 1
        return counts

    def wait_for_requests(self, count: int, timeout_s: float = 5.0) -> None:
        """Block until at least ``count`` requests arrived, or raise TimeoutError."""
        deadline = time.monotonic() + timeout_s
        while len(self.requests) < count:
            if time.monotonic() > deadline:
                raise TimeoutError(f"only {len(self.requests)} of {count} requests arrived")
            time.sleep(0.005)

    # -- server internals --------------------------------------------------------------------
    async def _serve_start(self) -> None:
        self._stopping = asyncio.Event()
        app = web.Application(client_max_size=64 * 1024 * 1024)
        for path in self.PATHS:
            app.router.add_post(path, self._handle)
        self.batches.routes(app)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self._port = int(self._runner.addresses[0][1])

    async def _serve_stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    def _release_and_stop(self) -> None:
        if self._stopping is not None:
            self._stopping.set()
        assert self._loop is not None  # test helper
        # one more turn of the loop lets released handlers answer before it stops
        self._loop.call_soon(self._loop.stop)

    def _pick(self, request: RecordedRequest) -> Reply:
        with self._lock:
            self._requests.append(request)
            for rule in self._rules:
                if rule.matches(request):
                    return rule.next_reply()
        return self.default

    async def _handle(self, http_request: web.Request) -> web.StreamResponse:
        raw = await http_request.read()
        try:
            body = json.loads(raw)
        except ValueError:
            body = {}
        recorded = RecordedRequest(
            path=http_request.path,
            headers=dict(http_request.headers),
            body=body if isinstance(body, dict) else {},
            received_at=time.monotonic(),
        )
        reply = self._pick(recorded)
        if reply.kind == "hang":
            assert self._stopping is not None  # test helper
            await self._stopping.wait()
            return web.Response(status=503)
        if reply.delay_s > 0:  # simulated provider latency, cut short when the server stops
            assert self._stopping is not None  # test helper
            try:
                await asyncio.wait_for(self._stopping.wait(), timeout=reply.delay_s)
                return web.Response(status=503)
            except TimeoutError:
                pass
        if reply.kind == "disconnect":
            if http_request.transport is not None:
                http_request.transport.abort()
            raise ConnectionResetError("fake server dropped the connection")
        if reply.kind == "error":
            return web.json_response({"error": reply.value}, status=reply.status, headers=dict(reply.headers))
        if reply.kind == "malformed":
            return web.Response(status=200, body=b'{"id": "chatcmpl-x", "choices": [', content_type="application/json")
        completion = self._completion(recorded, reply)
        if recorded.body.get("stream"):
            return await self._stream(http_request, recorded, completion)
        return web.json_response(completion)

    async def _stream(
        self, http_request: web.Request, request: RecordedRequest, completion: dict[str, Any]
    ) -> web.StreamResponse:
        """The completion as server-sent ``chat.completion.chunk`` events (``stream: true``)."""
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(http_request)
        for chunk in stream_chunks(
            completion, include_usage=bool((request.body.get("stream_options") or {}).get("include_usage"))
        ):
            await response.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response

    def _completion(self, request: RecordedRequest, reply: Reply) -> dict[str, Any]:
        """The chat.completion body for a 200 reply; subclasses override it to add reply kinds
        (``tests/fakes/agent_openai.py`` does)."""
        if reply.kind == "json":
            content = json.dumps(reply.value)
            fenced = (request.response_format is None) if reply.fenced is None else reply.fenced
            if fenced:
                content = f"Here is my verdict:\n```json\n{content}\n```"
        else:
            content = str(reply.value)
        prompt_tokens = max(1, len(request.prompt_text) // 4)
        completion_tokens = max(1, len(content) // 4)
        usage = (
            dict(reply.usage)
            if reply.usage
            else {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens}
        )
        usage.setdefault("total_tokens", usage.get("prompt_tokens", 0) + usage.get("completion_tokens", 0))
        if self.prompt_cache is not None and not reply.usage:
            usage["prompt_tokens_details"] = {"cached_tokens": self.prompt_cache.cached(request.prompt_text)}
        return {
            "id": f"chatcmpl-{len(self._requests)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": str(request.body.get("model") or self.model),
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}],
            "usage": usage,
        }


def stream_chunks(completion: Mapping[str, Any], *, include_usage: bool) -> list[dict[str, Any]]:
    """A ``chat.completion`` body as the chunks an OpenAI stream sends: the role, the text,
    one chunk per tool call, the finish reason, then (when asked for) the usage."""
    base = {
        "id": completion["id"],
        "object": "chat.completion.chunk",
        "created": completion["created"],
        "model": completion["model"],
    }
    choice = completion["choices"][0]
    message = choice["message"]

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    out = [chunk({"role": "assistant", "content": ""})]
    if message.get("content"):
        out.append(chunk({"content": message["content"]}))
    for i, call in enumerate(message.get("tool_calls") or ()):
        out.append(
            chunk(
                {"tool_calls": [{"index": i, "id": call["id"], "type": "function", "function": dict(call["function"])}]}
            )
        )
    out.append(chunk({}, choice.get("finish_reason") or "stop"))
    if include_usage:
        out.append({**base, "choices": [], "usage": completion.get("usage")})
    return out


@contextmanager
def fake_openai(**kwargs: Any) -> Iterator[FakeOpenAI]:
    """``with fake_openai() as server:`` convenience wrapper."""
    server = FakeOpenAI(**kwargs).start()
    try:
        yield server
    finally:
        server.stop()
