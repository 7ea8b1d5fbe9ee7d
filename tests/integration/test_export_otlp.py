"""Scores exported as OTLP evaluation spans: real DuckDB file, real SDK exporters, real servers."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from fakes.otlp_capture import CapturedSpan, OtlpCapture
from tracescorer.config import ConfigError, ExportSettings
from tracescorer.export import EvaluationExporter, ScoreRow, build_evaluation_spans
from tracescorer.export.otlp import default_resource
from support import store_ops
from support.db import fetch
from tracescorer.store.duckdb import DuckDBStore

TRANSPORTS = ["grpc", "http"]


# --- fixtures and helpers ------------------------------------------------------------------------


@pytest.fixture
def capture() -> Iterator[OtlpCapture]:
    with OtlpCapture() as server:
        yield server


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[DuckDBStore]:
    db = DuckDBStore(tmp_path / "x.duckdb")
    await db.open()
    yield db
    await db.close()


class Outcomes:
    """An ExportObserver recording every call."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int, float]] = []

    def on_export(self, outcome: str, spans: int, seconds: float) -> None:
        self.calls.append((outcome, spans, seconds))

    def count(self, outcome: str) -> int:
        return sum(n for o, n, _ in self.calls if o == outcome)


Factory = Callable[..., EvaluationExporter]


@pytest.fixture
async def make_exporter(store: DuckDBStore, capture: OtlpCapture) -> AsyncIterator[Factory]:
    made: list[EvaluationExporter] = []

    def make(transport: str = "grpc", *, exporter: SpanExporter | None = None, observer: Any = None, **overrides: Any) -> EvaluationExporter:
        fields: dict[str, Any] = {
            "enabled": True,
            "protocol": "grpc" if transport == "grpc" else "http/protobuf",
            "endpoint": capture.grpc_endpoint if transport == "grpc" else capture.http_base_url,
            "timeout_s": 0.5,  # the SDK exporter's own retry backs off >= 0.8s: a failure returns at once
            "batch_size": 100,
            "interval_s": 60.0,
            "retry_initial_s": 0.05,
            "retry_max_s": 0.2,
        }
        fields.update(overrides)
        ex = EvaluationExporter(store, ExportSettings(**fields), exporter=exporter, observer=observer)
        made.append(ex)
        return ex

    yield make
    for ex in made:
        await ex.shutdown(5)


def hex_id(nbytes: int) -> str:
    return os.urandom(nbytes).hex()


async def insert_score(store: DuckDBStore, **values: Any) -> dict[str, Any]:
    """Insert one ``scores`` row (created_at = updated_at = now()); returns its values."""
    row: dict[str, Any] = {
        "id": f"score-{hex_id(4)}",
        "scorer_id": "helpfulness",
        "scorer_name": "Helpfulness",
        "run_id": f"run-{hex_id(4)}",
        "trace_id": hex_id(16),
        "span_id": hex_id(8),
        "conversation_id": None,
        "entity_type": "agent",
        "entity_id": "support",
        "source": "live",
        "score": 0.75,
        "reason": "Answered every question.",
        "status": "ok",
        "error": None,
        "error_type": None,
        "label": None,
        "threshold": None,
        "judge_cost_usd": None,
        "duration_ms": 12.5,
    }
    row.update(values)
    cols = list(row)
    sql = f"INSERT INTO scores ({', '.join(cols)}, created_at, updated_at) VALUES ({', '.join('?' for _ in cols)}, now(), now())"
    params = [row[c] for c in cols]
    await store.write(store_ops.execute, sql, params)
    return row


async def rescore(store: DuckDBStore, score_id: str, score: float) -> None:
    """What a re-score does to a row: new values and a later updated_at (exported_at left alone)."""
    await store.write(store_ops.execute, "UPDATE scores SET score = ?, updated_at = now() WHERE id = ?", [score, score_id])


async def export_state(store: DuckDBStore) -> dict[str, str]:
    """Per score id: 'exported' (exported_at >= updated_at), 'stale' (older) or 'pending' (NULL)."""

    rows = await fetch(store, "SELECT id, CASE WHEN exported_at IS NULL THEN 'pending' WHEN exported_at >= updated_at "
                              "THEN 'exported' ELSE 'stale' END FROM scores")
    return dict(rows)


