"""The LLM judge's one call path to the model, and :func:`preload`.

This is the only module that imports litellm. It does so lazily: ``import tracescorer`` and a
daemon without LLM scorers never pay litellm's import cost (seconds of CPU, ~190 MB). A daemon
calls :func:`preload` in a worker thread before its first judge call, so that neither the
import nor litellm's other first-use work runs on the event loop.

litellm fetches its model price map from the network at import unless
``LITELLM_LOCAL_MODEL_COST_MAP`` is set, and Anthropic's beta headers at the first Anthropic request
unless ``LITELLM_LOCAL_ANTHROPIC_BETA_HEADERS`` is: this module sets both to ``True`` (the copies
that ship with litellm) unless the user set them explicitly.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal

from tracescorer.scorers import batching, prompt_cache, reuse
from tracescorer.scorers.errors import JudgeCallError, JudgeError, JudgeOutputError, ScorerConfigError
from tracescorer.scorers.judge_config import JsonPromptInjection, Judge
from tracescorer.scorers.judge_health import FailureStreaks
from tracescorer.scorers.processors import ChatMessage, Redactor
from tracescorer.scorers.retry import is_transient
from tracescorer.scorers.structured import CompiledSchema, parse_json_text
from tracescorer.scorers.types import JudgeCall
from tracescorer.text import fix_surrogates

__all__ = ["JsonPromptInjection", "Judge", "JudgeReply", "call_judge", "preload"]

log = logging.getLogger(__name__)

COST_MAP_ENV = "LITELLM_LOCAL_MODEL_COST_MAP"
# Redacting a long prompt takes tens of milliseconds (phone matching is pure Python): past this
# many characters it runs in a worker thread instead of on the event loop.
_REDACT_IN_THREAD_CHARS = 8_000

_litellm: Any = None
_preload_lock = threading.Lock()
_preloaded = False
# per process, like the litellm import: whichever scorer calls a model, its outage is one streak
_streaks = FailureStreaks(log)


def _import_litellm() -> Any:
    global _litellm
    if _litellm is None:
        with _preload_lock:
            if _litellm is None:
                for name in (COST_MAP_ENV, "LITELLM_LOCAL_ANTHROPIC_BETA_HEADERS"):  # a user's setting wins
                    os.environ.setdefault(name, "True")
                import litellm

                from tracescorer import logs

                litellm.suppress_debug_info = True
                if logs.configured():  # the daemon: its log, not litellm's handlers (a library user's stays)
                    logs.quiet_litellm()
                _litellm = litellm
    return _litellm


def preload() -> None:
    """Do every heavy first-use step of the judge now: import litellm (with the local price
    map), import jsonschema and phonenumbers' metadata, and run one mocked completion through
    litellm so that its lazily built models and lazily imported modules are ready.

    Synchronous and safe to run in a worker thread (``await asyncio.to_thread(preload)``);
    idempotent (later calls return at once). Makes no network request: the warm-up completion
    uses litellm's ``mock_response``.
    """
    global _preloaded
    if _preloaded:
        return
    litellm = _import_litellm()
    with _preload_lock:
        if _preloaded:
            return
        import jsonschema  # noqa: F401  (dict output schemas validate with it)

        from tracescorer.scorers import pii

        pii.preload()
        asyncio.run(_warm_up(litellm))
        _preloaded = True
    log.debug("judge preloaded (litellm %s)", getattr(litellm, "__version__", "?"))


async def _warm_up(litellm: Any) -> None:
    schema = {"type": "object", "properties": {"score": {"type": "number"}}, "required": ["score"]}
    response = await litellm.acompletion(
        model="openai/tracescorer-warmup",
        api_key="warmup",
        api_base="http://127.0.0.1:9/v1",
        messages=[{"role": "system", "content": "warm up"}, {"role": "user", "content": "warm up"}],
        response_format={"type": "json_schema", "json_schema": {"name": "warmup", "schema": schema}},
        mock_response='{"score": 1}',
        num_retries=0,
        max_retries=0,
        timeout=5,
    )
    _cost_usd(litellm, response)
    # litellm queues its success logging on a worker bound to this (temporary) event loop:
    # drain and stop it here, or the daemon's loop would inherit the stale queue.
    try:
        from litellm.litellm_core_utils.logging_worker import GLOBAL_LOGGING_WORKER as worker
    except ImportError:  # another litellm layout: nothing queued to drain
        return
    await asyncio.wait_for(worker.flush(), timeout=5)
    await worker.stop()


@dataclass(frozen=True, kw_only=True, slots=True)
class JudgeReply:
    """A successful judge call: the parsed/validated ``output`` and the records of the requests
    made for it (two when the structured-output fallback ran); ``call`` is the last."""

    output: Any
    calls: tuple[JudgeCall, ...]

    @property
    def call(self) -> JudgeCall:
        return self.calls[-1]


async def _maybe_await(value: Any) -> Any:
    return await value if isinstance(value, Awaitable) else value


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""


def _sent_prompt(messages: list[ChatMessage]) -> str:
    """The prompt as sent: every non-system message's text, after the input processors."""
    return "\n\n".join(_content_text(m.get("content")) for m in messages if m.get("role") != "system")


