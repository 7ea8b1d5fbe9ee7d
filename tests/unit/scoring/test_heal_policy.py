"""The heal policy: which scorer errors are transient, the doubling backoff, the verdict on one
error score and how ``explain`` words it."""

from __future__ import annotations

import pytest

from tracescorer.runner.heal_policy import HealPolicy, Verdict, describe, error_class, heal_state
from tracescorer.scorers.errors import JudgeCallError, JudgeOutputError


class ProviderError(Exception):
    """Like a provider SDK's error: it carries the HTTP status."""

    def __init__(self, message: str, status_code: int) -> None:
        super().__init__(message)
        self.status_code = status_code


class APIConnectionError(Exception):
    """Named like the OpenAI SDK's (and litellm's) connection error."""


def _wrapped(cause: BaseException) -> BaseException:
    """A scorer failure as the runner sees it: a run error, from the judge call error, from the cause."""
    call = JudgeCallError("judge call failed")
    call.__cause__ = cause
    run = RuntimeError("scorer 's' failed in step 'analyze'")
    run.__cause__ = call
    return run


@pytest.mark.parametrize(
    ("cause", "expected"),
    [
        (ProviderError("service unavailable", 503), "transient"),
        (ProviderError("bad gateway", 502), "transient"),
        (ProviderError("slow down", 429), "transient"),
        (ProviderError("request timeout", 408), "transient"),
        (APIConnectionError("connection refused"), "transient"),
        (TimeoutError(), "transient"),
        (ProviderError("invalid api key", 401), "permanent"),
        (ProviderError("forbidden", 403), "permanent"),
        (ProviderError("invalid request", 400), "permanent"),
        (ValueError("a scorer's own code failed"), "permanent"),
        (JudgeOutputError("not JSON", raw_output="hello"), "output"),
    ],
)
def test_errors_are_classed_through_the_whole_chain(cause: BaseException, expected: str) -> None:
    assert error_class(_wrapped(cause)) == expected


def test_no_error_has_no_class() -> None:
    assert error_class(None) is None


def test_the_backoff_doubles_from_the_initial_wait_up_to_its_cap() -> None:
    policy = HealPolicy(initial_backoff_s=30, max_backoff_s=600)
    assert [policy.backoff_s(n) for n in range(7)] == [30, 60, 120, 240, 480, 600, 600]


def test_the_verdict_on_an_error_score() -> None:
    policy = HealPolicy(max_attempts=5, max_age_s=3600, initial_backoff_s=30, max_backoff_s=600)

    def state(cls: str | None = "transient", attempts: int | None = 0, failed_ago: float = 0, age: float = 0):
        now = 10_000.0
        return heal_state(
            policy, error_class=cls, attempts=attempts, failed_at=now - failed_ago, first_failed_at=now - age, now=now
        )

    assert state(failed_ago=10) == heal_state(
        policy, error_class="transient", attempts=None, failed_at=9_990, first_failed_at=10_000, now=10_000
    )
    waiting = state(failed_ago=10)
    assert waiting.verdict is Verdict.WAITING and waiting.due_at == 10_000 - 10 + 30
    assert state(failed_ago=30).verdict is Verdict.DUE
    # two re-scores so far: the wait is 120 s
    assert state(attempts=2, failed_ago=119).verdict is Verdict.WAITING
    assert state(attempts=2, failed_ago=120).verdict is Verdict.DUE
    assert state(attempts=5, failed_ago=9999).verdict is Verdict.GAVE_UP
    assert state(failed_ago=9999, age=3601).verdict is Verdict.EXPIRED
    for cls in ("permanent", "output", None):
        assert state(cls=cls, failed_ago=9999).verdict is Verdict.NOT_HEALED


def test_explain_words_the_heal_state() -> None:
    policy = HealPolicy(max_attempts=5, max_age_s=3600, initial_backoff_s=30, max_backoff_s=600)

    def words(attempts: int, failed_ago: float, cls: str = "transient", age: float = 0) -> str:
        now = 10_000.0
        found = heal_state(
            policy, error_class=cls, attempts=attempts, failed_at=now - failed_ago, first_failed_at=now - age, now=now
        )
        return describe(found, policy, now=now)

    assert words(1, 0) == "retry 2 of 5 due in 1m"
    assert words(0, 5) == "retry 1 of 5 due in 25s"
    assert words(0, 31) == "retry 1 of 5 due now"
    assert words(5, 0) == "gave up after 5 automatic retries"
    assert words(0, 0, age=4000) == "not retried: older than scoring.heal.max_age_s (3600s)"
    assert words(0, 0, cls="permanent") == "not retried automatically (not a transient error)"
