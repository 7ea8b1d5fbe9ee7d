"""Gates (``scorers[].when``) and fallback models as bindings build them: a gate names another
enabled binding of the same scope and never waits on itself; the gate rule is strict; fallbacks
reach the judge from the ``judge:`` section or the binding, are checked, and change no version."""

from __future__ import annotations

from typing import Any

import pytest

from tracescorer.config import JudgeSettings, ScorerBinding
from tracescorer.runner.bindings import BindingError, build_bindings
from tracescorer.runner.gates import first_deciders, gate_refusal
from tracescorer.scorers.errors import ScorerConfigError
from tracescorer.scorers.judge_config import Judge

DEFAULTS = JudgeSettings(model="openai/gpt-4o-mini", api_key="k")


def _judge(binding_id: str, **extra: Any) -> ScorerBinding:
    return ScorerBinding.model_validate(
        {"id": binding_id, "prebuilt": "multi_turn_judge", "options": {"criterion": "helpful"}, **extra}
    )


def _check(binding_id: str = "check", **extra: Any) -> ScorerBinding:
    return ScorerBinding.model_validate({"id": binding_id, "prebuilt": "includes", "options": {"text": "x"}, **extra})


def test_a_gate_names_an_enabled_binding_of_the_same_scope_and_no_cycle() -> None:
    bound = build_bindings([_check(), _judge("j", when={"scorer": "check", "below": 1})], DEFAULTS)
    assert [b.binding.id for b in first_deciders(bound)] == ["check"]
    with pytest.raises(BindingError, match=r"scorers\[0\] \(j\): when.scorer 'nope' is not an enabled binding"):
        build_bindings([_judge("j", when={"scorer": "nope", "below": 1}), _check()], DEFAULTS)
    with pytest.raises(BindingError, match="'check' is not an enabled binding"):
        build_bindings([_judge("j", when={"scorer": "check", "below": 1}), _check(enabled=False)], DEFAULTS)
    with pytest.raises(BindingError, match="'check' scores runs, this binding conversations"):
        build_bindings([_check(), _judge("j", scope="conversation", when={"scorer": "check", "above": 0})], DEFAULTS)
    with pytest.raises(BindingError, match=r"the gates wait on each other \(a -> b -> a\)"):
        build_bindings(
            [_judge("a", when={"scorer": "b", "below": 1}), _judge("b", when={"scorer": "a", "below": 1})], DEFAULTS
        )
    with pytest.raises(ValueError, match="exactly one of 'below' or 'above'"):
        _judge("j", when={"scorer": "check", "below": 1, "above": 0})


def test_the_gate_rule_is_strict_and_says_why() -> None:
    below = _judge("j", when={"scorer": "check", "below": 0.5}).when
    above = _judge("j", when={"scorer": "check", "above": 0.5}).when
    assert below is not None and above is not None
    assert gate_refusal(below, "scored", 0.4) is None
    assert gate_refusal(below, "scored", 0.5) == "check scored 0.5; this runs only below 0.5"
    assert gate_refusal(above, "scored", 0.6) is None
    assert gate_refusal(above, "scored", 0.5) == "check scored 0.5; this runs only above 0.5"
    assert gate_refusal(below, "sampled_out", None) == "check was sampled_out on this target: no score to gate on"


def test_fallbacks_reach_the_judge_are_checked_and_change_no_version() -> None:
    section = JudgeSettings(
        model="openai/a", api_key="k", fallbacks=["openai/b", {"model": "anthropic/c", "api_key": "x"}]
    )
    [from_section] = build_bindings([_judge("j")], section)
    [plain] = build_bindings([_judge("j")], DEFAULTS.model_copy(update={"model": "openai/a"}))
    judge = from_section.scorer.judge
    assert judge is not None
    assert judge.routes == (("openai/a", {}), ("openai/b", {}), ("anthropic/c", {"api_key": "x"}))
    assert from_section.version == plain.version  # the score names the model that answered instead
    [on_binding] = build_bindings([_judge("j", judge={"model": "openai/a", "fallbacks": ["openai/d"]})], DEFAULTS)
    assert on_binding.scorer.judge is not None and on_binding.scorer.judge.routes[1] == ("openai/d", {})
    [same_model] = build_bindings([_judge("j", judge={"model": "openai/a"})], DEFAULTS)
    assert on_binding.version == same_model.version
    with pytest.raises(ScorerConfigError, match="a fallback is a model string or a mapping with a 'model'"):
        Judge(model="openai/a", fallbacks=[{"api_key": "x"}])
    with pytest.raises(ScorerConfigError, match="fallbacks must be a list of models"):
        Judge(model="openai/a", fallbacks="openai/b")
    with pytest.raises(ScorerConfigError, match="option 'num_retries' is not allowed there"):
        Judge(model="openai/a", fallbacks=[{"model": "openai/b", "num_retries": 2}])