@dataclass(frozen=True, kw_only=True, slots=True)
class _Prepared:
    messages: list[ChatMessage]
    prompt: str
    processors: tuple[str, ...]
    redactions: dict[str, int] | None


async def _prepare(judge: Judge, prompt: str) -> _Prepared:
    messages: list[ChatMessage] = []
    if judge.instructions:
        messages.append({"role": "system", "content": judge.instructions})
    messages.append({"role": "user", "content": prompt})
    redactions: dict[str, int] | None = None
    for processor in judge.input_processors:
        if isinstance(processor, Redactor):
            size = sum(len(_content_text(m.get("content"))) for m in messages)
            if size > _REDACT_IN_THREAD_CHARS:
                messages, found = await asyncio.to_thread(processor.redact_messages, messages)
            else:
                messages, found = processor.redact_messages(messages)
            redactions = dict(redactions or {})
            for kind, n in found.items():
                redactions[kind] = redactions.get(kind, 0) + n
        else:
            messages = await _maybe_await(processor.process_input(messages))
    return _Prepared(
        messages=messages,
        prompt=_sent_prompt(messages),
        processors=tuple(type(p).__name__ for p in judge.input_processors),
        redactions=redactions,
    )


def _cost_usd(litellm: Any, response: Any) -> float | None:
    # litellm prices every response with its cost functions and keeps the figure in
    # ``_hidden_params["response_cost"]`` (None when the model has no known price). Reuse it:
    # calling completion_cost() again costs ~0.2 ms, and ~0.4 ms plus an exception for unknown
    # models. Only if a litellm version stops providing it do we ask completion_cost().
    hidden = getattr(response, "_hidden_params", None)
    if isinstance(hidden, dict) and "response_cost" in hidden:
        cost = hidden["response_cost"]
    else:
        try:
            cost = litellm.completion_cost(completion_response=response)
        except Exception:  # noqa: BLE001 - unknown model or price: cost is optional information, never fatal
            return None
    return float(cost) if isinstance(cost, (int, float)) and cost > 0 else None


async def call_judge(judge: Judge, *, step: str, prompt: str, schema: CompiledSchema | None) -> JudgeReply:
    """Make one logical judge call (with processor retries) and parse its output.

    With ``schema`` the reply is parsed as JSON and validated, asked for as
    ``judge.json_prompt_injection`` says (``"auto"``: native ``response_format`` first, then
    once more with the schema in the prompt when the reply does not parse or validate);
    without, the text reply is returned. Raises :class:`JudgeCallError` /
    :class:`JudgeOutputError` carrying the :class:`JudgeCall` records of every request made.
    """
    if not judge.model:
        raise ScorerConfigError(f"step {step!r} needs a judge model (Judge(model=...))")
    litellm = _import_litellm()
    prepared = await _prepare(judge, prompt)
    if schema is None:
        return await _request(litellm, judge, step, prepared, None, "none")
    mode = judge.json_prompt_injection
    first: Literal["native", "prompt"] = "prompt" if mode is True else "native"
    try:
        return await _request(litellm, judge, step, prepared, schema, first)
    except JudgeOutputError as exc:
        if mode != "auto" or not exc.unparsed:
            raise
        log.info(
            "judge step %s: native structured output did not parse (%s); retrying with the schema in the prompt",
            step,
            exc,
        )
        failed = exc.calls
    try:
        reply = await _request(litellm, judge, step, prepared, schema, "prompt")
    except JudgeError as exc:
        exc.calls = (*failed, *exc.calls)
        raise
    return JudgeReply(output=reply.output, calls=(*failed, *reply.calls))