def by_score(spans: Sequence[CapturedSpan]) -> dict[str, CapturedSpan]:
    return {s.attributes["tracescorer.score.id"]: s for s in spans}


class Tap(SpanExporter):
    """Delegates to a real exporter, recording batches and shutdown; ``before_export`` hooks in."""

    def __init__(self, inner: SpanExporter | None, before_export: Callable[[], None] | None = None) -> None:
        self.inner = inner
        self.before_export = before_export
        self.batches: list[int] = []
        self.shutdowns = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.batches.append(len(spans))
        if self.before_export is not None:
            self.before_export()
        if self.inner is None:
            raise RuntimeError("exporter exploded")
        return self.inner.export(spans)

    def shutdown(self) -> None:
        self.shutdowns += 1
        if self.inner is not None:
            self.inner.shutdown()


# --- the spans -------------------------------------------------------------------------------------


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_evaluation_spans_join_the_scored_trace(
    transport: str, store: DuckDBStore, capture: OtlpCapture, make_exporter: Factory
) -> None:
    ok = await insert_score(store, scorer_id="multi-turn-judge", score=1.0, label="pass", threshold=1.0,
                            judge_cost_usd=0.0021, conversation_id="conv-7", entity_type="conversation")
    failed = await insert_score(store, scorer_id="tool-accuracy", score=None, reason=None, status="error",
                                error="judge timed out after 60s", error_type="judge_timeout")
    untyped = await insert_score(store, scorer_id="tone", score=None, reason=None, status="error", error="boom")
    skipped = await insert_score(store, scorer_id="answer-length", score=None, reason="no output", status="not_scorable")
    outcomes = Outcomes()
    exporter = make_exporter(transport, observer=outcomes, headers={"x-api-key": "k-123"})
    await exporter.start()

    assert await exporter.force_flush(5)

    spans = by_score(await capture.await_spans(4))
    assert len(capture.spans()) == 4
    assert {e.transport for e in capture.exports} == {transport}
    assert all(e.headers.get("x-api-key") == "k-123" for e in capture.exports)
    for row in (ok, failed, untyped, skipped):
        span = spans[row["id"]]
        assert span.name == f"evaluate {row['scorer_id']}"
        assert span.kind == 1  # INTERNAL
        assert span.trace_id == row["trace_id"]
        assert span.parent_span_id == row["span_id"]
        assert [(link.trace_id, link.span_id) for link in span.links] == [(row["trace_id"], row["span_id"])]
        assert span.span_id not in (row["span_id"], "0" * 16)
        assert span.resource["service.name"] == "tracescorer"
        assert span.scope_name == "tracescorer.export"
        assert span.end_time_unix_nano - span.start_time_unix_nano == int(row["duration_ms"] * 1e6)
        [event] = span.events
        assert event.name == "gen_ai.evaluation.result"
        assert event.attributes == span.attributes
        assert event.time_unix_nano == span.end_time_unix_nano

    assert spans[ok["id"]].attributes == {
        "gen_ai.evaluation.name": "multi-turn-judge",
        "gen_ai.evaluation.score.value": 1.0,
        "gen_ai.evaluation.score.label": "pass",
        "gen_ai.evaluation.explanation": "Answered every question.",
        "gen_ai.conversation.id": "conv-7",
        "tracescorer.scorer.id": "multi-turn-judge",
        "tracescorer.run.id": ok["run_id"],
        "tracescorer.judge.cost_usd": 0.0021,
        "tracescorer.score.id": ok["id"],
        "tracescorer.score.status": "ok",
    }
    assert spans[ok["id"]].status_code == 0  # UNSET

    assert spans[failed["id"]].attributes == {
        "gen_ai.evaluation.name": "tool-accuracy",
        "error.type": "judge_timeout",
        "tracescorer.scorer.id": "tool-accuracy",
        "tracescorer.run.id": failed["run_id"],
        "tracescorer.score.id": failed["id"],
        "tracescorer.score.status": "error",
    }
    assert (spans[failed["id"]].status_code, spans[failed["id"]].status_message) == (2, "judge timed out after 60s")
    assert spans[untyped["id"]].attributes["error.type"] == "scorer_error"
    assert spans[untyped["id"]].status_code == 2

    assert "error.type" not in spans[skipped["id"]].attributes
    assert "gen_ai.evaluation.score.value" not in spans[skipped["id"]].attributes
    assert spans[skipped["id"]].attributes["tracescorer.score.status"] == "not_scorable"
    assert spans[skipped["id"]].attributes["gen_ai.evaluation.explanation"] == "no output"

    assert set((await export_state(store)).values()) == {"exported"}
    assert outcomes.count("exported") == 4 and outcomes.count("failed") == 0
    # nothing pending: a second flush sends nothing
    assert await exporter.force_flush(5)
    assert len(capture.exports) == 1


