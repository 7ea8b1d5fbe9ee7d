"""RunFilter: loading (validation) and evaluation of every clause, on runs and conversations."""

from __future__ import annotations

import re
from typing import Any

import pytest
from pydantic import ValidationError
from support.binding_runs import S, conversation, run

from tracescorer.config import ScorerBinding
from tracescorer.filters import RunFilter


def rf(**data: Any) -> RunFilter:
    return RunFilter.model_validate(data)


# -- loading -------------------------------------------------------------------------------------
def test_empty_filter_passes_everything() -> None:
    f = RunFilter()
    assert f.is_empty
    assert f.check(run()) is None
    assert f.check(conversation(run())) is None
    assert f.check(conversation()) is None
    assert not rf(status="ok").is_empty
    assert not rf(attributes={"a": 1}).is_empty


def test_unknown_key_is_an_error() -> None:
    with pytest.raises(ValidationError) as err:
        rf(agent="x")
    assert err.value.errors()[0]["loc"] == ("agent",)
    assert err.value.errors()[0]["type"] == "extra_forbidden"


@pytest.mark.parametrize("field", ["input_regex", "output_regex"])
def test_bad_message_regex_names_the_field(field: str) -> None:
    with pytest.raises(ValidationError) as err:
        rf(**{field: "refund("})
    error = err.value.errors()[0]
    assert error["loc"] == (field,)
    assert "invalid regular expression 'refund('" in error["msg"]


def test_bad_attribute_regex_names_the_attribute() -> None:
    with pytest.raises(ValidationError) as err:
        rf(attributes={"tenant": {"regex": "[a-"}})
    error = err.value.errors()[0]
    assert error["loc"] == ("attributes", "tenant", "regex")
    assert "invalid regular expression" in error["msg"]


@pytest.mark.parametrize(
    "cond, message",
    [
        ({"equals": 1, "exists": True}, "exactly one of 'equals', 'in', 'regex', 'exists' (got equals, exists)"),
        ({}, "exactly one of"),
        ({"contains": "x"}, "Extra inputs are not permitted"),
        (None, "null is not a condition; use {exists: false}"),
        (["a", "b"], "a list is not a condition; use {in: [...]}"),
    ],
)
def test_bad_attribute_conditions(cond: Any, message: str) -> None:
    with pytest.raises(ValidationError, match=re.escape(message)):
        rf(attributes={"tenant": cond})


@pytest.mark.parametrize(
    "data",
    [
        {"status": "failed"},
        {"min_duration_s": -1},
        {"max_duration_s": "long"},
        {"convention": "otel"},
        {"convention": ["genai", "otel"]},
        {"agent_name": []},
        {"service_name": 3},
        {"has_conversation": "maybe"},
        {"attributes": ["tenant"]},
    ],
)
def test_bad_values_name_the_field(data: dict[str, Any]) -> None:
    (field,) = data
    with pytest.raises(ValidationError) as err:
        rf(**data)
    assert {e["loc"][0] for e in err.value.errors()} == {field}


def test_min_above_max_is_an_error() -> None:
    with pytest.raises(ValidationError, match="min_duration_s is greater than max_duration_s"):
        rf(min_duration_s=5, max_duration_s=1)


def test_binding_filter_is_a_run_filter_and_round_trips() -> None:
    data = {
        "id": "x",
        "prebuilt": "includes",
        "filter": {
            "agent_name": ["support-*", "sales"],
            "input_regex": "(?i)refund",
            "attributes": {
                "tenant": {"in": ["acme", "b"]},
                "tier": 2,
                "region": {"regex": "^eu-"},
                "beta": {"exists": False},
            },
        },
    }
    binding = ScorerBinding.model_validate(data)
    assert isinstance(binding.filter, RunFilter)
    dumped = binding.model_dump(mode="json")
    assert dumped["filter"]["attributes"]["tenant"]["in"] == ["acme", "b"]
    assert ScorerBinding.model_validate(dumped) == binding
    assert ScorerBinding.model_validate({"id": "y", "prebuilt": "includes"}).filter.is_empty
    with pytest.raises(ValidationError) as err:
        ScorerBinding.model_validate({**data, "filter": {"output_regex": "("}})
    assert err.value.errors()[0]["loc"] == ("filter", "output_regex")


