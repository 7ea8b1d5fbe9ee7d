"""StreamErrorRetryProcessor: classification, Retry-After, exact attempt bounds, per-step retries."""

from __future__ import annotations

import time
from email.utils import formatdate
from typing import Any

import pytest
from support.agent_runs import MODEL

from tests.fakes import FakeOpenAI, Reply
from tracescorer import (
    Judge,
    PromptStep,
    RetryMatcher,
    ScorerRun,
    ScorerRunError,
    StreamErrorRetryProcessor,
    create_scorer,
)
from tracescorer.scorers.retry import is_retryable, provider_retry_after_s


class HeaderError(Exception):
    def __init__(self, status: int | None, headers: dict[str, str] | None = None) -> None:
        super().__init__(f"status {status}")
        self.status_code = status
        self.headers = headers


class RateLimitError(Exception):
    pass


class ContextWindowExceededError(Exception):
    status_code = 400


def score_scorer(opts: dict[str, Any], prompt: str = "SCORE", **judge_kw: Any) -> Any:
    return create_scorer(id="r", judge=Judge(model=MODEL, **opts, **judge_kw)).generate_score(
        PromptStep(description="s", create_prompt=lambda *, run, results: prompt)
    )


# -- classification and Retry-After ------------------------------------------------------------


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (HeaderError(429), True),
        (HeaderError(500), True),
        (HeaderError(503), True),
        (HeaderError(529), True),
        (HeaderError(408), True),
        (HeaderError(401), False),
        (HeaderError(403), False),
        (HeaderError(400), False),
        (RateLimitError("x"), True),
        (ContextWindowExceededError("too long"), False),
        (TimeoutError(), True),
        (ConnectionResetError(), True),
        (ValueError("Model is overloaded"), True),
        (ValueError("weird"), None),
    ],
)
def test_classification(error: BaseException, expected: bool | None) -> None:
    assert is_retryable(error) is expected


def test_retry_after_parsing() -> None:
    assert provider_retry_after_s(HeaderError(429, {"Retry-After": "2.5"})) == 2.5
    assert provider_retry_after_s(HeaderError(429, {"retry-after": "3", "retry-after-ms": "1500"})) == 1.5
    now = time.time()
    date = formatdate(now + 20, usegmt=True)
    value = provider_retry_after_s(HeaderError(429, {"Retry-After": date}), now=now)
    assert value is not None and 18 <= value <= 21
    past = formatdate(now - 100, usegmt=True)
    assert provider_retry_after_s(HeaderError(429, {"Retry-After": past}), now=now) == 0
    assert provider_retry_after_s(HeaderError(429, {"Retry-After": "soon"})) is None
    assert provider_retry_after_s(HeaderError(429, {"Retry-After": "-1"})) is None
    assert provider_retry_after_s(HeaderError(429)) is None


def test_delay_is_max_of_configured_and_capped_provider() -> None:
    p = StreamErrorRetryProcessor(max_retries=3, delay_s=1.0, max_retry_after_s=5)
    assert p.delay_for(error=HeaderError(429, {"Retry-After": "100"}), retry_count=0) == 5
    assert p.delay_for(error=HeaderError(429, {"Retry-After": "0.2"}), retry_count=0) == 1.0
    assert p.delay_for(error=HeaderError(429, {"retry-after-ms": "3000", "Retry-After": "1"}), retry_count=0) == 3.0
    calls: list[tuple[int, str]] = []

    def backoff(*, retry_count: int, error: BaseException) -> float:
        calls.append((retry_count, type(error).__name__))
        return 2.0**retry_count

    q = StreamErrorRetryProcessor(max_retries=3, delay_s=backoff)
    assert q.delay_for(error=HeaderError(500), retry_count=2) == 4.0
    assert calls == [(2, "HeaderError")]


def test_processor_decisions() -> None:
    p = StreamErrorRetryProcessor(max_retries=2)
    assert p.process_api_error(error=HeaderError(500), retry_count=0) is not None
    assert p.process_api_error(error=HeaderError(500), retry_count=2) is None
    assert p.process_api_error(error=HeaderError(401), retry_count=0) is None
    assert p.process_api_error(error=ValueError("weird"), retry_count=0) is None
    unknown = StreamErrorRetryProcessor(retry_unknown_errors=True)
    assert unknown.process_api_error(error=ValueError("weird"), retry_count=0) is not None
    # unknown-retry never overrides a known permanent error
    assert unknown.process_api_error(error=HeaderError(401), retry_count=0) is None


