"""config/prometheus-alerts.yaml, checked offline the way `promtool check rules` would (structure,
durations, label names, templates, expressions parse) and against the daemon's metrics (every
expression uses exported metrics and labels; templates only use labels the alert carries)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import promql_parser as pq
import pytest
import yaml
from unit.promql_check import exported, metric_names, output_labels, parse, problems

RULES = Path(__file__).resolve().parents[2] / "config" / "prometheus-alerts.yaml"
RUNBOOK = Path(__file__).resolve().parents[2] / "docs" / "runbook.md"
RUNBOOK_BASE = "https://runbooks.example.internal/tracescorer#"
# series Prometheus itself writes for each scrape, with their labels
SCRAPE_SERIES = {"up": {"job", "instance"}}

_GROUP_KEYS = {"name", "interval", "rules", "limit", "query_offset", "labels"}
_RULE_KEYS = {"alert", "record", "expr", "for", "keep_firing_for", "labels", "annotations"}
_LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
_METRIC_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
_TEMPLATE = re.compile(r"\{\{(.*?)\}\}", re.S)
_TEMPLATE_FUNCS = {
    "humanize",
    "humanize1024",
    "humanizeDuration",
    "humanizePercentage",
    "humanizeTimestamp",
    "printf",
    "title",
    "toUpper",
    "toLower",
    "reReplaceAll",
    "safeHtml",
    "first",
    "value",
    "label",
}


def _rules_file() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(RULES.read_text())
    return data


def _rules() -> list[dict[str, Any]]:
    return [rule for group in _rules_file()["groups"] for rule in group["rules"]]


def _duration(value: str) -> float:
    return pq.parse_duration(value).total_seconds()


def test_file_structure_like_promtool() -> None:
    data = _rules_file()
    assert set(data) == {"groups"}
    names = [g["name"] for g in data["groups"]]
    assert all(names) and len(names) == len(set(names)), "group names must be unique and non-empty"
    for group in data["groups"]:
        assert set(group) <= _GROUP_KEYS, f"unknown keys in group {group['name']}: {set(group) - _GROUP_KEYS}"
        if "interval" in group:
            assert _duration(group["interval"]) > 0
        assert group["rules"], f"group {group['name']} has no rules"
        alerts = [r.get("alert") for r in group["rules"] if "alert" in r]
        assert len(alerts) == len(set(alerts)), f"duplicate alert in {group['name']}"
        for rule in group["rules"]:
            assert set(rule) <= _RULE_KEYS, f"unknown keys {set(rule) - _RULE_KEYS} in {rule}"
            assert ("alert" in rule) != ("record" in rule), f"exactly one of alert/record: {rule}"
            assert isinstance(rule.get("expr"), str) and rule["expr"].strip()
            if "record" in rule:
                assert _METRIC_NAME.match(rule["record"]), rule["record"]
                assert not {"for", "keep_firing_for", "annotations"} & set(rule), "record rules take no for/annotations"
            else:
                assert _LABEL_NAME.match(rule["alert"]), rule["alert"]
            for key in ("for", "keep_firing_for"):
                if key in rule:
                    assert _duration(rule[key]) >= 0
            for name, value in {**rule.get("labels", {}), **rule.get("annotations", {})}.items():
                assert _LABEL_NAME.match(name) and not name.startswith("__"), name
                assert isinstance(value, str), f"{name}: values must be strings"


@pytest.mark.parametrize("rule", _rules(), ids=lambda r: r.get("alert") or r.get("record"))
def test_expression_parses_and_uses_exported_metrics(rule: dict[str, Any]) -> None:
    assert problems(rule["expr"], {**_EXPORTED, **SCRAPE_SERIES}) == []
    tree = parse(rule["expr"])
    assert not isinstance(tree, (pq.MatrixSelector, pq.StringLiteral)), "an alert must evaluate to a vector"
    assert metric_names(rule["expr"]), "no tracescorer metric in the expression"


@pytest.mark.parametrize("rule", [r for r in _rules() if "alert" in r], ids=lambda r: r["alert"])
def test_alerts_are_routable_and_their_templates_use_labels_they_carry(rule: dict[str, Any]) -> None:
    assert rule.get("labels", {}).get("severity") in {"critical", "warning", "info"}
    assert rule.get("annotations", {}).get("summary"), "an alert needs a summary"
    carried = output_labels(rule["expr"]) | set(rule.get("labels", {}))
    for text in rule["annotations"].values():
        assert text.count("{{") == text.count("}}"), f"unbalanced template in {text!r}"
        for body in _TEMPLATE.findall(text):
            for label in re.findall(r"\$labels\.([a-zA-Z_][a-zA-Z0-9_]*)", body):
                assert label in carried, (
                    f"{rule['alert']}: template uses $labels.{label}, the alert has {sorted(carried)}"
                )
            for func in re.findall(r"\|\s*([a-zA-Z0-9_]+)", body):
                assert func in _TEMPLATE_FUNCS, f"unknown template function {func}"
            assert re.fullmatch(r"\s*(\$labels\.[a-zA-Z_]\w*|\$value|\$externalLabels\.\w+)(\s*\|\s*\w+)*\s*", body), (
                f"unexpected template {body!r}"
            )


def _uses(rule: dict[str, Any], metric: str, matcher: str | None = None) -> bool:
    expr = rule["expr"]
    return metric in metric_names(expr) and (matcher is None or matcher in expr)


def test_the_rules_cover_what_operators_need() -> None:
    rules = _rules()
    wanted = {
        "pass rate of a scorer under a threshold": ("tracescorer_score_results_total", 'label="pass"'),
        "judge-call error rate": ("tracescorer_judge_calls_total", 'status="error"'),
        "scoring lag": ("tracescorer_scoring_queue_depth", None),
        "export failures": ("tracescorer_export_spans_total", 'result="failed"'),
        "built-in monitors firing": ("tracescorer_monitor_state", 'state="firing"'),
    }
    missing = [what for what, (metric, matcher) in wanted.items() if not any(_uses(r, metric, matcher) for r in rules)]
    assert not missing, f"no alert for: {missing}"


def _alert(name: str) -> dict[str, Any]:
    return next(r for r in _rules() if r.get("alert") == name)


def test_daemon_down_and_not_ready_for_minutes_page() -> None:
    down = _alert("TracescorerDown")
    assert metric_names(down["expr"]) == {"up"} and "== 0" in down["expr"]
    assert down["labels"]["severity"] == "critical" and 60 <= _duration(down["for"]) <= 600
    # when every target is gone, `up` is absent rather than 0
    missing = _alert("TracescorerTargetMissing")
    assert isinstance(parse(missing["expr"]), pq.Call) and parse(missing["expr"]).func.name == "absent"
    assert metric_names(missing["expr"]) == {"up"} and missing["labels"]["severity"] == "critical"
    not_ready = _alert("TracescorerNotReady")
    assert metric_names(not_ready["expr"]) == {"tracescorer_ready"} and "== 0" in not_ready["expr"]
    assert _duration(not_ready["for"]) >= 120, "minutes, not one failed check"
    assert not_ready["labels"]["severity"] == "critical"


def _anchors(markdown: str) -> set[str]:
    """GitHub's heading anchors: lower case, spaces to dashes, punctuation dropped."""
    headings = re.findall(r"^#{1,6}\s+(.+?)\s*$", markdown, re.M)
    return {re.sub(r"[^\w\- ]", "", h).strip().lower().replace(" ", "-") for h in headings}