# -- agent_name / service_name -----------------------------------------------------------------
def test_agent_name_glob() -> None:
    assert rf(agent_name="support-*").check(run()) is None
    assert rf(agent_name="support-bo?").check(run()) is None
    assert (
        rf(agent_name="support-*").check(run(agent_name="billing")) == "agent_name 'billing' does not match 'support-*'"
    )
    # fnmatchcase: case-sensitive on every OS
    assert rf(agent_name="Support-*").check(run()) == "agent_name 'support-bot' does not match 'Support-*'"


def test_agent_name_list() -> None:
    f = rf(agent_name=["billing", "support-*"])
    assert f.check(run()) is None
    assert f.check(run(agent_name="billing")) is None
    assert f.check(run(agent_name="sales")) == "agent_name 'sales' does not match any of ['billing', 'support-*']"


def test_agent_name_missing() -> None:
    assert rf(agent_name="*").check(run(agent_name=None)) == "agent_name is not set; does not match '*'"


def test_agent_name_on_conversation_any_run() -> None:
    conv = conversation(run(agent_name="router"), run(run_id="r2", agent_name="support-bot"))
    assert rf(agent_name="support-*").check(conv) is None
    conv = conversation(
        run(agent_name="router"), run(run_id="r2", agent_name="billing"), run(run_id="r3", agent_name="router")
    )
    assert (
        rf(agent_name="support-*").check(conv)
        == "agent_name (of its runs) ['router', 'billing'] does not match 'support-*'"
    )
    assert (
        rf(agent_name="support-*").check(conversation(run(agent_name="x")))
        == "agent_name 'x' does not match 'support-*'"
    )
    assert rf(agent_name="*").check(conversation()) == "agent_name is not set; does not match '*'"


def test_service_name() -> None:
    assert rf(service_name="help*").check(run()) is None
    assert rf(service_name=["a", "helpdesk"]).check(run()) is None
    assert rf(service_name="shop").check(run()) == "service_name 'helpdesk' does not match 'shop'"
    assert rf(service_name="shop").check(run(service_name=None)) == "service_name is not set; does not match 'shop'"
    conv = conversation(run(service_name="gateway"), run(run_id="r2", service_name="shop"))
    assert rf(service_name="shop").check(conv) is None
    assert rf(service_name="x*").check(conv) == "service_name (of its runs) ['gateway', 'shop'] does not match 'x*'"


# -- convention ----------------------------------------------------------------------------------
def test_convention() -> None:
    assert rf(convention="genai").check(run()) is None
    assert rf(convention=["vercel", "genai"]).check(run()) is None
    assert rf(convention="mastra").check(run()) == "convention 'genai' is not 'mastra'"
    assert rf(convention=["mastra", "vercel"]).check(run()) == "convention 'genai' is not one of ['mastra', 'vercel']"
    conv = conversation(run(), run(run_id="r2", convention="openinference"))
    assert rf(convention="openinference").check(conv) is None
    assert rf(convention="mastra").check(conv) == "convention (of its runs) ['genai', 'openinference'] is not 'mastra'"


# -- has_conversation ----------------------------------------------------------------------------
def test_has_conversation() -> None:
    assert rf(has_conversation=True).check(run()) is None
    assert rf(has_conversation=False).check(run(conversation_id=None)) is None
    assert (
        rf(has_conversation=True).check(run(conversation_id=None)) == "has_conversation: the run has no conversation id"
    )
    assert rf(has_conversation=False).check(run()) == "has_conversation: the run belongs to conversation 'c1'"
    assert rf(has_conversation=True).check(conversation(run())) is None
    assert rf(has_conversation=False).check(conversation(run())) == "has_conversation: the target is a conversation"


# -- status --------------------------------------------------------------------------------------
def test_status_run() -> None:
    assert rf(status="ok").check(run()) is None
    assert rf(status="error").check(run(status="error")) is None
    assert rf(status="ok").check(run(status="error")) == "status 'error' is not 'ok'"
    assert rf(status="error").check(run()) == "status 'ok' is not 'error'"


