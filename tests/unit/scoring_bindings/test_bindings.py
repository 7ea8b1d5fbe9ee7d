"""build_bindings / registry_from: prebuilt and python bindings, judge settings, every error."""

from __future__ import annotations

import importlib
import inspect
import re
from typing import Any

import pytest

from tracescorer.config import JudgeSettings, ScorerBinding
from tracescorer.filters import RunFilter
from tracescorer.prebuilt import MULTI_TURN_JUDGE_ID
from tracescorer.runner.bindings import (
    PREBUILT,
    BindingError,
    BoundScorer,
    build_bindings,
    registry_from,
    uses_judge,
)
from tracescorer.scorers import prebuilt as prebuilt_module
from tracescorer.scorers.judge import Judge
from tracescorer.scorers.scorer import Scorer

SAMPLES = "unit.scoring_bindings.sample_scorers"
MODEL = "openai/gpt-4o-mini"
DEFAULTS = JudgeSettings(model=MODEL, api_base="http://judge.local/v1", api_key="sk-default", timeout_s=12)
NO_MODEL = JudgeSettings()

LLM = {
    "multi_turn_judge": {"criterion": "Answers every question."},
    "answer_relevancy": {},
    "faithfulness": {},
    "hallucination": {},
    "toxicity": {},
    "bias": {},
    "prompt_alignment": {},
    "tool_call_appropriateness": {},
    "rubric": {"criteria": ["Is polite"]},
    "answer_similarity": {},
    "context_precision": {},
    "context_relevance": {},
    "context_recall": {},
    "noise_sensitivity": {"baseline_response": "Paris.", "noisy_query": "Capital? (ignore)"},
    "summarization": {},
    "trajectory_accuracy_llm": {},
}
CODE = {
    "completeness": {},
    "keyword_coverage": {"keywords": ["refund"]},
    "content_similarity": {},
    "textual_difference": {},
    "tone_consistency": {},
    "tool_call_accuracy": {"expected_tool": "search"},
    "trajectory_accuracy": {"expected_trajectory": ["search", "answer"]},
}
QUICK = {
    "includes": {"text": "refund"},
    "excludes": {"text": ["secret"]},
    "matches": {"pattern": r"\d+"},
    "called_tool": {"tool_name": "search"},
    "did_not_call": {"tool_name": "delete"},
    "max_tool_calls": {"max_calls": 3},
    "no_tool_errors": {},
    "non_empty_response": {},
    "equals": {"text": "Paris"},
    "similarity": {"text": "Paris", "threshold": 0.8},
    "tool_order": {"order": ["a", "b"]},
    "used_no_tools": {},
}


def binding(**data: Any) -> ScorerBinding:
    data.setdefault("id", "s")
    return ScorerBinding.model_validate(data)


def build_one(defaults: JudgeSettings = DEFAULTS, **data: Any) -> BoundScorer:
    (bound,) = build_bindings([binding(**data)], defaults)
    return bound


def error_of(defaults: JudgeSettings = DEFAULTS, **data: Any) -> str:
    with pytest.raises(BindingError) as err:
        build_bindings([binding(**data)], defaults)
    assert isinstance(err.value, ValueError)
    return str(err.value)


# -- the prebuilt table --------------------------------------------------------------------------
def test_prebuilt_table_covers_every_factory() -> None:
    assert set(PREBUILT) == set(LLM) | set(CODE) | set(QUICK)
    factories = {getattr(prebuilt_module, n) for n in prebuilt_module.__all__ if n.startswith("create_")}
    assert set(PREBUILT.values()) == factories
    for name, factory in PREBUILT.items():
        assert factory.__name__ in (f"create_{name}_scorer", f"create_{name}_check")
        params = inspect.signature(factory).parameters
        assert ("model" in params) == (name in LLM), name
        assert ("id" in params) == (name in QUICK), name


@pytest.mark.parametrize("name", sorted(LLM) + sorted(CODE) + sorted(QUICK))
def test_every_prebuilt_builds_under_the_binding_id(name: str) -> None:
    options = {**LLM, **CODE, **QUICK}[name]
    bound = build_one(id=f"my-{name}", prebuilt=name, options=options)
    assert isinstance(bound.scorer, Scorer)
    assert bound.scorer.id == f"my-{name}"
    assert bound.uses_judge == (name in LLM)
    assert uses_judge(bound.scorer) == bound.uses_judge
    if name in LLM:
        assert bound.scorer.judge is not None and bound.scorer.judge.model == MODEL
    else:
        assert bound.scorer.judge is None


