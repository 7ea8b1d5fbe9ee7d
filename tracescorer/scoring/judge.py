"""The LLM judge: its configuration (:class:`Judge`) and the one call path to the model.

This is the only module that imports litellm, and it does so lazily, on the first judge call,
so ``import tracescorer`` and a daemon without LLM scorers never pay litellm's import cost
(about 3 s and 190 MB).
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from tracescorer.scoring.errors import JudgeCallError, JudgeError, JudgeOutputError, ScorerConfigError
from tracescorer.scoring.processors import ChatMessage, InputProcessor, OutputProcessor
from tracescorer.scoring.retry import DEFAULT_MAX_PROCESSOR_RETRIES, ErrorProcessor
from tracescorer.scoring.structured import CompiledSchema, parse_json_text
from tracescorer.scoring.types import JudgeCall

log = logging.getLogger(__name__)

_FIELDS = ("model", "instructions", "json_prompt_injection", "input_processors",
           "output_processors", "error_processors", "max_processor_retries")
_FORBIDDEN_OPTIONS = ("num_retries", "max_retries")
_RESERVED_OPTIONS = ("messages", "response_format", "stream")
class _Unset:
    def __repr__(self) -> str:
        return "<inherited>"


_UNSET: Any = _Unset()


class Judge:
    """Configuration of an LLM judge (immutable).

    Args:
        model: a litellm model string (``openai/gpt-4o-mini``, ``anthropic/claude-haiku-4-5``,
            ``ollama/llama3``...).
        instructions: the system prompt.
        json_prompt_injection: put the output schema in the prompt and parse the reply, instead
            of the provider's native ``response_format``.
        input_processors / output_processors: see :mod:`tracescorer.scoring.processors`.
        error_processors: e.g. :class:`~tracescorer.scoring.retry.StreamErrorRetryProcessor`.
        max_processor_retries: cap on retries per judge call across all error processors
            (10 when error processors are set and this is not).
        **options: passed to ``litellm.acompletion`` (``api_base``, ``api_key``, ``timeout``,
            ``temperature``, ``max_tokens``...). litellm's own retries are always off, so
            ``num_retries``/``max_retries`` are refused: use an error processor.

    A step-level judge overrides the scorer-level one field by field: only the fields given
    to its constructor (and its options) replace the scorer's; see :meth:`merged_with`.
    """

    __slots__ = ("model", "instructions", "json_prompt_injection", "input_processors",
                 "output_processors", "error_processors", "max_processor_retries", "options",
                 "_explicit")

    model: str | None
    instructions: str
    json_prompt_injection: bool
    input_processors: tuple[InputProcessor, ...]
    output_processors: tuple[OutputProcessor, ...]
    error_processors: tuple[ErrorProcessor, ...]
    max_processor_retries: int | None
    options: Mapping[str, Any]
    _explicit: frozenset[str]

    def __init__(self, model: str | None = _UNSET, instructions: str = _UNSET, *,
                 json_prompt_injection: bool = _UNSET,
                 input_processors: Sequence[InputProcessor] = _UNSET,
                 output_processors: Sequence[OutputProcessor] = _UNSET,
                 error_processors: Sequence[ErrorProcessor] = _UNSET,
                 max_processor_retries: int | None = _UNSET, **options: Any) -> None:
        given = {"model": model, "instructions": instructions,
                 "json_prompt_injection": json_prompt_injection,
                 "input_processors": input_processors, "output_processors": output_processors,
                 "error_processors": error_processors,
                 "max_processor_retries": max_processor_retries}
        for key in _FORBIDDEN_OPTIONS:
            if key in options and options[key]:
                raise ScorerConfigError(
                    f"Judge option {key}={options[key]!r}: litellm's own retries stay off so the "
                    "retry budget is exact; use error_processors=[StreamErrorRetryProcessor(...)]")
        for key in _RESERVED_OPTIONS:
            if key in options:
                raise ScorerConfigError(f"Judge option {key!r} is set by the scorer, not the judge")
        if max_processor_retries not in (_UNSET, None) and max_processor_retries < 0:
            raise ScorerConfigError("max_processor_retries must be >= 0")
        explicit = frozenset(k for k, v in given.items() if v is not _UNSET)
        defaults: dict[str, Any] = {"model": None, "instructions": "",
                                    "json_prompt_injection": False, "input_processors": (),
                                    "output_processors": (), "error_processors": (),
                                    "max_processor_retries": None}
        for key in _FIELDS:
            value = given[key] if key in explicit else defaults[key]
            if key.endswith("_processors"):
                value = tuple(cast(Sequence[Any], value))
            object.__setattr__(self, key, value)
        options = {k: v for k, v in options.items() if k not in _FORBIDDEN_OPTIONS}
        object.__setattr__(self, "options", dict(options))
        object.__setattr__(self, "_explicit", explicit)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("Judge is immutable; build a new one")

    def __repr__(self) -> str:
        opts = {k: ("***" if "key" in k else v) for k, v in self.options.items()}
        return (f"Judge(model={self.model!r}, json_prompt_injection={self.json_prompt_injection}, "
                f"max_processor_retries={self.max_processor_retries}, options={opts})")

    def merged_with(self, override: Judge | None) -> Judge:
        """This judge with ``override``'s explicitly given fields and options on top.

        Processor lists replace; ``max_processor_retries`` is inherited unless given.
        """
        if override is None:
            return self
        kwargs: dict[str, Any] = {k: getattr(self, k) for k in self._explicit}
        kwargs.update({k: getattr(override, k) for k in override._explicit})
        return Judge(**kwargs, **{**self.options, **override.options})

    @property
    def retry_cap(self) -> int:
        """The effective number of processor retries allowed per call."""
        if self.max_processor_retries is not None:
            return self.max_processor_retries
        return DEFAULT_MAX_PROCESSOR_RETRIES if self.error_processors else 0


_litellm: Any = None


def _import_litellm() -> Any:
    global _litellm
    if _litellm is None:
        # The daemon must not reach out to GitHub for litellm's price table at runtime.
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        import litellm

        litellm.suppress_debug_info = True
        _litellm = litellm
    return _litellm


@dataclass(frozen=True, kw_only=True, slots=True)
class JudgeReply:
    """A successful judge call: the parsed/validated ``output`` and the call record."""

    output: Any
    call: JudgeCall


async def _maybe_await(value: Any) -> Any:
    return await value if isinstance(value, Awaitable) else value


def _build_messages(judge: Judge, prompt: str, schema: CompiledSchema | None) -> list[ChatMessage]:
    messages: list[ChatMessage] = []
    if judge.instructions:
        messages.append({"role": "system", "content": judge.instructions})
    if schema is not None and judge.json_prompt_injection:
        prompt = f"{prompt}\n\n{schema.prompt_instructions}"
    messages.append({"role": "user", "content": prompt})
    return messages


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
        except Exception:  # unknown model or price: cost is optional information, never fatal
            return None
    return float(cost) if isinstance(cost, (int, float)) and cost > 0 else None


async def call_judge(judge: Judge, *, step: str, prompt: str,
                     schema: CompiledSchema | None) -> JudgeReply:
    """Make one judge call (with processor retries) and parse its output.

    With ``schema`` the reply is parsed as JSON and validated (``response_format`` is sent
    unless ``json_prompt_injection``); without, the text reply is returned. Raises
    :class:`JudgeCallError` / :class:`JudgeOutputError` carrying the :class:`JudgeCall` record.
    """
    if not judge.model:
        raise ScorerConfigError(f"step {step!r} needs a judge model (Judge(model=...))")
    litellm = _import_litellm()
    messages = _build_messages(judge, prompt, schema)
    for processor in judge.input_processors:
        messages = await _maybe_await(processor.process_input(messages))
    kwargs: dict[str, Any] = {**judge.options, "num_retries": 0, "max_retries": 0}
    if schema is not None and not judge.json_prompt_injection:
        kwargs["response_format"] = schema.response_format
    cap = judge.retry_cap
    attempts, retries = 0, 0
    started = time.perf_counter()

    def record(**fields: Any) -> JudgeCall:
        return JudgeCall(step=step, model=cast(str, judge.model), prompt=prompt, attempts=attempts,
                         duration_ms=(time.perf_counter() - started) * 1000.0, **fields)

    while True:
        attempts += 1
        try:
            response = await litellm.acompletion(model=judge.model, messages=messages, **kwargs)
            break
        except Exception as exc:  # provider errors of every kind go through the error processors
            decision = None
            if retries < cap:
                for err_processor in judge.error_processors:
                    decision = err_processor.process_api_error(error=exc, retry_count=retries)
                    if decision is not None:
                        break
            if decision is None:
                call = record(status="error", error=str(exc)[:2000], error_type=type(exc).__name__)
                raise JudgeCallError(f"judge call for step {step!r} failed after {attempts} "
                                     f"attempt(s): {type(exc).__name__}: {exc}",
                                     call=call) from exc
            retries += 1
            log.info("judge step %s: %s, retry %d/%d in %.2fs", step, type(exc).__name__,
                     retries, cap, decision.delay_s)
            if decision.delay_s > 0:
                await asyncio.sleep(decision.delay_s)  # the provider-requested backoff

    choice = response.choices[0]
    text = getattr(choice.message, "content", None) or ""
    usage = getattr(response, "usage", None)
    tokens = {"input_tokens": getattr(usage, "prompt_tokens", None),
              "output_tokens": getattr(usage, "completion_tokens", None),
              "cost_usd": _cost_usd(litellm, response)}
    try:
        for out_processor in judge.output_processors:
            text = await _maybe_await(out_processor.process_output(text))
        output: Any = text
        if schema is not None:
            output = schema.validate(parse_json_text(text))
    except JudgeError as exc:
        exc.call = record(status="error", raw_output=text, error=str(exc)[:2000],
                          error_type=type(exc).__name__, **tokens)
        raise
    except Exception as exc:  # a user output processor failed: report it as a judge output error
        call = record(status="error", raw_output=text, error=str(exc)[:2000],
                      error_type=type(exc).__name__, **tokens)
        raise JudgeOutputError(f"output processor failed: {exc}", raw_output=text,
                               call=call) from exc
    return JudgeReply(output=output, call=record(status="ok", raw_output=text,
                                                 output=_jsonable(output), **tokens))


def _jsonable(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    return dump(mode="json") if callable(dump) else value
