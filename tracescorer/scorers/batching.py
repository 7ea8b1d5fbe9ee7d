"""Judge requests answered in provider batches: the :data:`BATCH` queue a caller sets, and the
OpenAI Batch API through litellm's batch and file functions.

A caller running a scorer in batch mode (the daemon's runner, :mod:`tracescorer.runner.batches`)
sets a :class:`BatchQueue` in :data:`BATCH` around the run; the judge then hands each request to
:meth:`BatchQueue.ask` instead of calling the model, and goes on exactly as with a live reply.
The functions below are what such a queue needs of a provider: one JSONL line per request
(its ``custom_id`` the request's key), submit (``/v1/files`` upload, ``/v1/batches`` create with
our id in the metadata), find a batch by that id (after a crash between the provider's accepting
it and our recording it), poll, cancel, and a result line turned into litellm's response priced at
the provider's batch rate (litellm's ``batch_cost_calculator``: half the live price for OpenAI).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Protocol

from tracescorer.scorers.judge_config import CONNECTION_OPTIONS
from tracescorer.scorers.processors import ChatMessage

__all__ = ["BATCH", "BatchQueue", "BatchRequestError", "Polled"]

#: litellm's providers whose batches this module submits (Anthropic's Message Batches: not yet)
PROVIDERS = frozenset({"openai"})
METADATA_KEY = "tracescorer_batch"
SHARED = "tracescorer_shared"  # marks a result line another request of the same key was billed for
ENDPOINT = "/v1/chat/completions"
_NOT_SENT = CONNECTION_OPTIONS | {"num_retries", "max_retries"}
_CONNECTION = ("api_base", "api_key", "timeout")
_LIST_LIMIT = 100


class BatchQueue(Protocol):
    """Where batch-mode judge requests go (called on the event loop)."""

    async def ask(self, litellm: Any, model: str, messages: list[ChatMessage], options: dict[str, Any]) -> Any | None:
        """litellm's (``litellm``: the module) response to the request, answered in a provider batch; None when it is to be
        sent live (a provider without batches here, or ``max_wait_s`` passed). Raises
        :class:`BatchRequestError` when the batch answered it with an error."""


BATCH: ContextVar[BatchQueue | None] = ContextVar("tracescorer_judge_batch", default=None)


class BatchRequestError(Exception):
    """A request a provider batch answered with an error (``status_code`` as a live call's would
    be: the heal classes tell transient from permanent by it)."""

    def __init__(self, message: str, status_code: int | None) -> None:
        super().__init__(message)
        self.status_code = status_code


@dataclass(frozen=True, kw_only=True, slots=True)
class Polled:
    """A batch's state: ``done`` once the provider will not change it; then ``lines`` are its
    output and error lines by ``custom_id`` (a request left out was not answered)."""

    status: str
    done: bool
    lines: Mapping[str, Mapping[str, Any]]


@functools.lru_cache(maxsize=256)
def provider_of(litellm: Any, model: str) -> str | None:
    """litellm's provider of ``model`` (``anthropic``, ``openai``...), None when it knows none."""
    try:
        return str(litellm.get_llm_provider(model)[1])
    except Exception:  # noqa: BLE001 - a model litellm cannot place: the request (sent live) reports the error
        return None


def connection(options: Mapping[str, Any]) -> dict[str, Any]:
    """The options that say where and how to connect (the same for every request of a batch)."""
    return {k: options[k] for k in _CONNECTION if options.get(k) is not None}


def request_line(
    litellm: Any, custom_id: str, model: str, messages: Sequence[ChatMessage], options: Mapping[str, Any]
) -> dict[str, Any]:
    """The batch input line of one chat completion request."""
    body = {"model": litellm.get_llm_provider(model)[0], "messages": list(messages)}
    body.update({k: v for k, v in options.items() if k not in _NOT_SENT})
    return {"custom_id": custom_id, "method": "POST", "url": ENDPOINT, "body": body}


async def submit(litellm: Any, batch_id: str, lines: Sequence[Mapping[str, Any]], conn: Mapping[str, Any]) -> str:
    """Upload ``lines`` and create a batch of them named ``batch_id`` in its metadata; the provider's id."""
    data = "".join(json.dumps(line, separators=(",", ":")) + "\n" for line in lines).encode()
    uploaded = await litellm.acreate_file(
        file=(f"{batch_id}.jsonl", data, "application/jsonl"), purpose="batch", custom_llm_provider="openai", **conn
    )
    created = await litellm.acreate_batch(
        completion_window="24h",
        endpoint=ENDPOINT,
        input_file_id=uploaded.id,
        custom_llm_provider="openai",
        metadata={METADATA_KEY: batch_id},
        **conn,
    )
    return str(created.id)


async def find(litellm: Any, batch_id: str, conn: Mapping[str, Any]) -> str | None:
    """The provider's id of the batch named ``batch_id`` in its metadata among the newest ones, or None."""
    listed = await litellm.alist_batches(custom_llm_provider="openai", limit=_LIST_LIMIT, **conn)
    for batch in getattr(listed, "data", None) or []:
        if (getattr(batch, "metadata", None) or {}).get(METADATA_KEY) == batch_id:
            return str(batch.id)
    return None


async def poll(litellm: Any, provider_id: str, conn: Mapping[str, Any]) -> Polled:
    """The batch's status, with its output and error lines once it is done."""
    batch = await litellm.aretrieve_batch(batch_id=provider_id, custom_llm_provider="openai", **conn)
    status = str(batch.status)
    if status not in ("completed", "failed", "expired", "cancelled"):
        return Polled(status=status, done=False, lines={})
    lines: dict[str, Mapping[str, Any]] = {}
    for file_id in (batch.error_file_id, batch.output_file_id):  # an output line wins over an error line
        if file_id:
            content = await litellm.afile_content(file_id=file_id, custom_llm_provider="openai", **conn)
            for raw in content.text.splitlines():
                if raw.strip():
                    line = json.loads(raw)
                    lines[str(line.get("custom_id"))] = line
    return Polled(status=status, done=True, lines=lines)


async def cancel(litellm: Any, provider_id: str, conn: Mapping[str, Any]) -> None:
    await litellm.acancel_batch(batch_id=provider_id, custom_llm_provider="openai", **conn)


def response_of(litellm: Any, model: str, line: Mapping[str, Any]) -> Any:
    """litellm's response for a result line, its cost the batch price; raises :class:`BatchRequestError`."""
    response = line.get("response") or {}
    status = response.get("status_code")
    body = response.get("body")
    if line.get("error") or status != 200 or not isinstance(body, dict):
        error = line.get("error") or (body or {}).get("error") or {}
        message = error.get("message") if isinstance(error, dict) else str(error)
        raise BatchRequestError(f"batch request failed ({status}): {message or 'no response'}", status)
    reply = litellm.ModelResponse(**body)
    if line.get(SHARED):
        reply._hidden_params["response_cost"] = 0.0
        return reply
    try:
        prompt, completion = litellm.cost_calculator.batch_cost_calculator(usage=reply.usage, model=model)
        cost: float | None = prompt + completion
    except Exception:  # noqa: BLE001 - an unknown price: cost is optional information
        cost = None
    reply._hidden_params["response_cost"] = cost
    return reply