def test_fixed_id_prebuilt_keeps_its_id_and_name_when_they_agree() -> None:
    bound = build_one(id=MULTI_TURN_JUDGE_ID, prebuilt="multi_turn_judge", options={"criterion": "c"})
    assert bound.scorer.id == MULTI_TURN_JUDGE_ID
    assert bound.scorer.name == "Multi-turn Judge"


def test_fixed_id_prebuilt_is_renamed_so_it_can_be_bound_twice() -> None:
    bound = build_bindings(
        [
            binding(id=MULTI_TURN_JUDGE_ID, prebuilt="multi_turn_judge", options={"criterion": "a"}),
            binding(
                id="refunds-resolved", prebuilt="multi_turn_judge", options={"criterion": "b"}, scope="conversation"
            ),
        ],
        DEFAULTS,
    )
    assert [b.scorer.id for b in bound] == [MULTI_TURN_JUDGE_ID, "refunds-resolved"]
    assert bound[1].scorer.name == "Multi-turn Judge"  # display name kept
    assert bound[1].scorer.steps == bound[0].scorer.steps
    assert bound[1].binding.scope == "conversation"
    registry = registry_from(bound)
    assert registry.get_scorer_by_id("refunds-resolved") is bound[1].scorer
    assert MULTI_TURN_JUDGE_ID in registry and len(registry) == 2


def test_quick_check_gets_the_binding_id() -> None:
    bound = build_one(id="mentions-refund", prebuilt="includes", options={"text": "refund"})
    assert bound.scorer.id == "mentions-refund"
    assert bound.scorer.name == "Includes"


async def test_built_quick_check_scores() -> None:
    from support.binding_runs import run

    bound = build_one(id="mentions-billing", prebuilt="includes", options={"text": "billing"})
    result = await bound.scorer.run(run())
    assert (result.scorer_id, result.score, result.status) == ("mentions-billing", 1.0, "ok")


# -- judge settings of prebuilt LLM scorers ------------------------------------------------------
def judge_of(bound: BoundScorer) -> Judge:
    assert bound.scorer.judge is not None
    return bound.scorer.judge


def test_llm_prebuilt_gets_the_judge_defaults() -> None:
    judge = judge_of(build_one(prebuilt="toxicity"))
    assert judge.model == MODEL
    assert dict(judge.options) == {"api_base": "http://judge.local/v1", "api_key": "sk-default", "timeout": 12.0}


def test_unset_defaults_are_not_passed() -> None:
    judge = judge_of(build_one(JudgeSettings(model="ollama/llama3"), prebuilt="bias"))
    assert judge.model == "ollama/llama3"
    assert dict(judge.options) == {"timeout": 60.0}


def test_empty_connection_settings_are_left_out() -> None:
    # `api_key: ${OPENAI_API_KEY:-}` expands to "": litellm must fall back to the environment
    empty = JudgeSettings(model=MODEL, api_base="", api_key="")
    assert dict(judge_of(build_one(empty, prebuilt="bias")).options) == {"timeout": 60.0}
    judge = judge_of(build_one(empty, id="politeness", python=f"{SAMPLES}:politeness"))
    assert dict(judge.options) == {"timeout": 60.0}


def test_model_from_options_over_defaults() -> None:
    judge = judge_of(
        build_one(prebuilt="bias", options={"model": "anthropic/claude-haiku-4-5", "api_base": "http://other/v1"})
    )
    assert judge.model == "anthropic/claude-haiku-4-5"
    assert judge.options["api_base"] == "http://other/v1"
    assert judge.options["api_key"] == "sk-default"


def test_binding_judge_over_options_and_defaults() -> None:
    judge = judge_of(
        build_one(
            prebuilt="multi_turn_judge",
            options={"criterion": "c", "model": "openai/from-options", "timeout": 5},
            judge={
                "model": "openai/gpt-4o",
                "api_key": "sk-binding",
                "timeout_s": 30,
                "temperature": 0,
                "max_tokens": 300,
            },
        )
    )
    assert judge.model == "openai/gpt-4o"
    assert dict(judge.options) == {
        "api_base": "http://judge.local/v1",
        "api_key": "sk-binding",
        "timeout": 30,
        "temperature": 0,
        "max_tokens": 300,
    }


