"""The Grafana dashboards in config/ must only use metrics (and labels) the daemon really exports,
and between them show every metric family."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from unit.promql_check import exported, families, metric_names, problems

CONFIG = Path(__file__).resolve().parents[2] / "config"
DASHBOARDS = {"daemon": CONFIG / "grafana-dashboard.json", "scores": CONFIG / "grafana-scores.json"}


def _dashboard(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(DASHBOARDS[name].read_text())
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


_ALL = [(name, expr) for name in DASHBOARDS for expr in _exprs(_dashboard(name))]


def _datasources(node: Any) -> list[dict[str, Any]]:
    if isinstance(node, dict):
        found = [node["datasource"]] if isinstance(node.get("datasource"), dict) else []
        return found + [d for value in node.values() for d in _datasources(value)]
    if isinstance(node, list):
        return [d for value in node for d in _datasources(value)]
    return []


@pytest.mark.parametrize("name", DASHBOARDS)
def test_dashboard_provisions_from_a_file_with_a_datasource_variable(name: str) -> None:
    """File provisioning does not fill ``__inputs`` (an import-only feature): every query names
    the ``datasource`` template variable instead, which provisioning and import both resolve."""
    dashboard = _dashboard(name)
    assert dashboard["schemaVersion"] >= 36
    assert "__inputs" not in dashboard and "${DS_" not in DASHBOARDS[name].read_text()
    variables = dashboard["templating"]["list"]
    assert variables[0]["name"] == "datasource"
    assert (variables[0]["type"], variables[0]["query"]) == ("datasource", "prometheus")
    used = [d for d in _datasources(dashboard) if d["type"] != "grafana"]  # the built-in annotations
    assert used and all(d == {"type": "prometheus", "uid": "${datasource}"} for d in used)
    ids = [p["id"] for p in _panels(dashboard["panels"])]
    assert len(ids) == len(set(ids)), "panel ids must be unique"
    for panel in _panels(dashboard["panels"]):
        if panel["type"] == "row":
            continue
        assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
        assert panel.get("targets"), f"panel {panel['title']!r} has no query"
        for target in panel["targets"]:
            assert metric_names(target["expr"]), f"{panel['title']!r}: no metric in {target['expr']!r}"
    required = {r["id"] for r in dashboard["__requires"] if r["type"] == "panel"}
    used = {p["type"] for p in _panels(dashboard["panels"]) if p["type"] != "row"}
    assert used <= required, f"panel types not declared in __requires: {sorted(used - required)}"


def test_dashboards_have_distinct_uids() -> None:
    uids = [_dashboard(name)["uid"] for name in DASHBOARDS]
    assert len(set(uids)) == len(uids)


def test_dashboards_together_cover_every_metric_family() -> None:
    """Each metric of Metrics appears on a dashboard (as itself, _total, _bucket...)."""
    used = {name for _, expr in _ALL for name in metric_names(expr)}
    unused = sorted(f for f in families() if not any(u == f or u.startswith(f + "_") for u in used))
    assert not unused, f"metrics on no dashboard: {unused}"


_EXPORTED = exported()


@pytest.mark.parametrize(("name", "expr"), _ALL)
def test_each_query_parses_and_uses_exported_metrics_and_labels(name: str, expr: str) -> None:
    assert problems(expr, _EXPORTED) == []
