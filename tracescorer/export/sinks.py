"""Building the configured sinks, each under a stable id.

A sink's id names its rows in ``score_deliveries``, so it must not change between restarts:
it is the sink's ``name`` when given, else its kind (``otlp``, ``otlp_logs``, ``phoenix``,
``mlflow``), with ``#2``, ``#3``, ... for the second, third, ... sink of the same kind in list
order. Without ``export.sinks`` the one sink is ``otlp``, configured by ``export.endpoint``,
``protocol`` and ``headers`` (or the ``OTEL_EXPORTER_OTLP_*`` variables).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from tracescorer.config import (
    ConfigError,
    ExportSettings,
    MlflowSinkSettings,
    OtlpSinkSettings,
    PhoenixSinkSettings,
)
from tracescorer.export.mlflow import MlflowSink
from tracescorer.export.otlp import OtlpSpanSink
from tracescorer.export.otlp_logs import OtlpLogSink, SpansAndLogRecords
from tracescorer.export.otlp_transport import OtlpTarget, resolve_target
from tracescorer.export.phoenix import PhoenixSink
from tracescorer.export.sink import ScoreExporter

__all__ = ["NamedSink", "SinkPlan", "build_sinks", "sink_ids", "sink_keys"]


@dataclass(frozen=True, slots=True)
class NamedSink:
    id: str
    sink: ScoreExporter


@dataclass(frozen=True, slots=True)
class SinkPlan:
    """What :meth:`EvaluationExporter.apply` makes of a reloaded ``export`` section: its settings,
    its sink ids in order, those running already whose settings are unchanged, the new ones built."""

    settings: ExportSettings
    ids: list[str]
    kept: set[str]
    built: list[NamedSink]


def sink_ids(settings: ExportSettings) -> list[tuple[str, str]]:
    """``(id, kind)`` of every configured sink, in config order (raises ConfigError on a clash)."""
    if not settings.sinks:
        return [("otlp", "otlp")]
    seen: dict[str, int] = {}
    ids: list[tuple[str, str]] = []
    for entry in settings.sinks:
        kind = entry.kind
        seen[kind] = seen.get(kind, 0) + 1
        ids.append((entry.settings.name or (kind if seen[kind] == 1 else f"{kind}#{seen[kind]}"), kind))
    names = [i for i, _ in ids]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ConfigError(f"export.sinks: duplicate sink name(s) {', '.join(duplicates)} (give each a distinct name)")
    return ids


def sink_keys(settings: ExportSettings) -> dict[str, str]:
    """Each sink's id and what it is built from (a reload keeps a sink whose key is unchanged)."""
    if not settings.sinks:
        legacy = settings.model_dump(mode="json", include={"endpoint", "protocol", "headers", "timeout_s"})
        return {"otlp": repr(sorted(legacy.items()))}
    entries = [(e.model_dump_json(), settings.timeout_s) for e in settings.sinks]
    return {sink_id: repr(entry) for (sink_id, _), entry in zip(sink_ids(settings), entries, strict=True)}


def _otlp(kind: str, s: OtlpSinkSettings, default_timeout_s: float) -> ScoreExporter:
    def target(signal: Literal["traces", "logs"]) -> OtlpTarget:
        return resolve_target(
            signal,
            endpoint=s.endpoint,
            protocol=s.protocol,
            headers=s.headers,
            timeout_s=s.timeout_s or default_timeout_s,
            compression=s.compression,
        )

    if kind == "otlp_logs":
        return OtlpLogSink(target("logs"))
    if s.log_records:  # each score as an evaluation span and as a log record
        return SpansAndLogRecords(target("traces"), target("logs"), span_events=s.span_events)
    return OtlpSpanSink(target("traces"), span_events=s.span_events)


def build_sinks(settings: ExportSettings) -> list[NamedSink]:
    """Every configured sink (raises ConfigError on bad settings or environment)."""
    ids = sink_ids(settings)
    if not settings.sinks:
        legacy = OtlpSinkSettings(endpoint=settings.endpoint, protocol=settings.protocol, headers=settings.headers)
        return [NamedSink("otlp", _otlp("otlp", legacy, settings.timeout_s))]
    out: list[NamedSink] = []
    for (sink_id, kind), entry in zip(ids, settings.sinks, strict=False):
        s = entry.settings
        timeout_s = s.timeout_s or settings.timeout_s
        sink: ScoreExporter
        if isinstance(s, OtlpSinkSettings):
            sink = _otlp(kind, s, settings.timeout_s)
        elif isinstance(s, PhoenixSinkSettings):
            sink = PhoenixSink(s.endpoint, api_key=s.api_key, headers=s.headers, timeout_s=timeout_s)
        else:
            assert isinstance(s, MlflowSinkSettings)
            sink = MlflowSink(
                s.tracking_uri, experiment_id=s.experiment_id, token=s.token, headers=s.headers, timeout_s=timeout_s
            )
        out.append(NamedSink(sink_id, sink))
    return out


def describe(sinks: Sequence[NamedSink]) -> str:
    return ", ".join(f"{n.id} ({n.sink.kind})" for n in sinks)