async def test_rescored_row_is_exported_again(store: DuckDBStore, capture: OtlpCapture, make_exporter: Factory) -> None:
    row = await insert_score(store, score=0.2)
    exporter = make_exporter()
    await exporter.start()
    assert await exporter.force_flush(5)
    [first] = await capture.await_spans(1)

    await rescore(store, row["id"], 0.9)
    assert (await export_state(store))[row["id"]] == "stale"
    assert await exporter.force_flush(5)

    first_again, second = await capture.await_spans(2)
    assert first_again == first
    assert second.attributes["gen_ai.evaluation.score.value"] == 0.9
    assert second.span_id != first.span_id  # a new score version is a new span ...
    assert (second.trace_id, second.parent_span_id) == (first.trace_id, first.parent_span_id)  # ... in the same place
    assert (await export_state(store))[row["id"]] == "exported"


async def test_row_rescored_during_export_stays_pending(
    store: DuckDBStore, capture: OtlpCapture, make_exporter: Factory
) -> None:
    row = await insert_score(store, score=0.1)
    once = [True]
    loop = asyncio.get_running_loop()

    def rescore_now() -> None:  # runs in the export thread, between read and mark
        if once:
            once.clear()
            asyncio.run_coroutine_threadsafe(rescore(store, row["id"], 0.5), loop).result()

    grpc_only = make_exporter()  # only to borrow a real SDK exporter built from settings
    exporter = make_exporter(exporter=Tap(grpc_only.span_exporter, before_export=rescore_now))
    await exporter.start()

    assert await exporter.force_flush(5)
    values = [s.attributes["gen_ai.evaluation.score.value"] for s in await capture.await_spans(2)]
    assert values == [0.1, 0.5]  # the old version was sent, not marked; the new one followed
    assert (await export_state(store))[row["id"]] == "exported"


def test_span_ids_are_deterministic_per_score_version() -> None:
    resource = default_resource()
    base = ScoreRow(id="s-1", scorer_id="x", run_id=None, trace_id=hex_id(16), span_id=hex_id(8),
                    conversation_id=None, score=1.0, reason=None, status="ok", error=None, error_type=None,
                    label=None, judge_cost_usd=None, duration_ms=None, updated_at_us=1_700_000_000_000_000)
    [a], [b] = build_evaluation_spans([base], resource), build_evaluation_spans([base], resource)
    assert a.context is not None and b.context is not None
    assert a.context.span_id == b.context.span_id
    assert a.start_time == a.end_time == base.updated_at_us * 1000
    later = ScoreRow(**{**{f: getattr(base, f) for f in base.__dataclass_fields__}, "updated_at_us": base.updated_at_us + 1})
    [c] = build_evaluation_spans([later], resource)
    assert c.context is not None and c.context.span_id != a.context.span_id

    # a score without a scored span (should not happen) still exports, as a trace of its own
    orphan = ScoreRow(**{**{f: getattr(base, f) for f in base.__dataclass_fields__}, "trace_id": None, "span_id": "zz"})
    [o1], [o2] = build_evaluation_spans([orphan], resource), build_evaluation_spans([orphan], resource)
    assert o1.parent is None and list(o1.links) == []
    assert o1.context is not None and o2.context is not None and o1.context.trace_id == o2.context.trace_id


