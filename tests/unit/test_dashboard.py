"""config/grafana-dashboard.json must only use metrics (and labels) the daemon really exports."""

from __future__ import annotations

import json
import re
import typing
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.metrics import MetricWrapperBase
from prometheus_client.parser import text_string_to_metric_families

from tracescorer.export import ExportOutcome
from tracescorer.metrics import Metrics
from tracescorer.scoring import runner

DASHBOARD = Path(__file__).resolve().parents[2] / "config" / "grafana-dashboard.json"

_METRIC = re.compile(r"\btracescorer_[a-zA-Z0-9_:]*")
# label matchers inside {...}: name op "value"
_MATCHER = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"')
_SELECTOR = re.compile(r"\{([^{}]*)\}")
_GROUPING = re.compile(r"\b(?:by|without)\s*\(([^)]*)\)")
# labels Prometheus adds when scraping, and the histogram bucket label
_EXTERNAL_LABELS = {"instance", "job", "le"}


def _dashboard() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return data


def _panels(panels: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for panel in panels:
        out.append(panel)
        out.extend(_panels(panel.get("panels", [])))  # collapsed rows nest their panels
    return out


def _exprs(dashboard: dict[str, Any]) -> list[str]:
    exprs = [t["expr"] for p in _panels(dashboard["panels"]) for t in p.get("targets", []) if t.get("expr")]
    for var in dashboard.get("templating", {}).get("list", []):
        query = var.get("query")
        if isinstance(query, dict):
            query = query.get("query")
        if var.get("type") == "query" and isinstance(query, str):
            exprs.append(query)
    return exprs


def _exported() -> dict[str, set[str]]:
    """Every sample name ``Metrics().render()`` exposes, with its label names, after each
    labelled metric was touched once (an untouched labelled metric exposes no samples)."""
    metrics = Metrics()
    for value in vars(metrics).values():
        if isinstance(value, MetricWrapperBase) and value._labelnames:  # noqa: SLF001 - introspection
            value.labels(*("x" for _ in value._labelnames))  # noqa: SLF001
    names: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(metrics.render().decode()):
        for sample in family.samples:
            names.setdefault(sample.name, set()).update(sample.labels)
    return names


# label values the code emits for enumerated labels the dashboard filters on
_KNOWN_VALUES: dict[str, set[str]] = {
    "decision": {runner.SCORED, runner.SAMPLED_OUT, runner.FILTERED_OUT, runner.NOT_SCORABLE,
                 runner.RATE_LIMITED, runner.BUDGET_EXHAUSTED, runner.FAILED},
    "result": set(typing.get_args(ExportOutcome)),
    "status": {"ok", "error", "not_scorable"},
    "signal": {"traces", "logs"},
    "pool": {"judge", "code"},
    "direction": {"input", "output"},
}


def test_dashboard_is_a_grafana_dashboard_with_a_prometheus_input() -> None:
    dashboard = _dashboard()
    assert dashboard["schemaVersion"] >= 36
    assert [i["name"] for i in dashboard["__inputs"]] == ["DS_PROMETHEUS"]
    assert dashboard["__inputs"][0]["pluginId"] == "prometheus"
    ids = [p["id"] for p in _panels(dashboard["panels"])]
    assert len(ids) == len(set(ids)), "panel ids must be unique"
    for panel in _panels(dashboard["panels"]):
        if panel["type"] == "row":
            continue
        assert panel["datasource"]["uid"] == "${DS_PROMETHEUS}", panel["title"]
        assert panel.get("targets"), f"panel {panel['title']!r} has no query"
        for target in panel["targets"]:
            assert _METRIC.search(target["expr"]), f"{panel['title']!r}: no tracescorer metric in {target['expr']!r}"


def test_every_metric_in_the_dashboard_is_exported() -> None:
    exported = _exported()
    used = {name for expr in _exprs(_dashboard()) for name in _METRIC.findall(expr)}
    assert used, "no metric names found in the dashboard"
    missing = sorted(used - exported.keys())
    assert not missing, f"dashboard uses metrics the daemon does not export: {missing}"


def test_dashboard_covers_every_metric_family() -> None:
    """Each metric of Metrics appears on the dashboard (as itself, _total, _bucket...)."""
    used = {name for expr in _exprs(_dashboard()) for name in _METRIC.findall(expr)}
    families = {f.name for f in Metrics().registry.collect()}
    unused = sorted(f for f in families if not any(u == f or u.startswith(f + "_") for u in used))
    assert not unused, f"metrics missing from the dashboard: {unused}"


@pytest.mark.parametrize("expr", _exprs(_dashboard()))
def test_labels_used_by_each_query_exist(expr: str) -> None:
    exported = _exported()
    metrics = _METRIC.findall(expr)
    available = set().union(*(exported.get(m, set()) for m in metrics)) | _EXTERNAL_LABELS
    labels: set[str] = set()
    for group in _GROUPING.findall(expr):
        labels.update(label.strip() for label in group.split(",") if label.strip())
    for selector in _SELECTOR.findall(expr):
        for name, op, value in _MATCHER.findall(selector):
            labels.add(name)
            if name in _KNOWN_VALUES and not value.startswith("$"):
                values = set(value.split("|")) if op in ("=~", "!~") else {value}
                unknown = values - _KNOWN_VALUES[name]
                assert not unknown, f"{expr!r}: {name} values {sorted(unknown)} are never emitted"
    unknown_labels = sorted(labels - available)
    assert not unknown_labels, f"{expr!r}: labels {unknown_labels} are not on {metrics}"