def test_retry_matcher() -> None:
    m = RetryMatcher(message=r"ECONNRESET|socket hang up")
    assert m(ValueError("read ECONNRESET")) and not m(ValueError("nope"))
    assert RetryMatcher(status_codes=[401])(HeaderError(401))
    assert RetryMatcher(error_types=["HeaderError"], status_codes=[400])(HeaderError(400))
    assert not RetryMatcher(error_types=["HeaderError"], status_codes=[400])(HeaderError(401))
    assert not RetryMatcher()(HeaderError(500))
    with pytest.raises(ValueError):
        StreamErrorRetryProcessor(max_retries=-1)


# -- through litellm to the fake server ---------------------------------------------------------


async def test_at_most_three_attempts(fake: FakeOpenAI, judge_opts: dict[str, Any]) -> None:
    fake.script("SCORE", Reply.server_error(503))
    scorer = score_scorer(
        judge_opts, error_processors=[StreamErrorRetryProcessor(max_retries=2)], max_processor_retries=2
    )
    with pytest.raises(ScorerRunError) as info:
        await scorer.run(ScorerRun(output="x"))
    assert fake.attempts("SCORE") == 3
    assert list(fake.attempts_by_request().values()) == [3]
    call = info.value.result.judge_calls[-1]
    assert call.attempts == 3 and call.status == "error"
    assert call.error_type == "ServiceUnavailableError"


async def test_lower_of_processor_and_judge_caps_wins(fake: FakeOpenAI, judge_opts: dict[str, Any]) -> None:
    fake.script("SCORE", Reply.server_error(500))
    scorer = score_scorer(
        judge_opts, error_processors=[StreamErrorRetryProcessor(max_retries=5)], max_processor_retries=1
    )
    with pytest.raises(ScorerRunError):
        await scorer.run(ScorerRun(output="x"))
    assert fake.attempts("SCORE") == 2


async def test_default_cap_is_ten(fake: FakeOpenAI, judge_opts: dict[str, Any]) -> None:
    fake.script("SCORE", Reply.server_error(500))
    scorer = score_scorer(judge_opts, error_processors=[StreamErrorRetryProcessor(max_retries=50)])
    with pytest.raises(ScorerRunError):
        await scorer.run(ScorerRun(output="x"))
    assert fake.attempts("SCORE") == 11


async def test_no_processors_means_one_attempt(fake: FakeOpenAI, judge_opts: dict[str, Any]) -> None:
    fake.script("SCORE", Reply.rate_limited(retry_after_s=0))
    with pytest.raises(ScorerRunError):
        await score_scorer(judge_opts).run(ScorerRun(output="x"))
    assert fake.attempts("SCORE") == 1


async def test_recovers_after_transient_errors(fake: FakeOpenAI, judge_opts: dict[str, Any]) -> None:
    fake.script("SCORE", [Reply.rate_limited(retry_after_s=0), Reply.server_error(500), Reply.json({"score": 0.9})])
    scorer = score_scorer(
        judge_opts, error_processors=[StreamErrorRetryProcessor(max_retries=2)], max_processor_retries=2
    )
    result = await scorer.run(ScorerRun(output="x"))
    assert result.score == 0.9
    assert result.judge_calls[0].attempts == 3 and result.judge_calls[0].status == "ok"


@pytest.mark.parametrize(
    "reply",
    [
        Reply.unauthorized(),
        Reply.context_length(),
        Reply.error(403, "forbidden", type="permission_error"),
        Reply.error(400, "bad param", type="invalid_request_error"),
    ],
)
async def test_permanent_errors_fail_at_once(fake: FakeOpenAI, judge_opts: dict[str, Any], reply: Reply) -> None:
    fake.script("SCORE", reply)
    scorer = score_scorer(
        judge_opts, error_processors=[StreamErrorRetryProcessor(max_retries=3, retry_unknown_errors=True)]
    )
    with pytest.raises(ScorerRunError):
        await scorer.run(ScorerRun(output="x"))
    assert fake.attempts("SCORE") == 1


async def test_context_length_maps_to_context_window_error(fake: FakeOpenAI, judge_opts: dict[str, Any]) -> None:
    fake.script("SCORE", Reply.context_length())
    with pytest.raises(ScorerRunError) as info:
        await score_scorer(judge_opts).run(ScorerRun(output="x"))
    assert info.value.result.judge_calls[-1].error_type == "ContextWindowExceededError"


