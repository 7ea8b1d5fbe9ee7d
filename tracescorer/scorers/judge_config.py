"""Configuration of an LLM judge (:class:`Judge`): model, instructions, processors, options.

Building a Judge never imports litellm or calls a model; :mod:`tracescorer.scorers.judge`
makes the calls.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal, cast

from tracescorer.scorers.errors import ScorerConfigError
from tracescorer.scorers.processors import InputProcessor, OutputProcessor
from tracescorer.scorers.retry import DEFAULT_MAX_PROCESSOR_RETRIES, ErrorProcessor

JsonPromptInjection = bool | Literal["auto"]
"""How a judge asks for JSON: ``"auto"`` (native structured output, falling back once to the
schema in the prompt when the reply does not parse or validate), ``False`` (native only) or
``True`` (schema in the prompt only, no ``response_format``)."""

_FIELDS = (
    "model",
    "instructions",
    "json_prompt_injection",
    "input_processors",
    "output_processors",
    "error_processors",
    "max_processor_retries",
    "fallbacks",
)
_FORBIDDEN_OPTIONS = ("num_retries", "max_retries")
_RESERVED_OPTIONS = ("messages", "response_format", "stream")
#: options that say where and how to connect, not what is judged: left out of scorer versions and
#: of the key a verdict is reused by (moving the judge or rotating its key changes no verdict)
CONNECTION_OPTIONS = frozenset(
    {"api_base", "base_url", "api_key", "timeout", "timeout_s", "api_version", "extra_headers"}
)


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
        json_prompt_injection: how structured output is asked for (:data:`JsonPromptInjection`):
            ``"auto"`` (default, Mastra's): native ``response_format``, and when the reply
            cannot be parsed or validated one more call with the schema in the prompt (both
            calls recorded); ``True``: the schema in the prompt only (models without native
            structured output); ``False``: native only, an invalid reply fails the step.
        input_processors / output_processors: see :mod:`tracescorer.scorers.processors`.
        error_processors: e.g. :class:`~tracescorer.scorers.retry.StreamErrorRetryProcessor`.
        max_processor_retries: cap on retries per judge call across all error processors
            (10 when error processors are set and this is not).
        fallbacks: models asked, in order, when a request to the model before failed for a
            transient reason (timeout, connection error, 408/409/429, 5xx) once its retries were
            spent: a litellm model string (same options, so the same endpoint) or a mapping with
            ``model`` and the options it needs of its own (``api_base``, ``api_key``...). The
            judge call records the model that answered. Not part of the scorer version.
        **options: passed to ``litellm.acompletion`` (``api_base``, ``api_key``, ``timeout``,
            ``temperature``, ``max_tokens``...). litellm's own retries are always off, so
            ``num_retries``/``max_retries`` are refused: use an error processor.

    A step-level judge overrides the scorer-level one field by field: only the fields given
    to its constructor (and its options) replace the scorer's; see :meth:`merged_with`.
    """

    __slots__ = (
        "_explicit",
        "error_processors",
        "fallbacks",
        "input_processors",
        "instructions",
        "json_prompt_injection",
        "max_processor_retries",
        "model",
        "options",
        "output_processors",
    )

    model: str | None
    instructions: str
    json_prompt_injection: JsonPromptInjection
    input_processors: tuple[InputProcessor, ...]
    output_processors: tuple[OutputProcessor, ...]
    error_processors: tuple[ErrorProcessor, ...]
    max_processor_retries: int | None
    fallbacks: tuple[Mapping[str, Any], ...]
    options: Mapping[str, Any]
    _explicit: frozenset[str]

    def __init__(
        self,
        model: str | None = _UNSET,
        instructions: str = _UNSET,
        *,
        json_prompt_injection: JsonPromptInjection = _UNSET,
        input_processors: Sequence[InputProcessor] = _UNSET,
        output_processors: Sequence[OutputProcessor] = _UNSET,
        error_processors: Sequence[ErrorProcessor] = _UNSET,
        max_processor_retries: int | None = _UNSET,
        fallbacks: Sequence[str | Mapping[str, Any]] = _UNSET,
        **options: Any,
    ) -> None:
        given = {
            "model": model,
            "instructions": instructions,
            "json_prompt_injection": json_prompt_injection,
            "input_processors": input_processors,
            "output_processors": output_processors,
            "error_processors": error_processors,
            "max_processor_retries": max_processor_retries,
            "fallbacks": fallbacks,
        }
        for key in _FORBIDDEN_OPTIONS:
            if options.get(key):
                raise ScorerConfigError(
                    f"Judge option {key}={options[key]!r}: litellm's own retries stay off so the "
                    "retry budget is exact; use error_processors=[StreamErrorRetryProcessor(...)]"
                )
        for key in _RESERVED_OPTIONS:
            if key in options:
                raise ScorerConfigError(f"Judge option {key!r} is set by the scorer, not the judge")
        if json_prompt_injection is not _UNSET and json_prompt_injection not in (True, False, "auto"):
            raise ScorerConfigError(
                f"json_prompt_injection must be True, False or 'auto', got {json_prompt_injection!r}"
            )
        if max_processor_retries not in (_UNSET, None) and max_processor_retries < 0:
            raise ScorerConfigError("max_processor_retries must be >= 0")
        explicit = frozenset(k for k, v in given.items() if v is not _UNSET)
        defaults: dict[str, Any] = {
            "model": None,
            "instructions": "",
            "json_prompt_injection": "auto",
            "input_processors": (),
            "output_processors": (),
            "error_processors": (),
            "max_processor_retries": None,
            "fallbacks": (),
        }
        for key in _FIELDS:
            value = given[key] if key in explicit else defaults[key]
            if key.endswith("_processors"):
                value = tuple(cast(Sequence[Any], value))
            elif key == "fallbacks":
                value = _fallbacks(value)
            object.__setattr__(self, key, value)
        options = {k: v for k, v in options.items() if k not in _FORBIDDEN_OPTIONS}
        object.__setattr__(self, "options", dict(options))
        object.__setattr__(self, "_explicit", explicit)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("Judge is immutable; build a new one")

    def __repr__(self) -> str:
        opts = {k: ("***" if "key" in k else v) for k, v in self.options.items()}
        return (
            f"Judge(model={self.model!r}, json_prompt_injection={self.json_prompt_injection}, "
            f"max_processor_retries={self.max_processor_retries}, options={opts})"
        )

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
    def routes(self) -> tuple[tuple[str, Mapping[str, Any]], ...]:
        """The models a request may go to, in order, each with the options it adds: the judge's
        model first, then its fallbacks."""
        first: tuple[tuple[str, Mapping[str, Any]], ...] = ((cast(str, self.model), {}),)
        return first + tuple((f["model"], {k: v for k, v in f.items() if k != "model"}) for f in self.fallbacks)

    @property
    def retry_cap(self) -> int:
        """The effective number of processor retries allowed per call."""
        if self.max_processor_retries is not None:
            return self.max_processor_retries
        return DEFAULT_MAX_PROCESSOR_RETRIES if self.error_processors else 0


def _fallbacks(value: Any) -> tuple[Mapping[str, Any], ...]:
    """``fallbacks`` as mappings with a ``model`` (ScorerConfigError when an entry is not one)."""
    if isinstance(value, (str, Mapping)) or not isinstance(value, Sequence):
        raise ScorerConfigError(f"fallbacks must be a list of models, got {value!r}")
    out: list[Mapping[str, Any]] = []
    for entry in value:
        item = {"model": entry} if isinstance(entry, str) else dict(entry) if isinstance(entry, Mapping) else None
        if item is None or not isinstance(item.get("model"), str) or not item["model"]:
            raise ScorerConfigError(f"a fallback is a model string or a mapping with a 'model', got {entry!r}")
        refused = [k for k in (*_FORBIDDEN_OPTIONS, *_RESERVED_OPTIONS, "fallbacks") if k in item]
        if refused:
            raise ScorerConfigError(f"fallback {item['model']!r}: option {refused[0]!r} is not allowed there")
        out.append(item)
    return tuple(out)
