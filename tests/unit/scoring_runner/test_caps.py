"""Per-binding caps: a bucket that refuses instead of waiting, budgets per binding, the shared
bucket and its local fallback."""

from __future__ import annotations

from tracescorer.config import JudgeSettings, ScorerBinding
from tracescorer.runner.bindings import build_bindings
from tracescorer.runner.caps import BindingCaps, CallBucket


def _bound(**limits: float):
    binding = ScorerBinding.model_validate(
        {"id": "j", "prebuilt": "multi_turn_judge", "options": {"criterion": "c"}, "limits": limits}
    )
    return build_bindings([binding], JudgeSettings(model="openai/gpt-4o-mini"))


def test_the_bucket_refuses_when_empty_and_refills_with_time():
    now = [0.0]
    bucket = CallBucket(2, clock=lambda: now[0])
    assert bucket.try_take(1) and bucket.try_take(1) and not bucket.try_take(1)
    now[0] = 30.0  # one token back (2 a minute)
    assert bucket.try_take(1) and not bucket.try_take(1)


async def test_a_binding_budget_refuses_once_spent_and_names_the_cap():
    (bound,) = _bound(daily_budget_usd=0.01)
    caps = BindingCaps([bound])
    assert caps.budgeted == ["j"] and caps.budget_refusal("j") is None
    caps.add("j", 0.004)
    caps.sync({"j": 0.011})  # another daemon's scores: the larger count wins
    assert caps.spent_usd("j") == 0.011
    assert caps.budget_refusal("j") == (
        "scorers[j].limits.daily_budget_usd reached: $0.0110 of $0.01 spent today (UTC); other scorers go on"
    )
    caps.sync({"j": 0.001})  # never lower than counted here
    assert caps.spent_usd("j") == 0.011
    assert BindingCaps(_bound()).budget_refusal("j") is None and await BindingCaps(_bound()).take(bound) is None


class _Tokens:
    def __init__(self, fail: bool = False) -> None:
        self.calls: list[tuple[str, float, float, float]] = []
        self.fail = fail
        self.left = 1.0

    async def take_judge_tokens(self, bucket: str, tokens: float, capacity: float, per_s: float) -> float:
        self.calls.append((bucket, tokens, capacity, per_s))
        if self.fail:
            raise OSError("database away")
        if self.left >= tokens:
            self.left -= tokens
            return 0.0
        return 30.0


async def test_calls_per_minute_use_the_shared_bucket_and_fall_back_to_a_local_one():
    (bound,) = _bound(requests_per_minute=1)
    tokens = _Tokens()
    caps = BindingCaps([bound], shared=tokens)
    assert await caps.take(bound) is None
    refused = await caps.take(bound)
    assert refused is not None and refused.startswith("scorers[j].limits.requests_per_minute=1 reached")
    assert tokens.calls[0] == ("scorer:j", 1.0, 1.0, 1 / 60)
    down = BindingCaps([bound], shared=_Tokens(fail=True))
    assert await down.take(bound) is None and await down.take(bound) is not None  # the local bucket