# --- failures and retries --------------------------------------------------------------------------


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_failed_export_leaves_rows_pending_and_a_later_attempt_succeeds(
    transport: str, store: DuckDBStore, capture: OtlpCapture, make_exporter: Factory
) -> None:
    row = await insert_score(store)
    outcomes = Outcomes()
    exporter = make_exporter(transport, observer=outcomes)
    await exporter.start()
    capture.fail_next(1)

    assert not await exporter.force_flush(5)
    assert [e.failed for e in capture.exports] == [True]
    assert capture.spans() == []
    assert (await export_state(store))[row["id"]] == "pending"
    assert outcomes.count("failed") == 1

    assert await exporter.force_flush(5)
    [span] = await capture.await_spans(1)
    assert span.attributes["tracescorer.score.id"] == row["id"]
    assert (await export_state(store))[row["id"]] == "exported"
    assert (outcomes.count("failed"), outcomes.count("exported")) == (1, 1)


async def test_loop_retries_with_backoff_until_the_backend_recovers(
    store: DuckDBStore, capture: OtlpCapture, make_exporter: Factory
) -> None:
    outcomes = Outcomes()
    exporter = make_exporter(observer=outcomes, batch_size=1)
    await exporter.start()
    capture.fail_next(2)
    row = await insert_score(store)
    exporter.notify()

    [span] = await capture.await_spans(1, timeout_s=10)
    assert span.attributes["tracescorer.score.id"] == row["id"]
    assert [e.failed for e in capture.exports] == [True, True, False]
    assert await exporter.force_flush(5)  # waits for the loop's pass to finish (mark + observer)
    assert [o for o, _, _ in outcomes.calls] == ["failed", "failed", "exported"]
    assert (await export_state(store))[row["id"]] == "exported"


async def test_an_exporter_that_raises_does_not_raise_into_the_caller(
    store: DuckDBStore, make_exporter: Factory
) -> None:
    row = await insert_score(store)
    outcomes = Outcomes()
    tap = Tap(None)
    exporter = make_exporter(exporter=tap, observer=outcomes)
    await exporter.start()
    assert not await exporter.force_flush(5)
    assert tap.batches == [1]
    assert outcomes.count("failed") == 1
    assert (await export_state(store))[row["id"]] == "pending"
    assert not await exporter.shutdown(1)  # the drain at shutdown fails too; still no exception
    assert tap.shutdowns == 1


# --- batching lifecycle (BatchSpanProcessor cases) ---------------------------------------------------


async def test_export_on_size(store: DuckDBStore, capture: OtlpCapture, make_exporter: Factory) -> None:
    exporter = make_exporter(batch_size=3, interval_s=60)  # the timer never fires within this test
    await exporter.start()
    rows = [await insert_score(store) for _ in range(3)]
    exporter.notify(2)
    exporter.notify(1)

    spans = await capture.await_spans(3, timeout_s=10)
    assert {s.attributes["tracescorer.score.id"] for s in spans} == {r["id"] for r in rows}
    assert len(capture.exports) == 1


async def test_batches_are_at_most_batch_size(store: DuckDBStore, capture: OtlpCapture, make_exporter: Factory) -> None:
    rows = [await insert_score(store) for _ in range(7)]
    exporter = make_exporter(batch_size=3)
    await exporter.start()
    assert await exporter.force_flush(5)
    assert [len(e.request.resource_spans[0].scope_spans[0].spans) for e in capture.exports] == [3, 3, 1]
    assert {s.attributes["tracescorer.score.id"] for s in capture.spans()} == {r["id"] for r in rows}


async def test_export_on_timer_including_rows_left_from_before_start(
    store: DuckDBStore, capture: OtlpCapture, make_exporter: Factory
) -> None:
    left_over = await insert_score(store)  # e.g. written before a restart, never exported
    exporter = make_exporter(batch_size=100, interval_s=0.1)
    await exporter.start()
    [first] = await capture.await_spans(1)
    assert first.attributes["tracescorer.score.id"] == left_over["id"]

    fresh = await insert_score(store)
    exporter.notify()  # far below batch_size: the timer sends it
    second = (await capture.await_spans(2))[1]
    assert second.attributes["tracescorer.score.id"] == fresh["id"]