async def _request(
    litellm: Any,
    judge: Judge,
    step: str,
    prepared: _Prepared,
    schema: CompiledSchema | None,
    structured: Literal["native", "prompt", "none"],
) -> JudgeReply:
    """One request, to the judge's model and, after a transient failure, to each fallback in turn;
    answered by an earlier verdict instead when a :data:`~tracescorer.scorers.reuse.SESSION` has one."""
    messages = prepared.messages
    base: dict[str, Any] = {**judge.options, "num_retries": 0, "max_retries": 0}
    if schema is not None and structured == "prompt":
        messages = prompt_cache.static_first(messages, schema.prompt_instructions)
    elif schema is not None:
        base["response_format"] = schema.response_format
    session = reuse.SESSION.get()
    started = time.perf_counter()
    attempts = 0
    routes = judge.routes
    for index, (model, extra) in enumerate(routes):
        kwargs = {**base, **extra}
        # marks say what to cache, not what is judged: the reuse key below is of the unmarked messages
        sent = (
            prompt_cache.mark_static(messages)
            if prompt_cache.needs_marks(batching.provider_of(litellm, model))
            else messages
        )

        def record(model: str = model, **fields: Any) -> JudgeCall:
            return JudgeCall(
                step=step,
                model=model,
                prompt=prepared.prompt,
                attempts=attempts,  # noqa: B023 - the attempts made so far, read when the record is made
                duration_ms=(time.perf_counter() - started) * 1000.0,
                structured_output=structured,
                input_processors=prepared.processors,
                redactions=prepared.redactions,
                **fields,
            )

        key = reuse.request_key(model, messages, kwargs) if session is not None else ""
        if session is not None:
            verdict = await session.stored(key)
            if verdict is not None:
                try:
                    return await _reply(judge, schema, verdict.text, record, {"reused_from": verdict.origin})
                except JudgeOutputError:  # it no longer parses (an output processor changed): judged again
                    log.debug("judge step %s: a stored verdict did not parse; asking the model", step)
            await session.admit()
        try:
            response, made = await _attempts(litellm, judge, step, model, sent, kwargs)
        except _Failed as failed:
            attempts += failed.attempts
            exc = failed.error
            if index + 1 < len(routes) and is_transient(exc):
                log.debug(
                    "judge step %s: %s failed (%s), asking %s", step, model, type(exc).__name__, routes[index + 1][0]
                )
                continue
            call = record(status="error", error=str(exc)[:2000], error_type=type(exc).__name__)
            raise JudgeCallError(
                f"judge call for step {step!r} failed after {attempts} attempt(s): {type(exc).__name__}: {exc}",
                call=call,
            ) from exc
        attempts += made
        choice = response.choices[0]
        # lone surrogates (a model splitting an emoji's escape) cannot be stored: replaced here
        text = fix_surrogates(getattr(choice.message, "content", None) or "")
        usage = getattr(response, "usage", None)
        cached, cache_written = prompt_cache.cached_tokens(usage)
        tokens = {
            "input_tokens": getattr(usage, "prompt_tokens", None),
            "cached_tokens": cached,
            "cache_write_tokens": cache_written,
            "output_tokens": getattr(usage, "completion_tokens", None),
            "cost_usd": _cost_usd(litellm, response),
        }
        reply = await _reply(judge, schema, text, record, tokens)
        if session is not None:
            session.judged(key, model, text)
        return reply
    raise AssertionError("a judge has at least one model")  # the loop returns or raises


class _Failed(Exception):
    """Every attempt at one model failed: the last error, and how many attempts were made."""

    def __init__(self, error: BaseException, attempts: int) -> None:
        super().__init__(str(error))
        self.error = error
        self.attempts = attempts


async def _attempts(
    litellm: Any, judge: Judge, step: str, model: str, messages: list[ChatMessage], kwargs: dict[str, Any]
) -> tuple[Any, int]:
    """The model's response and the attempts it took, retried as the judge's error processors say
    (or a provider batch's answer, in batch mode: :mod:`~tracescorer.scorers.batching`); raises :class:`_Failed`."""
    if (queue := batching.BATCH.get()) is not None:
        try:
            if (answered := await queue.ask(litellm, model, messages, kwargs)) is not None:
                return answered, 1
        except Exception as exc:  # a request the batch answered with an error: its heal class decides
            raise _Failed(exc, 1) from exc
    cap = judge.retry_cap
    attempts, retries = 0, 0
    while True:
        attempts += 1
        try:
            response = await litellm.acompletion(model=model, messages=messages, **kwargs)
            break
        except Exception as exc:  # provider errors of every kind go through the error processors
            _streaks.failed(model, exc)
            decision = None
            if retries < cap:
                for err_processor in judge.error_processors:
                    decision = err_processor.process_api_error(error=exc, retry_count=retries)
                    if decision is not None:
                        break
            if decision is None:
                raise _Failed(exc, attempts) from exc
            retries += 1
            # DEBUG: in an outage this would be a line per request; the streak is logged once
            log.debug(
                "judge step %s: %s, retry %d/%d in %.2fs", step, type(exc).__name__, retries, cap, decision.delay_s
            )
            if decision.delay_s > 0:
                await asyncio.sleep(decision.delay_s)  # the provider-requested backoff
    _streaks.answered(model)
    return response, attempts


async def _reply(
    judge: Judge,
    schema: CompiledSchema | None,
    text: str,
    record: Callable[..., JudgeCall],
    fields: dict[str, Any],
) -> JudgeReply:
    """The model's ``text`` through the output processors and the schema: the reply, or a
    :class:`JudgeOutputError` carrying the call record (``fields``: tokens and cost, or reuse)."""

    def failed(exc: BaseException) -> JudgeCall:
        return record(status="error", raw_output=text, error=str(exc)[:2000], error_type=type(exc).__name__, **fields)

    try:
        for out_processor in judge.output_processors:
            text = await _maybe_await(out_processor.process_output(text))
    except Exception as exc:  # a user output processor failed: report it as a judge output error
        raise JudgeOutputError(f"output processor failed: {exc}", raw_output=text, call=failed(exc)) from exc
    output: Any = text
    if schema is not None:
        try:
            output = schema.validate(parse_json_text(text))
        except JudgeOutputError as exc:
            raise JudgeOutputError(str(exc), raw_output=text, call=failed(exc), unparsed=True) from exc
    call = record(status="ok", raw_output=text, output=_jsonable(output), **fields)
    return JudgeReply(output=output, calls=(call,))


def _jsonable(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    return dump(mode="json") if callable(dump) else value