def test_status_conversation_errors_if_any_run_errored() -> None:
    conv = conversation(run(), run(run_id="r2", status="error"), run(run_id="r3"))
    assert rf(status="error").check(conv) is None
    assert rf(status="ok").check(conv) == "status 'error' is not 'ok' (1 of 3 run(s) errored)"
    ok = conversation(run(), run(run_id="r2"))
    assert rf(status="ok").check(ok) is None
    assert rf(status="error").check(ok) == "status 'ok' is not 'error' (no run errored)"


# -- duration ------------------------------------------------------------------------------------
def test_duration_run() -> None:
    r = run(duration_s=2.5)
    assert rf(min_duration_s=2.5, max_duration_s=2.5).check(r) is None
    assert rf(min_duration_s=1).check(r) is None
    assert rf(max_duration_s=10).check(r) is None
    assert rf(min_duration_s=3).check(r) == "duration 2.5s is below min_duration_s 3"
    assert rf(max_duration_s=0.5).check(r) == "duration 2.5s is above max_duration_s 0.5"


def test_duration_conversation_first_start_to_last_end() -> None:
    conv = conversation(
        run(started_at=100 * S, duration_s=1),
        run(run_id="r2", started_at=160 * S, duration_s=4),
        run(run_id="r3", started_at=130 * S, duration_s=1),
    )
    assert rf(min_duration_s=64, max_duration_s=64).check(conv) is None
    assert rf(max_duration_s=60).check(conv) == "duration 64s is above max_duration_s 60"
    assert rf(min_duration_s=65).check(conv) == "duration 64s is below min_duration_s 65"
    assert rf(min_duration_s=1).check(conversation()) == "duration unknown: the conversation has no runs"


# -- attributes ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "cond, failure",
    [
        ("acme", None),
        ("other", "attributes.tenant: 'acme' != 'other'"),
        ({"equals": "acme"}, None),
        ({"equals": "ACME"}, "attributes.tenant: 'acme' != 'ACME'"),
        ({"in": ["a", "acme"]}, None),
        ({"in": ["a", "b"]}, "attributes.tenant: 'acme' not in ['a', 'b']"),
        ({"regex": "^ac"}, None),
        ({"regex": "(?i)^AC"}, None),
        ({"regex": "^me"}, "attributes.tenant: 'acme' does not match /^me/"),
        ({"exists": True}, None),
        ({"exists": False}, "attributes.tenant: present ('acme'), expected absent"),
    ],
)
def test_attribute_string_conditions(cond: Any, failure: str | None) -> None:
    assert rf(attributes={"tenant": cond}).check(run()) == failure


@pytest.mark.parametrize("cond", ["acme", {"equals": "x"}, {"in": ["acme"]}, {"regex": "."}, {"exists": True}])
def test_attribute_missing(cond: Any) -> None:
    assert rf(attributes={"region": cond}).check(run()) == "attributes.region: missing"


def test_attribute_exists_false_passes_when_missing() -> None:
    assert rf(attributes={"region": {"exists": False}}).check(run()) is None


def test_attribute_types_are_compared_strictly() -> None:
    r = run(attributes={"tier": 2, "beta": True, "ratio": 0.5, "codes": [1, 2]})
    assert rf(attributes={"tier": 2}).check(r) is None
    assert rf(attributes={"tier": 2.0}).check(r) is None  # numbers compare numerically
    assert rf(attributes={"tier": "2"}).check(r) == "attributes.tier: 2 != '2'"
    assert rf(attributes={"beta": True}).check(r) is None
    assert rf(attributes={"beta": 1}).check(r) == "attributes.beta: True != 1"
    assert rf(attributes={"tier": {"in": [1, 2]}}).check(r) is None
    assert rf(attributes={"tier": {"in": [True]}}).check(r) == "attributes.tier: 2 not in [True]"
    assert rf(attributes={"ratio": {"regex": r"^0\.5$"}}).check(r) is None  # str(value)
    assert rf(attributes={"codes": {"regex": r"\[1, 2\]"}}).check(r) is None
    assert rf(attributes={"beta": {"regex": "^True$"}}).check(r) is None


def test_attributes_all_must_hold_first_failure_reported() -> None:
    f = rf(attributes={"tenant": "acme", "tier": {"in": [3, 4]}, "region": "eu"})
    assert f.check(run()) == "attributes.tier: 2 not in [3, 4]"


