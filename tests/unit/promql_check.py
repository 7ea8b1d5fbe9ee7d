"""Offline checks of PromQL shipped in config/ (dashboards, alert rules) against what the daemon
really exports: every expression parses (promql-parser, the Rust PromQL parser's Python
binding), every selector names an exported sample, every label it matches, groups or joins on
exists on those metrics, and enumerated label values are ones the code emits."""

from __future__ import annotations

import re
import typing
from typing import Any

import promql_parser as pq
from prometheus_client.metrics import MetricWrapperBase
from prometheus_client.parser import text_string_to_metric_families

from tracescorer.export import ExportOutcome
from tracescorer.metrics import Metrics
from tracescorer.records.monitors import NOTIFY_RESULTS, STATES
from tracescorer.runner.decider import Decision

# labels Prometheus adds when scraping, and the histogram bucket label
EXTERNAL_LABELS = {"instance", "job", "le"}

# label values the code emits for enumerated labels that queries filter on
KNOWN_VALUES: dict[str, set[str]] = {
    "decision": {str(d) for d in Decision if d is not Decision.RUN},  # RUN is never stored
    # export results, and monitor notification results
    "result": set(typing.get_args(ExportOutcome)) | set(NOTIFY_RESULTS),
    "status": {"ok", "error", "not_scorable"},
    "label": {"pass", "fail", "none"},
    "state": set(STATES),
    "channel": {"webhook", "slack"},
    "signal": {"traces", "logs"},
    "pool": {"judge", "code"},
    "direction": {"input", "output"},
}

# Grafana's template variables that stand for a duration in a range selector
_DURATION_VARS = re.compile(r"\$(__rate_interval|__interval|__range|window)\b|\$\{(window)\}")
_LABEL_VALUES = re.compile(
    r"^\s*label_values\(\s*(?:([a-zA-Z_:][a-zA-Z0-9_:]*)\s*,\s*)?([a-zA-Z_][a-zA-Z0-9_]*)\s*\)\s*$"
)


def exported() -> dict[str, set[str]]:
    """Every sample name ``Metrics().render()`` exposes, with its label names, after each
    labelled metric was touched once (an untouched labelled metric exposes no samples) and a
    worker process told its metrics (the per-worker families have samples only then)."""
    metrics = Metrics()
    metrics.absorb("w0", Metrics().snapshot())
    for value in vars(metrics).values():
        if isinstance(value, MetricWrapperBase) and value._labelnames:  # introspection
            value.labels(*("x" for _ in value._labelnames))
    names: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(metrics.render().decode()):
        for sample in family.samples:
            names.setdefault(sample.name, set()).update(sample.labels)
    return names


def families() -> set[str]:
    return {f.name for f in Metrics().registry.collect()}


def parse(expr: str) -> Any:
    """Parse a PromQL expression (Grafana duration variables replaced by a real duration)."""
    return pq.parse(_DURATION_VARS.sub("5m", expr))


def selectors(node: Any) -> list[Any]:
    found: list[Any] = []

    def visit(n: Any) -> None:
        if isinstance(n, pq.VectorSelector):
            found.append(n)

    pq.walk(node, pre_visit=visit)
    return found


def metric_names(expr: str) -> set[str]:
    m = _LABEL_VALUES.match(expr)
    if m:
        return {m.group(1)} if m.group(1) else set()
    return {s.name for s in selectors(parse(expr)) if s.name}


def _modifier_labels(node: Any) -> list[str]:
    labels: list[str] = []

    def visit(n: Any) -> None:
        if isinstance(n, pq.AggregateExpr) and n.modifier is not None:
            labels.extend(n.modifier.labels)
        if isinstance(n, pq.BinaryExpr) and n.modifier is not None:
            if n.modifier.matching is not None:
                labels.extend(n.modifier.matching.labels)
            labels.extend(n.modifier.group_labels or [])

    pq.walk(node, pre_visit=visit)
    return labels


def problems(expr: str, available: dict[str, set[str]] | None = None) -> list[str]:
    """What is wrong with ``expr`` (empty when nothing is)."""
    available = exported() if available is None else available
    m = _LABEL_VALUES.match(expr)
    if m:  # a Grafana variable query, not PromQL
        metric, label = m.group(1), m.group(2)
        if metric is None:
            return [] if label in EXTERNAL_LABELS else [f"label_values({label}) without a metric"]
        if metric not in available:
            return [f"{metric} is not exported"]
        return [] if label in available[metric] | EXTERNAL_LABELS else [f"{metric} has no label {label}"]
    try:
        tree = parse(expr)
    except ValueError as exc:
        return [f"does not parse: {exc}"]
    out: list[str] = []
    all_labels = set(EXTERNAL_LABELS)
    for sel in selectors(tree):
        if not sel.name:
            out.append(f"a selector without a metric name: {sel}")
            continue
        if sel.name not in available:
            out.append(f"{sel.name} is not exported")
            continue
        labels = available[sel.name] | EXTERNAL_LABELS
        all_labels |= labels
        for matcher in sel.matchers.matchers:
            if matcher.name not in labels:
                out.append(f"{sel.name} has no label {matcher.name}")
            known = KNOWN_VALUES.get(matcher.name)
            if known is None or "$" in matcher.value:
                continue
            regex = matcher.op in (pq.MatchOp.Re, pq.MatchOp.NotRe)
            values = set(matcher.value.split("|")) if regex else {matcher.value}
            unknown = values - known
            if unknown:
                out.append(f"{sel.name}: {matcher.name} values {sorted(unknown)} are never emitted")
    for label in _modifier_labels(tree):
        if label not in all_labels:
            out.append(f"grouping/matching on label {label!r}, which none of its metrics has")
    return out


def output_labels(expr: str) -> set[str]:
    """Labels an expression's result may carry: its outermost ``by`` labels, else its metrics'."""
    tree = parse(expr)
    while isinstance(tree, (pq.BinaryExpr, pq.ParenExpr)) or (
        isinstance(tree, pq.AggregateExpr) and str(tree.op) in ("topk", "bottomk")
    ):
        tree = tree.lhs if isinstance(tree, pq.BinaryExpr) else tree.expr
    if isinstance(tree, pq.AggregateExpr):
        if tree.modifier is None:
            return set()
        if tree.modifier.type == pq.AggModifierType.By:
            return set(tree.modifier.labels)
    available = exported()
    labels = set(EXTERNAL_LABELS)
    for sel in selectors(tree):
        labels |= available.get(sel.name, set())
    return labels
