"""config/scorers.example.yaml loads through load_settings and builds, and a bound LLM judge
reaches the judge configured by the `judge:` defaults."""

from __future__ import annotations

import sys
import types
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.binding_runs import conversation, run

from tests.fakes import FakeOpenAI
from tests.fakes.fake_openai import Reply
from tracescorer import create_scorer
from tracescorer.config import JudgeSettings, ScorerBinding, load_settings
from tracescorer.filters import RunFilter
from tracescorer.runner.bindings import build_bindings, registry_from

EXAMPLE = Path(__file__).resolve().parents[3] / "config" / "scorers.example.yaml"


@pytest.fixture
def user_module(monkeypatch: pytest.MonkeyPatch) -> None:
    """The example's `myteam.scorers` module, as a user would install it."""
    package, module = types.ModuleType("myteam"), types.ModuleType("myteam.scorers")
    module.refund_policy = create_scorer(id="refund-policy").generate_score(lambda *, run, results: 1.0)  # type: ignore[attr-defined]
    package.scorers = module  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "myteam", package)
    monkeypatch.setitem(sys.modules, "myteam.scorers", module)


def test_example_loads_and_builds(user_module: None) -> None:
    settings = load_settings(EXAMPLE, env={"TRACESCORER_JUDGE_MODEL": "openai/gpt-4o-mini"})
    ids = [b.id for b in settings.scorers]
    assert ids == [
        "multi-turn-judge-scorer",
        "refund-conversations-resolved",
        "no-tool-errors",
        "no-internal-ids-leaked",
        "answer-relevancy",
        "refund-policy",
        "toxicity",
    ]
    first = settings.scorers[0]
    assert (first.prebuilt, first.scope, first.sampling.ratio, first.threshold) == (
        "multi_turn_judge",
        "conversation",
        0.1,
        1,
    )
    assert first.filter == RunFilter(agent_name="support-*")
    assert {b.python for b in settings.scorers} >= {"myteam.scorers:refund_policy"}
    assert any(b.filter.attributes for b in settings.scorers)
    assert any(b.filter.input_regex for b in settings.scorers)

    # the example has no judge section: the model default comes from the caller here
    bound = build_bindings(settings.scorers, JudgeSettings(model="openai/gpt-4o-mini"))
    assert [b.scorer.id for b in bound] == ids[:-1]  # toxicity is disabled
    assert [b.uses_judge for b in bound] == [True, True, False, False, True, False]
    models = {b.scorer.id: b.scorer.judge.model for b in bound if b.scorer.judge is not None}
    assert models == {
        "multi-turn-judge-scorer": "openai/gpt-4o-mini",
        "refund-conversations-resolved": "openai/gpt-4o",
        "answer-relevancy": "openai/gpt-4o-mini",
    }
    assert len(registry_from(bound)) == 6


def test_example_filters_behave(user_module: None) -> None:
    settings = load_settings(EXAMPLE, env={})
    by_id = {b.id: b for b in settings.scorers}
    refunds = by_id["refund-conversations-resolved"].filter
    assert refunds.check(conversation(run(user="Can I get a REFUND?"))) is None
    assert refunds.check(conversation(run(user="hello"))) == (r"input_regex: no input message matches /(?i)\brefund/")
    relevancy = by_id["answer-relevancy"].filter
    prod = {"deployment.environment": "production", "tenant": "acme", "region": "eu-west-1"}
    assert relevancy.check(run(conversation_id=None, attributes=prod)) is None
    assert relevancy.check(run(conversation_id=None, attributes={**prod, "tenant": "x"})) == (
        "attributes.tenant: 'x' not in ['acme', 'globex']"
    )


def test_example_without_judge_model_names_the_binding(user_module: None) -> None:
    settings = load_settings(EXAMPLE, env={})
    with pytest.raises(
        ValueError,
        match=r"^scorers\[0\] \(multi-turn-judge-scorer\): prebuilt "
        r"'multi_turn_judge' is an LLM judge and needs a model",
    ):
        build_bindings(settings.scorers, settings.judge)


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    verdict = Reply.json({"satisfied": True, "reasoning": "All answered."})
    with FakeOpenAI(default=verdict) as server:
        yield server


async def test_bound_llm_judge_uses_the_judge_defaults(fake: FakeOpenAI) -> None:
    binding = ScorerBinding.model_validate(
        {
            "id": "answered-everything",
            "prebuilt": "multi_turn_judge",
            "scope": "conversation",
            "options": {"criterion": "The agent answered every question."},
        }
    )
    defaults = JudgeSettings(
        model="openai/fake-judge", api_base=fake.base_url, api_key="sk-from-defaults", timeout_s=10
    )
    (bound,) = build_bindings([binding], defaults)
    result = await bound.scorer.run(conversation(run(), run(run_id="r2", answer="Refund issued.")))
    assert (result.scorer_id, result.status, result.score) == ("answered-everything", "ok", 1.0)
    assert result.reason is not None and result.reason.startswith("Satisfied.")
    (request,) = fake.requests
    assert request.headers["Authorization"] == "Bearer sk-from-defaults"
    assert "Refund issued." in request.prompt_text