def test_attributes_on_conversation_any_run() -> None:
    conv = conversation(run(attributes={"tenant": "a"}), run(run_id="r2", attributes={}))
    assert rf(attributes={"tenant": "a"}).check(conv) is None
    assert rf(attributes={"tenant": {"exists": False}}).check(conv) is None  # r2 has none
    assert (
        rf(attributes={"tenant": {"in": ["x", "y"]}}).check(conv)
        == "attributes.tenant: no run satisfies it ('a' not in ['x', 'y']; missing)"
    )
    same = conversation(run(attributes={"t": 1}), run(run_id="r2", attributes={"t": 1}))
    assert rf(attributes={"t": 2}).check(same) == "attributes.t: no run satisfies it (1 != 2)"
    assert rf(attributes={"t": 2}).check(conversation()) == "attributes.t: the conversation has no runs"


def test_attribute_clauses_satisfied_by_different_runs() -> None:
    conv = conversation(run(attributes={"a": 1}), run(run_id="r2", attributes={"b": 2}))
    assert rf(attributes={"a": 1, "b": 2}).check(conv) is None


# -- message regexes -----------------------------------------------------------------------------
def test_input_regex_run_only_user_turns() -> None:
    r = run()
    assert rf(input_regex="refund").check(r) is None
    assert rf(input_regex="(?i)REFUND").check(r) is None
    assert rf(input_regex="^How").check(r) is None
    assert rf(input_regex="Billing").check(r) == "input_regex: no input message matches /Billing/"
    # history and system messages are not the run's input
    assert rf(input_regex="HISTORY").check(r) == "input_regex: no input message matches /HISTORY/"
    assert rf(input_regex="SYSTEM").check(r) == "input_regex: no input message matches /SYSTEM/"
    assert rf(input_regex="x").check(run(user="")) == "input_regex: no input message has text to match /x/"


def test_input_regex_matches_any_message() -> None:
    r = run(user=("first question", "second: refund please"))
    assert rf(input_regex="^second").check(r) is None


def test_output_regex_run() -> None:
    r = run(answer=("", "Open Settings > Billing."))
    assert rf(output_regex=r"Settings > Billing\.$").check(r) is None
    assert rf(output_regex="refund").check(r) == "output_regex: no output message matches /refund/"
    assert rf(output_regex="x").check(run(answer="")) == "output_regex: no output message has text to match /x/"


def test_message_regexes_on_conversation() -> None:
    conv = conversation(
        run(user="hello", answer="Hi, how can I help?"),
        run(run_id="r2", user="refund my order", answer="Done: refund issued."),
    )
    assert rf(input_regex="^refund").check(conv) is None
    assert rf(input_regex="^hello$").check(conv) is None
    assert rf(output_regex="^Done").check(conv) is None
    assert rf(output_regex="help").check(conv) is None
    assert rf(input_regex="HISTORY").check(conv) == "input_regex: no input message matches /HISTORY/"
    assert rf(output_regex="sorry").check(conv) == "output_regex: no output message matches /sorry/"
    assert rf(input_regex="refund").check(conversation()) == (
        "input_regex: no input message has text to match /refund/"
    )


# -- combination ---------------------------------------------------------------------------------
def test_first_failing_clause_is_reported_in_order() -> None:
    f = rf(
        agent_name="support-*", status="ok", attributes={"tenant": "acme"}, input_regex="refund", output_regex="Billing"
    )
    assert f.check(run()) is None
    assert f.matches(run())
    bad = run(agent_name="billing", status="error", attributes={}, user="hi", answer="no")
    assert f.check(bad) == "agent_name 'billing' does not match 'support-*'"
    assert not f.matches(bad)
    assert f.check(run(status="error", attributes={})) == "status 'error' is not 'ok'"
    assert f.check(run(attributes={}, user="hi")) == "attributes.tenant: missing"
    assert f.check(run(user="hi", answer="no")) == "input_regex: no input message matches /refund/"
    assert f.check(run(answer="no")) == "output_regex: no output message matches /Billing/"


def test_filters_compare_by_value() -> None:
    a = rf(agent_name="x", attributes={"t": {"regex": "a"}}, input_regex="b")
    b = rf(agent_name="x", attributes={"t": {"regex": "a"}}, input_regex="b")
    assert a == b
    assert a != rf(agent_name="y")