def test_timeout_from_options_over_defaults() -> None:
    judge = judge_of(build_one(prebuilt="bias", options={"timeout": 5}))
    assert judge.options["timeout"] == 5


def test_judge_instructions_override_reaches_the_judge() -> None:
    judge = judge_of(build_one(prebuilt="bias", judge={"instructions": "Be terse."}))
    assert judge.instructions.startswith("Be terse.")


# -- errors of prebuilt bindings -----------------------------------------------------------------
def test_unknown_prebuilt_lists_valid_names() -> None:
    message = error_of(id="x", prebuilt="multiturn_judge")
    assert message.startswith(
        "scorers[0] (x): unknown prebuilt scorer 'multiturn_judge'; "
        "valid names: answer_relevancy, answer_similarity, bias, "
    )
    assert message.endswith(", trajectory_accuracy, trajectory_accuracy_llm, used_no_tools")
    assert all(name in message for name in PREBUILT)


@pytest.mark.parametrize("name", sorted(LLM))
def test_llm_prebuilt_without_any_model(name: str) -> None:
    message = error_of(NO_MODEL, id="judge-it", prebuilt=name, options=LLM[name])
    assert message == (
        f"scorers[0] (judge-it): prebuilt {name!r} is an LLM judge and needs a "
        "model: set judge.model on the binding, or the 'judge: model:' default "
        "(TRACESCORER_JUDGE_MODEL)"
    )


def test_llm_prebuilt_with_binding_model_needs_no_default() -> None:
    assert judge_of(build_one(NO_MODEL, prebuilt="bias", judge={"model": "openai/x"})).model == "openai/x"


def test_misspelt_option_says_what_was_meant_even_where_extra_options_go_to_the_judge() -> None:
    message = error_of(id="mt", prebuilt="multi_turn_judge", options={"criteria": "x"})
    assert message == (
        "scorers[0] (mt): prebuilt 'multi_turn_judge': unknown option 'criteria' (did you mean 'criterion'?); "
        "valid options: criterion, scale (and Judge/litellm options such as temperature)"
    )
    bound = build_one(id="mt", prebuilt="multi_turn_judge", options={"criterion": "x", "temperature": 0})
    assert judge_of(bound).options["temperature"] == 0  # a litellm option still reaches the judge


def test_unexpected_option_of_code_scorer_names_it_and_the_valid_ones() -> None:
    message = error_of(id="c", prebuilt="completeness", options={"scale": 1, "keywords": ["a"]})
    assert message == "scorers[0] (c): prebuilt 'completeness': unknown option 'keywords'; valid options: scale"
    assert error_of(id="c", prebuilt="completeness", options={"scael": 2}) == (
        "scorers[0] (c): prebuilt 'completeness': unknown option 'scael' (did you mean 'scale'?); valid options: scale"
    )


def test_missing_required_option() -> None:
    message = error_of(id="inc", prebuilt="includes")
    assert message == (
        "scorers[0] (inc): prebuilt 'includes' needs option 'text' (under options:); "
        "valid options: text, case_sensitive, match_all, scale"
    )


def test_invalid_option_value_gives_the_value_error() -> None:
    assert error_of(id="mt", prebuilt="multi_turn_judge", options={"criterion": " "}) == (
        "scorers[0] (mt): bad options for prebuilt 'multi_turn_judge': criterion must be a non-empty string"
    )
    assert error_of(id="m", prebuilt="matches", options={"pattern": "("}) == (
        "scorers[0] (m): bad options for prebuilt 'matches': invalid regular expression: "
        "missing ), unterminated subpattern at position 0"
    )


def test_bad_judge_option_is_reported() -> None:
    message = error_of(id="b", prebuilt="bias", judge={"num_retries": 3})
    assert message.startswith("scorers[0] (b): bad options for prebuilt 'bias': Judge option num_retries=3")


def test_options_id_of_quick_check_is_refused() -> None:
    assert error_of(id="inc", prebuilt="includes", options={"text": "a", "id": "other"}) == (
        "scorers[0] (inc): options.id is not allowed: the binding id is the scorer id"
    )


def test_judge_on_code_prebuilt_is_refused() -> None:
    assert error_of(id="ne", prebuilt="non_empty_response", judge={"model": "openai/x"}) == (
        "scorers[0] (ne): 'judge' is set but prebuilt 'non_empty_response' is a code scorer that uses no judge"
    )