async def test_matcher_makes_permanent_error_retryable(fake: FakeOpenAI, judge_opts: dict[str, Any]) -> None:
    fake.script("SCORE", [Reply.unauthorized(), Reply.json({"score": 1})])
    scorer = score_scorer(
        judge_opts,
        error_processors=[StreamErrorRetryProcessor(max_retries=1, matchers=[RetryMatcher(status_codes=[401])])],
    )
    assert (await scorer.run(ScorerRun(output="x"))).score == 1
    assert fake.attempts("SCORE") == 2


async def test_retry_after_is_capped(fake: FakeOpenAI, judge_opts: dict[str, Any]) -> None:
    # the provider asks for 120 s; the cap of 0.2 s wins (and retry-after-ms beats Retry-After)
    fake.script("SCORE", [Reply.rate_limited(retry_after_s=120), Reply.json({"score": 1})])
    scorer = score_scorer(
        judge_opts, error_processors=[StreamErrorRetryProcessor(max_retries=1, max_retry_after_s=0.2)]
    )
    started = time.monotonic()
    assert (await scorer.run(ScorerRun(output="x"))).score == 1
    assert time.monotonic() - started < 5
    reqs = fake.requests
    gap = reqs[1].received_at - reqs[0].received_at
    assert 0.18 <= gap < 5


async def test_retry_after_ms_is_honoured(fake: FakeOpenAI, judge_opts: dict[str, Any]) -> None:
    fake.script("SCORE", [Reply.rate_limited(retry_after_s=60, retry_after_ms=250), Reply.json({"score": 1})])
    scorer = score_scorer(judge_opts, error_processors=[StreamErrorRetryProcessor(max_retries=1)])
    assert (await scorer.run(ScorerRun(output="x"))).score == 1
    gap = fake.requests[1].received_at - fake.requests[0].received_at
    assert 0.23 <= gap < 5


async def test_timeouts_retry(fake: FakeOpenAI, judge_opts: dict[str, Any]) -> None:
    fake.script("SCORE", [Reply.json({"score": 0}, delay_s=3), Reply.json({"score": 1})])
    scorer = score_scorer({**judge_opts, "timeout": 0.3}, error_processors=[StreamErrorRetryProcessor(max_retries=1)])
    result = await scorer.run(ScorerRun(output="x"))
    assert result.score == 1 and result.judge_calls[0].attempts == 2


async def test_retries_are_per_step(fake: FakeOpenAI, judge_opts: dict[str, Any]) -> None:
    fake.script("SCORE", Reply.json({"score": 0.5}))
    fake.script("REASON", [Reply.server_error(503), Reply.rate_limited(retry_after_s=0), Reply.text("fine")])
    judge = Judge(
        model=MODEL, error_processors=[StreamErrorRetryProcessor(max_retries=2)], max_processor_retries=2, **judge_opts
    )
    scorer = (
        create_scorer(id="p", judge=judge)
        .generate_score(PromptStep(description="s", create_prompt=lambda *, run, results: "SCORE"))
        .generate_reason(PromptStep(description="r", create_prompt=lambda *, run, results, score: "REASON"))
    )
    result = await scorer.run(ScorerRun(output="x"))
    assert result.reason == "fine"
    assert fake.attempts("SCORE") == 1 and fake.attempts("REASON") == 3
    assert [c.attempts for c in result.judge_calls] == [1, 3]


async def test_step_override_of_processors(fake: FakeOpenAI, judge_opts: dict[str, Any]) -> None:
    fake.script("SCORE", Reply.server_error(500))
    base = Judge(
        model=MODEL, error_processors=[StreamErrorRetryProcessor(max_retries=5)], max_processor_retries=5, **judge_opts
    )
    step = Judge(error_processors=[StreamErrorRetryProcessor(max_retries=1)])
    scorer = create_scorer(id="o", judge=base).generate_score(
        PromptStep(description="s", create_prompt=lambda *, run, results: "SCORE", judge=step)
    )
    with pytest.raises(ScorerRunError):
        await scorer.run(ScorerRun(output="x"))
    assert fake.attempts("SCORE") == 2  # step processor (1 retry), scorer cap (5) inherited


async def test_connection_reset_retries(fake: FakeOpenAI, judge_opts: dict[str, Any]) -> None:
    fake.script("SCORE", [Reply.disconnect(), Reply.json({"score": 1})])
    scorer = score_scorer(judge_opts, error_processors=[StreamErrorRetryProcessor(max_retries=1)])
    result = await scorer.run(ScorerRun(output="x"))
    assert result.score == 1 and result.judge_calls[0].attempts == 2