@pytest.mark.parametrize("rule", [r for r in _rules() if "alert" in r], ids=lambda r: r["alert"])
def test_every_alert_links_its_section_of_the_runbook(rule: dict[str, Any]) -> None:
    url = rule["annotations"].get("runbook_url", "")
    assert url.startswith(RUNBOOK_BASE), f"{rule['alert']}: runbook_url {url!r}"
    anchor = url.removeprefix(RUNBOOK_BASE)
    assert anchor == rule["alert"].lower()
    assert anchor in _anchors(RUNBOOK.read_text()), f"docs/runbook.md has no section {rule['alert']}"


def test_the_checker_catches_mistakes() -> None:
    """The checks above can fail: a wrong name, label, value or grouping is reported."""
    assert problems("sum(rate(tracescorer_score_result_total[5m]))", _EXPORTED)
    assert problems('tracescorer_score_results_total{agnet="x"}', _EXPORTED)
    assert problems('tracescorer_score_results_total{label="passed"}', _EXPORTED)
    assert problems("sum by (model) (tracescorer_score_results_total)", _EXPORTED)
    assert problems("sum(rate(tracescorer_scores_total[5m])", _EXPORTED)
    assert problems("{scorer='x'}", _EXPORTED)
    assert problems("label_values(tracescorer_score_results_total, nope)", _EXPORTED)


_EXPORTED = exported()
