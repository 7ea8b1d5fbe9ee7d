"""Retrying failed judge requests: :class:`StreamErrorRetryProcessor` and :class:`RetryMatcher`.

Errors are classified without importing litellm, from what its exceptions carry: the HTTP
``status_code`` and the class names in the exception's MRO (litellm's classes subclass the
OpenAI SDK's, so either naming is recognised). ``Retry-After`` headers are read from
``litellm_response_headers``, ``response.headers`` or ``headers``, whichever is present.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any, Protocol, runtime_checkable

DEFAULT_MAX_PROCESSOR_RETRIES = 10
"""Retry cap of a judge that has error processors but no ``max_processor_retries``."""

_RETRYABLE_TYPES = frozenset(
    {
        "RateLimitError",
        "Timeout",
        "APITimeoutError",
        "APIConnectionError",
        "ServiceUnavailableError",
        "InternalServerError",
        "TimeoutError",
        "ConnectionError",
        "ConnectionResetError",
        "ConnectionRefusedError",
        "ConnectionAbortedError",
        "ServerDisconnectedError",
        "ClientConnectionError",
        "RemoteProtocolError",
    }
)
_FATAL_TYPES = frozenset(
    {
        "AuthenticationError",
        "PermissionDeniedError",
        "BadRequestError",
        "NotFoundError",
        "ContextWindowExceededError",
        "ContentPolicyViolationError",
        "UnprocessableEntityError",
        "UnsupportedParamsError",
        "InvalidRequestError",
        "BudgetExceededError",
    }
)
_OVERLOADED = re.compile(r"overloaded|temporarily unavailable|try again later", re.IGNORECASE)


MAX_CHAIN = 16
"""How many links of an exception's ``__cause__``/``__context__`` chain are examined."""


def error_chain(error: BaseException) -> list[BaseException]:
    """``error`` and the exceptions it wraps, outermost first: ``__cause__`` (``raise ... from``)
    before ``__context__`` (raised while handling), each link once, at most :data:`MAX_CHAIN`.
    Like Mastra walking ``error.cause``, so a provider error wrapped in another still counts."""
    chain: list[BaseException] = []
    seen: set[int] = set()
    link: BaseException | None = error
    while link is not None and id(link) not in seen and len(chain) < MAX_CHAIN:
        seen.add(id(link))
        chain.append(link)
        link = (
            link.__cause__ if link.__cause__ is not None else (None if link.__suppress_context__ else link.__context__)
        )
    return chain


def _type_names(error: BaseException) -> set[str]:
    return {cls.__name__ for cls in type(error).__mro__}


def status_code_of(error: BaseException) -> int | None:
    """The HTTP status carried by a provider error, if any."""
    for attr in ("status_code", "http_status"):
        value = getattr(error, attr, None)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, str) and value.isdigit():
            return int(value)
    return None


def is_retryable(error: BaseException) -> bool | None:
    """``True`` for transient provider errors, ``False`` for ones that will fail again, ``None``
    when the error is not recognised.

    Transient: rate limits (429), request timeouts (408), conflicts (409), 5xx and overloaded
    responses, timeouts and connection failures. Permanent: 400/401/403/404/413/422 and
    authentication, permission, invalid-request and context-length errors.
    """
    names = _type_names(error)
    status = status_code_of(error)
    if names & _FATAL_TYPES:
        return False
    if status is not None:
        if status in (408, 409, 429) or status >= 500:
            return True
        if 400 <= status < 500:
            return False
    if names & _RETRYABLE_TYPES:
        return True
    if _OVERLOADED.search(str(error)):
        return True
    return None


def classify(error: BaseException) -> bool | None:
    """:func:`is_retryable` of the first link of ``error``'s chain (:func:`error_chain`, outermost
    first) it recognises; ``None`` when it recognises none."""
    for link in error_chain(error):
        verdict = is_retryable(link)
        if verdict is not None:
            return verdict
    return None


def is_transient(error: BaseException) -> bool:
    """Whether :func:`classify` calls ``error`` transient (an error recognised nowhere is not)."""
    return classify(error) is True


def _headers_of(error: BaseException) -> Mapping[str, Any] | None:
    for candidate in (
        getattr(error, "litellm_response_headers", None),
        getattr(getattr(error, "response", None), "headers", None),
        getattr(error, "headers", None),
    ):
        if candidate is not None and hasattr(candidate, "get"):
            return candidate  # type: ignore[no-any-return]
    return None


def _header(headers: Mapping[str, Any], name: str) -> str | None:
    value = headers.get(name)
    if value is None:  # plain dicts are case-sensitive; httpx.Headers are not
        lowered = name.lower()
        for key, val in headers.items():
            if str(key).lower() == lowered:
                value = val
                break
    return None if value is None else str(value).strip()


def provider_retry_after_s(error: BaseException, *, now: float | None = None) -> float | None:
    """The delay the provider asked for, in seconds, or ``None``.

    ``retry-after-ms`` wins over ``Retry-After``; ``Retry-After`` may be seconds or an HTTP
    date. Negative and unparsable values are ignored. The headers are taken from the first
    exception in :func:`error_chain` that carries any.
    """
    headers = next((h for h in map(_headers_of, error_chain(error)) if h is not None), None)
    if headers is None:
        return None
    millis = _header(headers, "retry-after-ms")
    if millis:
        try:
            value = float(millis) / 1000.0
            if math.isfinite(value) and value >= 0:
                return value
        except ValueError:
            pass
    raw = _header(headers, "retry-after")
    if not raw:
        return None
    try:
        value = float(raw)
        return value if math.isfinite(value) and value >= 0 else None
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(raw)
    except (TypeError, ValueError, IndexError):
        return None
    current = time.time() if now is None else now
    return max(0.0, when.timestamp() - current)