@pytest.mark.parametrize("key", ["max_concurrency", "requests_per_minute", "daily_budget_usd"])
def test_global_judge_limits_are_refused_per_binding(key: str) -> None:
    own = f", or limits.{key} for this binding alone" if key != "max_concurrency" else ""
    assert error_of(id="b", prebuilt="bias", judge={key: 1}) == (
        f"scorers[0] (b): judge.{key} is a global limit: set it in the 'judge:' section{own}"
    )


def test_error_index_counts_disabled_bindings_and_disabled_are_skipped() -> None:
    bindings = [
        binding(id="off", prebuilt="no_such_thing", enabled=False),
        binding(id="ok", prebuilt="no_tool_errors"),
        binding(id="bad", prebuilt="includes"),
    ]
    with pytest.raises(BindingError, match=re.escape("scorers[2] (bad): prebuilt 'includes' needs option 'text'")):
        build_bindings(bindings, DEFAULTS)
    bound = build_bindings(bindings[:2], DEFAULTS)
    assert [b.binding.id for b in bound] == ["ok"]
    assert build_bindings([], DEFAULTS) == []


def test_bound_scorer_keeps_the_binding() -> None:
    b = binding(
        id="e",
        prebuilt="excludes",
        options={"text": "x"},
        threshold=1,
        sampling={"ratio": 0.25},
        filter={"agent_name": "a*"},
    )
    (bound,) = build_bindings([b], DEFAULTS)
    assert bound.binding is b
    assert bound.binding.filter == RunFilter(agent_name="a*")
    with pytest.raises(AttributeError):
        bound.uses_judge = True  # type: ignore[misc]


# -- python bindings -----------------------------------------------------------------------------
def samples() -> Any:
    # the module object build_bindings imports (pytest imports this package under another name)
    return importlib.import_module(SAMPLES)


def test_python_scorer_instance() -> None:
    quality = samples().quality
    bound = build_one(id="quality", python=f"{SAMPLES}:quality")
    assert bound.scorer.id == "quality"
    assert bound.scorer is quality
    assert not bound.uses_judge


def test_python_dotted_attribute() -> None:
    assert build_one(id="quality", python=f"{SAMPLES}:Holder.inner").scorer.id == "quality"


def test_python_factory_called_with_options() -> None:
    from support.binding_runs import run

    bound = build_one(id="length", python=f"{SAMPLES}:make_length", options={"max_chars": 5})
    assert bound.scorer.id == "length"
    assert bound.scorer.run_sync(run(answer="a long answer")).score == 0.0
    default = build_one(id="length", python=f"{SAMPLES}:make_length")
    assert default.scorer.run_sync(run(answer="a long answer")).score == 1.0


def test_python_id_mismatch() -> None:
    assert error_of(id="my-quality", python=f"{SAMPLES}:quality") == (
        f"scorers[0] (my-quality): '{SAMPLES}:quality' has id 'quality'; a python scorer's id "
        "must equal the binding id (set id: quality)"
    )


@pytest.mark.parametrize(
    "spec, message",
    [
        ("no_colon_here", "python: 'no_colon_here' is not of the form 'package.module:attribute'"),
        (f"{SAMPLES}:", f"python: '{SAMPLES}:' is not of the form 'package.module:attribute'"),
        (":quality", "python: ':quality' is not of the form 'package.module:attribute'"),
        (
            "nonexistent_pkg_xyz.scorers:quality",
            "cannot import module 'nonexistent_pkg_xyz.scorers': ModuleNotFoundError: No module named "
            "'nonexistent_pkg_xyz' (is it installed, or on PYTHONPATH?)",
        ),
        (
            "unit.scoring_bindings.broken_module:x",
            "cannot import module 'unit.scoring_bindings.broken_module': ImportError: missing optional "
            "dependency 'numpy'",
        ),
        (f"{SAMPLES}:missing", f"module '{SAMPLES}' has no attribute 'missing'"),
        (f"{SAMPLES}:Holder.missing", f"module '{SAMPLES}' has no attribute 'Holder.missing'"),
        (f"{SAMPLES}:not_a_scorer", f"'{SAMPLES}:not_a_scorer' is int, not a Scorer or a function returning one"),
        (f"{SAMPLES}:returns_text", f"'{SAMPLES}:returns_text' returned str, not a Scorer"),
        (f"{SAMPLES}:raises", f"calling '{SAMPLES}:raises' failed: RuntimeError: no database configured"),
    ],
)
def test_python_errors(spec: str, message: str) -> None:
    assert error_of(id="user", python=spec) == f"scorers[0] (user): {message}"