async def test_force_flush_drains_everything_pending(
    store: DuckDBStore, capture: OtlpCapture, make_exporter: Factory
) -> None:
    exporter = make_exporter(batch_size=100, interval_s=60)
    await exporter.start()
    rows = [await insert_score(store) for _ in range(5)]
    exporter.notify(5)
    assert await exporter.force_flush(5)
    assert len(capture.spans()) == 5
    assert set((await export_state(store)).values()) == {"exported"}
    assert {s.attributes["tracescorer.score.id"] for s in capture.spans()} == {r["id"] for r in rows}


async def test_shutdown_drains_pending_then_exports_nothing(
    store: DuckDBStore, capture: OtlpCapture, make_exporter: Factory
) -> None:
    inner = make_exporter().span_exporter
    tap = Tap(inner)
    exporter = make_exporter(exporter=tap, batch_size=100, interval_s=60)
    await exporter.start()
    rows = [await insert_score(store) for _ in range(2)]
    exporter.notify(2)

    assert await exporter.shutdown(5)
    assert {s.attributes["tracescorer.score.id"] for s in capture.spans()} == {r["id"] for r in rows}
    assert tap.shutdowns == 1
    requests = len(capture.exports)

    late = await insert_score(store)
    exporter.notify(1000)
    await exporter.start()
    assert not await exporter.force_flush(1)
    assert await exporter.shutdown(1)  # idempotent
    assert len(capture.exports) == requests and tap.batches == [2]
    assert (await export_state(store))[late["id"]] == "pending"
    assert tap.shutdowns == 1


async def test_shutdown_before_start_still_drains(store: DuckDBStore, capture: OtlpCapture, make_exporter: Factory) -> None:
    row = await insert_score(store)
    exporter = make_exporter()
    assert await exporter.shutdown(5)
    [span] = capture.spans()
    assert span.attributes["tracescorer.score.id"] == row["id"]


# --- configuration -------------------------------------------------------------------------------


async def test_disabled_export_builds_nothing_and_sends_nothing(
    store: DuckDBStore, capture: OtlpCapture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", capture.grpc_endpoint)
    await insert_score(store)
    exporter = EvaluationExporter(store, ExportSettings())
    assert not exporter.enabled and exporter.span_exporter is None
    await exporter.start()
    exporter.notify(1000)
    assert await exporter.force_flush(1)
    assert await exporter.shutdown(1)
    assert capture.exports == []
    assert set((await export_state(store)).values()) == {"pending"}


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_configured_from_otel_environment_variables(
    transport: str, store: DuckDBStore, capture: OtlpCapture, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_HEADERS"):
        monkeypatch.delenv(name, raising=False)
    if transport == "grpc":
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", capture.grpc_endpoint)
        monkeypatch.delenv("OTEL_EXPORTER_OTLP_PROTOCOL", raising=False)  # grpc is the default
    else:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", capture.http_base_url)
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-tenant=acme")
    monkeypatch.setenv("OTEL_SERVICE_NAME", "scores-prod")
    row = await insert_score(store)

    exporter = EvaluationExporter(store, ExportSettings(enabled=True, timeout_s=5))
    try:
        await exporter.start()
        assert await exporter.force_flush(5)
    finally:
        await exporter.shutdown(5)

    [span] = capture.spans()
    assert span.transport == transport
    assert span.attributes["tracescorer.score.id"] == row["id"]
    assert span.resource["service.name"] == "scores-prod"
    assert capture.exports[0].headers.get("x-tenant") == "acme"


def test_unsupported_protocol_in_environment_is_a_config_error(
    store: DuckDBStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", raising=False)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")
    with pytest.raises(ConfigError, match="OTEL_EXPORTER_OTLP_PROTOCOL"):
        EvaluationExporter(store, ExportSettings(enabled=True))


async def test_http_endpoint_may_be_the_full_traces_url(
    store: DuckDBStore, capture: OtlpCapture, make_exporter: Factory
) -> None:
    await insert_score(store)
    exporter = make_exporter("http", endpoint=capture.http_endpoint)
    assert await exporter.force_flush(5)
    assert [s.transport for s in capture.spans()] == ["http"]