@dataclass(frozen=True, kw_only=True, slots=True)
class RetryMatcher:
    """A narrow rule marking errors as retryable, even ones classified as permanent.

    Matches when every given criterion holds: ``message`` (regex searched in ``str(error)``),
    ``status_codes``, ``error_types`` (class names anywhere in the error's MRO). Any plain
    ``callable(error) -> bool`` may be used as a matcher too.
    """

    message: str | None = None
    status_codes: Sequence[int] = ()
    error_types: Sequence[str] = ()

    def __call__(self, error: BaseException) -> bool:
        if self.message is None and not self.status_codes and not self.error_types:
            return False
        if self.message is not None and not re.search(self.message, str(error)):
            return False
        if self.status_codes and status_code_of(error) not in self.status_codes:
            return False
        return not (self.error_types and not (_type_names(error) & set(self.error_types)))


@dataclass(frozen=True, kw_only=True, slots=True)
class RetryDecision:
    """An error processor's answer: retry after ``delay_s`` seconds."""

    delay_s: float = 0.0


@runtime_checkable
class ErrorProcessor(Protocol):
    """Inspects a failed judge request and may ask for a retry.

    ``process_api_error`` is called on the event loop with the error and the number of
    retries already made for this judge call (0 on the first failure); it returns a
    :class:`RetryDecision` to retry, or ``None`` to let the error through. Implementations
    must be stateless across calls: one instance serves concurrent judge calls.
    """

    def process_api_error(self, *, error: BaseException, retry_count: int) -> RetryDecision | None: ...


DelayFn = Callable[..., float]


@dataclass(frozen=True, kw_only=True)
class StreamErrorRetryProcessor:
    """Retries transient judge failures, honouring the provider's ``Retry-After``.

    Args:
        max_retries: retries this processor grants per judge call.
        matchers: :class:`RetryMatcher` rules or callables; a match makes any error retryable.
        retry_unknown_errors: retry errors that are neither known transient nor known permanent.
        delay_s: seconds to wait, or ``callable(retry_count=, error=) -> seconds``
            (``retry_count`` = retries already made, 0 before the first retry).
        max_retry_after_s: cap on the provider-requested delay.

    The wait is ``max(delay_s, min(provider delay, max_retry_after_s))``. Set the judge's
    ``max_processor_retries`` to the same value as ``max_retries`` for one exact budget.
    """

    max_retries: int = 1
    matchers: Sequence[RetryMatcher | Callable[[BaseException], bool]] = ()
    retry_unknown_errors: bool = False
    delay_s: float | DelayFn = 0.0
    max_retry_after_s: float = 30.0

    def __post_init__(self) -> None:
        if self.max_retries < 0:
            raise ValueError("max_retries must be >= 0")
        if self.max_retry_after_s < 0:
            raise ValueError("max_retry_after_s must be >= 0")

    def should_retry(self, error: BaseException) -> bool:
        """Whether ``error`` is retryable under this processor's rules (ignoring the count).

        The error and the exceptions it wraps (:func:`error_chain`) are examined outermost
        first: a matcher matching any of them makes it retryable; otherwise the first link
        classified as transient or permanent decides; an error recognised nowhere in the chain
        is retried only with ``retry_unknown_errors``.
        """
        if any(matcher(link) for link in error_chain(error) for matcher in self.matchers):
            return True
        verdict = classify(error)
        return self.retry_unknown_errors if verdict is None else verdict

    def delay_for(self, *, error: BaseException, retry_count: int) -> float:
        """Seconds to wait before the next attempt."""
        configured = self.delay_s(retry_count=retry_count, error=error) if callable(self.delay_s) else self.delay_s
        provider = provider_retry_after_s(error)
        capped = 0.0 if provider is None else min(provider, self.max_retry_after_s)
        return max(float(configured), capped, 0.0)

    def process_api_error(self, *, error: BaseException, retry_count: int) -> RetryDecision | None:
        if retry_count >= self.max_retries or not self.should_retry(error):
            return None
        return RetryDecision(delay_s=self.delay_for(error=error, retry_count=retry_count))


@dataclass(frozen=True, kw_only=True, slots=True)
class ExponentialBackoff:
    """A ``delay_s`` for :class:`StreamErrorRetryProcessor`: ``initial_s`` before the first
    retry, doubling per retry, at most ``max_s``."""

    initial_s: float = 1.0
    max_s: float = 30.0

    def __call__(self, *, retry_count: int, error: BaseException) -> float:
        return float(min(self.initial_s * 2**retry_count, self.max_s))


def retry_options(retries: int, *, initial_s: float = 1.0) -> dict[str, Any]:
    """The :class:`~tracescorer.scorers.judge_config.Judge` arguments for ``retries`` retries of
    transient provider errors (``judge.retries`` in the configuration): one
    :class:`StreamErrorRetryProcessor` with :class:`ExponentialBackoff`, its budget exact
    (``max_processor_retries``). 0 retries: one attempt."""
    if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
        raise ValueError(f"retries must be a whole number >= 0, got {retries!r}")
    if isinstance(initial_s, bool) or not isinstance(initial_s, (int, float)) or not initial_s > 0:
        raise ValueError(f"retry_initial_s must be a number > 0, got {initial_s!r}")
    if retries == 0:
        return {"error_processors": [], "max_processor_retries": 0}
    processor = StreamErrorRetryProcessor(max_retries=retries, delay_s=ExponentialBackoff(initial_s=float(initial_s)))
    return {"error_processors": [processor], "max_processor_retries": retries}