def test_python_factory_bad_options() -> None:
    message = error_of(id="length", python=f"{SAMPLES}:make_length", options={"max": 5})
    assert message == f"scorers[0] (length): '{SAMPLES}:make_length': unknown option 'max'; valid options: max_chars"


def test_python_instance_with_options_is_refused() -> None:
    assert error_of(id="quality", python=f"{SAMPLES}:quality", options={"a": 1}) == (
        f"scorers[0] (quality): '{SAMPLES}:quality' is a Scorer instance: 'options' need a "
        "function that returns a scorer"
    )


def test_python_llm_scorer_without_model_gets_the_defaults() -> None:
    bound = build_one(id="politeness", python=f"{SAMPLES}:politeness")
    assert bound.uses_judge
    judge = judge_of(bound)
    assert judge.model == MODEL
    assert dict(judge.options) == {"timeout": 12.0, "api_base": "http://judge.local/v1", "api_key": "sk-default"}


def test_python_llm_scorer_without_any_model_is_an_error() -> None:
    assert error_of(NO_MODEL, id="politeness", python=f"{SAMPLES}:politeness") == (
        "scorers[0] (politeness): the scorer has a prompt step without a judge model: set "
        "judge.model on the binding, or the 'judge: model:' default (TRACESCORER_JUDGE_MODEL)"
    )


def test_python_llm_scorer_model_from_binding_judge() -> None:
    judge = judge_of(
        build_one(
            NO_MODEL, id="politeness", python=f"{SAMPLES}:politeness", judge={"model": "openai/x", "timeout_s": 9}
        )
    )
    assert judge.model == "openai/x"
    assert dict(judge.options) == {"timeout": 9}


def test_python_scorer_with_own_judge_is_left_alone() -> None:
    own_judge, step_judge = samples().own_judge, samples().step_judge
    bound = build_one(id="own-judge", python=f"{SAMPLES}:own_judge")
    assert bound.uses_judge and bound.scorer is own_judge
    bound = build_one(NO_MODEL, id="step-judge", python=f"{SAMPLES}:step_judge")
    assert bound.uses_judge and bound.scorer is step_judge and bound.scorer.judge is None


def test_python_scorer_own_judge_with_binding_overrides() -> None:
    judge = judge_of(
        build_one(id="own-judge", python=f"{SAMPLES}:own_judge", judge={"temperature": 0.5, "api_base": "http://x/v1"})
    )
    assert judge.model == "anthropic/claude-haiku-4-5"
    assert dict(judge.options) == {"temperature": 0.5, "api_base": "http://x/v1"}


def test_python_bad_judge_settings() -> None:
    message = error_of(id="own-judge", python=f"{SAMPLES}:own_judge", judge={"max_retries": 2})
    assert message.startswith("scorers[0] (own-judge): bad judge settings: Judge option max_retries=2")


def test_python_code_scorer_with_judge_is_refused() -> None:
    assert error_of(id="quality", python=f"{SAMPLES}:quality", judge={"model": "openai/x"}) == (
        "scorers[0] (quality): 'judge' is set but the scorer has no prompt step that uses a judge"
    )


# -- registry ------------------------------------------------------------------------------------
def test_registry_from_holds_exactly_the_bound_ids() -> None:
    bound = build_bindings(
        [
            binding(id="quality", python=f"{SAMPLES}:quality"),
            binding(id="a", prebuilt="no_tool_errors"),
            binding(id="b", prebuilt="bias", enabled=False),
        ],
        DEFAULTS,
    )
    registry = registry_from(bound)
    assert sorted(s.id for s in registry) == ["a", "quality"]
    assert "b" not in registry
    assert registry.get_scorer_by_id("a") is bound[1].scorer
    assert len(registry_from([])) == 0


def test_registry_from_refuses_duplicate_ids() -> None:
    bound = build_bindings([binding(id="a", prebuilt="no_tool_errors")], DEFAULTS)
    other = build_bindings([binding(id="a", prebuilt="non_empty_response")], DEFAULTS)
    with pytest.raises(ValueError, match="already registered"):
        registry_from([*bound, *other])
