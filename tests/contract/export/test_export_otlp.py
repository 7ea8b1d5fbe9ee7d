"""Scores exported as OTLP evaluation spans: real DuckDB file, real OTLP servers (gRPC and HTTP)."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import grpc
import pytest
from fakes.otlp_capture import CapturedSpan, OtlpCapture
from fakes.scores_db import delivery_states, eventually, exported_at, hex_id, insert_run, insert_score, rescore
from support.db import fetch

from tracescorer.config import ConfigError, ExportSettings
from tracescorer.export import EvaluationExporter, ItemResult, NamedSink, ScoreExporter, evaluation_span
from tracescorer.records.deliveries import DueScore
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
    await db.start()
    yield db
    await db.stop()


class Outcomes:
    """An ExportObserver recording every call."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int, float]] = []
        self.deliveries: list[tuple[str, str, int]] = []

    def on_export(self, outcome: str, count: int, seconds: float) -> None:
        self.calls.append((outcome, count, seconds))

    def on_delivery(self, sink: str, result: str, count: int) -> None:
        self.deliveries.append((sink, result, count))

    def count(self, outcome: str) -> int:
        return sum(n for o, n, _ in self.calls if o == outcome)


Factory = Callable[..., EvaluationExporter]


def otlp_sink_settings(capture: OtlpCapture, transport: str, **extra: Any) -> dict[str, Any]:
    return {
        "protocol": "grpc" if transport == "grpc" else "http/protobuf",
        "endpoint": capture.grpc_endpoint if transport == "grpc" else capture.http_base_url,
        **extra,
    }


@pytest.fixture
async def make_exporter(store: DuckDBStore, capture: OtlpCapture) -> AsyncIterator[Factory]:
    made: list[EvaluationExporter] = []

    def make(
        transport: str = "grpc",
        *,
        named: Sequence[NamedSink] | None = None,
        observer: Any = None,
        headers: dict[str, str] | None = None,
        **overrides: Any,
    ) -> EvaluationExporter:
        fields: dict[str, Any] = {
            "enabled": True,
            "sinks": [{"otlp": otlp_sink_settings(capture, transport, headers=headers or {})}],
            "timeout_s": 2.0,
            "batch_size": 100,
            "interval_s": 60.0,
            "retry_initial_s": 0.05,
            "retry_max_s": 0.2,
        }
        fields.update(overrides)
        ex = EvaluationExporter(store, ExportSettings(**fields), sinks=named, observer=observer)
        made.append(ex)
        return ex

    yield make
    for ex in made:
        await ex.stop(time.monotonic() + 5)


def by_score(spans: Sequence[CapturedSpan]) -> dict[str, CapturedSpan]:
    return {s.attributes["tracescorer.score.id"]: s for s in spans}


async def updated_at_us(store: DuckDBStore, score_id: str) -> int:
    (row,) = await fetch(store, "SELECT epoch_us(updated_at) FROM scores WHERE id = ?", score_id)
    return int(row[0])


class Tap:
    """A sink delegating to a real one, recording batches; ``before_export`` hooks in."""

    def __init__(self, inner: ScoreExporter | None, before_export: Callable[[], Any] | None = None) -> None:
        self.inner = inner
        self.before_export = before_export
        self.batches: list[int] = []
        self.shutdowns = 0
        self.kind = "otlp"

    async def export(self, batch: Sequence[DueScore]) -> Sequence[ItemResult]:
        self.batches.append(len(batch))
        if self.before_export is not None:
            await self.before_export()
        if self.inner is None:
            raise RuntimeError("exporter exploded")
        return await self.inner.export(batch)

    async def force_flush(self, timeout_s: float) -> bool:
        return True

    async def shutdown(self) -> None:
        self.shutdowns += 1
        if self.inner is not None:
            await self.inner.shutdown()


# --- the spans -------------------------------------------------------------------------------------


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_evaluation_spans_leave_the_agent_trace_as_it_was(
    transport: str, store: DuckDBStore, capture: OtlpCapture, make_exporter: Factory
) -> None:
    run = await insert_run(store, conversation_id="conv-7")
    ok = await insert_score(
        store,
        run,
        scorer_id="multi-turn-judge",
        score=1.0,
        label="pass",
        threshold=1.0,
        judge_model="openai/gpt-4o-mini",
        judge_cost_usd=0.0021,
        entity_type="conversation",
    )
    failed = await insert_score(
        store,
        run,
        scorer_id="tool-accuracy",
        score=None,
        reason=None,
        status="error",
        error="judge timed out after 60s",
        error_type="judge_timeout",
    )
    untyped = await insert_score(store, run, scorer_id="tone", score=None, reason=None, status="error", error="boom")
    skipped = await insert_score(
        store, run, scorer_id="answer-length", score=None, reason="no output", status="not_scorable"
    )
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
        assert span.trace_id == run["trace_id"]
        assert span.parent_span_id == run["span_id"]
        assert [(link.trace_id, link.span_id) for link in span.links] == [(run["trace_id"], run["span_id"])]
        assert span.span_id not in (run["span_id"], "0" * 16)
        # the trace keeps its duration: zero-length at the agent span's end, inside its time range
        assert span.start_time_unix_nano == span.end_time_unix_nano == run["ended_at_unix_nano"]
        assert run["started_at_unix_nano"] <= span.start_time_unix_nano <= run["ended_at_unix_nano"]
        # ... its status: never ERROR, even for a scorer error
        assert (span.status_code, span.status_message) == (0, "")
        # ... and its service: the scored resource's service.name, nothing else of ours
        assert span.resource == {"service.name": "support-agent"}
        assert span.scope_name == "tracescorer.export"
        assert span.attributes["openinference.span.kind"] == "EVALUATOR"
        assert span.attributes["tracescorer.score.time_unix_nano"] == await updated_at_us(store, row["id"]) * 1000
        [event] = span.events
        assert event.name == "gen_ai.evaluation.result"
        assert event.attributes == {k: v for k, v in span.attributes.items() if k != "openinference.span.kind"}
        assert event.time_unix_nano == span.end_time_unix_nano

    attrs = dict(spans[ok["id"]].attributes)
    assert attrs.pop("tracescorer.score.time_unix_nano") > 0
    assert attrs == {
        "gen_ai.evaluation.name": "multi-turn-judge",
        "gen_ai.evaluation.score.value": 1.0,
        "gen_ai.evaluation.score.label": "pass",
        "gen_ai.evaluation.explanation": "Answered every question.",
        "gen_ai.conversation.id": "conv-7",
        "tracescorer.scorer.id": "multi-turn-judge",
        "tracescorer.run.id": run["run_id"],
        "tracescorer.judge.model": "openai/gpt-4o-mini",
        "tracescorer.judge.cost_usd": 0.0021,
        "tracescorer.score.id": ok["id"],
        "tracescorer.score.status": "ok",
        "tracescorer.score.duration_ms": 12.5,
        "openinference.span.kind": "EVALUATOR",
    }
    attrs = dict(spans[failed["id"]].attributes)
    attrs.pop("tracescorer.score.time_unix_nano")
    assert attrs == {
        "gen_ai.evaluation.name": "tool-accuracy",
        "gen_ai.conversation.id": "conv-7",
        "error.type": "judge_timeout",
        "tracescorer.score.error": "judge timed out after 60s",
        "tracescorer.scorer.id": "tool-accuracy",
        "tracescorer.run.id": run["run_id"],
        "tracescorer.score.id": failed["id"],
        "tracescorer.score.status": "error",
        "tracescorer.score.duration_ms": 12.5,
        "openinference.span.kind": "EVALUATOR",
    }
    assert spans[untyped["id"]].attributes["error.type"] == "scorer_error"
    assert "error.type" not in spans[skipped["id"]].attributes
    assert "gen_ai.evaluation.score.value" not in spans[skipped["id"]].attributes
    assert spans[skipped["id"]].attributes["tracescorer.score.status"] == "not_scorable"
    assert spans[skipped["id"]].attributes["gen_ai.evaluation.explanation"] == "no output"

    states = await delivery_states(store)
    assert {(k, v["status"], v["attempts"]) for k, v in states.items()} == {
        ((r["id"], "otlp"), "delivered", 1) for r in (ok, failed, untyped, skipped)
    }
    assert all((await exported_at(store)).values())  # the only sink delivered: exported_at is set
    assert outcomes.count("exported") == 4 and outcomes.count("failed") == 0
    assert outcomes.deliveries == [("otlp", "delivered", 4)]
    # nothing pending: a second flush sends nothing
    assert await exporter.force_flush(5)
    assert len(capture.exports) == 1


async def test_each_scored_service_keeps_its_own_resource(
    store: DuckDBStore, capture: OtlpCapture, make_exporter: Factory
) -> None:
    a = await insert_score(store, await insert_run(store, service_name="billing"))
    b = await insert_score(store, await insert_run(store, service_name="support"))
    orphan = await insert_score(store)  # its run is not known: our own service name
    exporter = make_exporter()
    assert await exporter.force_flush(5)
    [request] = [e.request for e in capture.exports]
    services = sorted(rs.resource.attributes[0].value.string_value for rs in request.resource_spans)
    assert services == ["billing", "support", "tracescorer"]
    spans = by_score(capture.spans())
    assert spans[a["id"]].resource == {"service.name": "billing"}
    assert spans[b["id"]].resource == {"service.name": "support"}
    assert spans[orphan["id"]].resource == {"service.name": "tracescorer"}
    # without a run the span sits at the scoring time
    assert spans[orphan["id"]].start_time_unix_nano == await updated_at_us(store, orphan["id"]) * 1000


async def test_rescored_row_is_exported_again(store: DuckDBStore, capture: OtlpCapture, make_exporter: Factory) -> None:
    row = await insert_score(store, await insert_run(store), score=0.2)
    exporter = make_exporter()
    await exporter.start()
    assert await exporter.force_flush(5)
    [first] = await capture.await_spans(1)

    await rescore(store, row["id"], score=0.9)
    assert (await delivery_states(store))[(row["id"], "otlp")]["status"] == "delivered"  # of the old version
    assert await exporter.force_flush(5)

    first_again, second = await capture.await_spans(2)
    assert first_again == first
    assert second.attributes["gen_ai.evaluation.score.value"] == 0.9
    assert second.span_id != first.span_id  # a new score version is a new span ...
    assert (second.trace_id, second.parent_span_id, second.start_time_unix_nano) == (
        first.trace_id,
        first.parent_span_id,
        first.start_time_unix_nano,
    )  # ... in the same place
    state = (await delivery_states(store))[(row["id"], "otlp")]
    assert (state["status"], state["attempts"], state["score_version"]) == (
        "delivered",
        1,
        await updated_at_us(store, row["id"]),
    )


async def test_row_rescored_during_export_stays_pending(
    store: DuckDBStore, capture: OtlpCapture, make_exporter: Factory
) -> None:
    row = await insert_score(store, score=0.1)
    once = [True]

    async def rescore_now() -> None:  # between claim and record
        if once:
            once.clear()
            await rescore(store, row["id"], score=0.5)

    real = make_exporter()  # only to borrow a real sink built from settings
    exporter = make_exporter(named=[NamedSink("otlp", Tap(real.sink("otlp"), before_export=rescore_now))])
    await exporter.start()

    assert await exporter.force_flush(5)
    values = [s.attributes["gen_ai.evaluation.score.value"] for s in await capture.await_spans(2)]
    assert values == [0.1, 0.5]  # the old version was sent, not recorded as the new one; the new one followed
    state = (await delivery_states(store))[(row["id"], "otlp")]
    assert state["score_version"] == await updated_at_us(store, row["id"]) and state["status"] == "delivered"


def test_span_ids_are_deterministic_per_score_version() -> None:
    base = DueScore(
        id="s-1",
        scorer_id="x",
        scorer_name=None,
        run_id=None,
        trace_id=hex_id(16),
        span_id=hex_id(8),
        conversation_id=None,
        entity_type="agent",
        score=1.0,
        reason=None,
        status="ok",
        error=None,
        error_type=None,
        label=None,
        threshold=None,
        judge_model=None,
        judge_cost_usd=None,
        duration_ms=None,
        version=1_700_000_000_000_000,
        scored_end_unix_nano=1_600_000_000_000_000_000,
    )
    a, b = evaluation_span(base), evaluation_span(base)
    assert a == b
    assert a.start_time_unix_nano == a.end_time_unix_nano == base.scored_end_unix_nano
    later = DueScore(**{**{f: getattr(base, f) for f in base.__dataclass_fields__}, "version": base.version + 1})
    assert evaluation_span(later).span_id != a.span_id

    # a score without a scored span (should not happen) still exports, as a trace of its own
    orphan = DueScore(**{**{f: getattr(base, f) for f in base.__dataclass_fields__}, "trace_id": None, "span_id": "zz"})
    o1, o2 = evaluation_span(orphan), evaluation_span(orphan)
    assert o1.parent_span_id == b"" and list(o1.links) == []
    assert o1.trace_id == o2.trace_id and len(o1.trace_id) == 16


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
    state = (await delivery_states(store))[(row["id"], "otlp")]
    assert (state["status"], state["attempts"]) == ("pending", 1)
    assert ("UNAVAILABLE" if transport == "grpc" else "HTTP 503") in state["last_error"]
    assert outcomes.count("failed") == 1
    assert not (await exported_at(store))[row["id"]]

    assert await exporter.force_flush(5)
    [span] = await capture.await_spans(1)
    assert span.attributes["tracescorer.score.id"] == row["id"]
    state = (await delivery_states(store))[(row["id"], "otlp")]
    assert (state["status"], state["attempts"]) == ("delivered", 2)
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
    assert await exporter.force_flush(5)  # waits for the loop's pass to finish (record + observer)
    assert [o for o, _, _ in outcomes.calls] == ["failed", "failed", "exported"]
    assert (await delivery_states(store))[(row["id"], "otlp")]["attempts"] == 3


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_permanent_rejection_fails_after_bounded_attempts_and_later_scores_flow(
    transport: str, store: DuckDBStore, capture: OtlpCapture, make_exporter: Factory
) -> None:
    outcomes = Outcomes()
    exporter = make_exporter(transport, observer=outcomes, batch_size=1, max_rejected_attempts=3, interval_s=0.05)
    bad = await insert_score(store)
    capture.fail_next(3, grpc_code=grpc.StatusCode.INVALID_ARGUMENT, http_status=400)
    await exporter.start()

    # the loop retries it with backoff, then gives up
    state = await eventually(
        lambda s: s.get((bad["id"], "otlp"), {}).get("status") == "failed", lambda: delivery_states(store)
    )
    state = state[(bad["id"], "otlp")]
    assert (state["status"], state["attempts"]) == ("failed", 3)
    assert state["last_error"] == (
        "gRPC INVALID_ARGUMENT: scripted failure" if transport == "grpc" else "HTTP 400: scripted failure"
    )
    assert [e.failed for e in capture.exports] == [True, True, True]

    good = await insert_score(store)
    exporter.notify()
    [span] = await capture.await_spans(1, timeout_s=10)
    assert span.attributes["tracescorer.score.id"] == good["id"]
    assert await exporter.force_flush(5)  # the failed one counts as settled and is not sent again
    assert len(capture.exports) == 4
    assert ("otlp", "failed", 1) in outcomes.deliveries and ("otlp", "rejected", 1) in outcomes.deliveries
    assert not (await exported_at(store))[bad["id"]]


async def test_a_sink_that_raises_does_not_raise_into_the_caller(store: DuckDBStore, make_exporter: Factory) -> None:
    row = await insert_score(store)
    outcomes = Outcomes()
    tap = Tap(None)
    exporter = make_exporter(named=[NamedSink("otlp", tap)], observer=outcomes)
    await exporter.start()
    assert not await exporter.force_flush(5)
    assert tap.batches == [1]
    assert outcomes.count("failed") == 1
    state = (await delivery_states(store))[(row["id"], "otlp")]
    assert state["status"] == "pending" and "exporter exploded" in state["last_error"]
    await exporter.stop(time.monotonic() + 1)  # the drain at shutdown fails too; still no exception
    assert tap.shutdowns == 1


# --- batching lifecycle (BatchSpanProcessor cases) ---------------------------------------------------


async def test_export_on_size(store: DuckDBStore, capture: OtlpCapture, make_exporter: Factory) -> None:
    exporter = make_exporter(batch_size=3, interval_s=60)  # the timer never fires within this test
    await exporter.start()
    assert await exporter.force_flush(5)  # the start-up pass found nothing
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
    assert {s["status"] for s in (await delivery_states(store)).values()} == {"delivered"}
    assert {s.attributes["tracescorer.score.id"] for s in capture.spans()} == {r["id"] for r in rows}


async def test_shutdown_drains_pending_then_exports_nothing(
    store: DuckDBStore, capture: OtlpCapture, make_exporter: Factory
) -> None:
    tap = Tap(make_exporter().sink("otlp"))
    exporter = make_exporter(named=[NamedSink("otlp", tap)], batch_size=100, interval_s=60)
    await exporter.start()
    rows = [await insert_score(store) for _ in range(2)]
    exporter.notify(2)

    assert await exporter.stop(time.monotonic() + 5)
    assert {s.attributes["tracescorer.score.id"] for s in capture.spans()} == {r["id"] for r in rows}
    assert tap.shutdowns == 1
    requests = len(capture.exports)

    late = await insert_score(store)
    exporter.notify(1000)
    await exporter.start()
    assert not await exporter.force_flush(1)
    assert await exporter.stop(time.monotonic() + 1)  # idempotent
    assert len(capture.exports) == requests and tap.batches == [2]
    assert (late["id"], "otlp") not in await delivery_states(store)
    assert tap.shutdowns == 1


async def test_shutdown_before_start_still_drains(
    store: DuckDBStore, capture: OtlpCapture, make_exporter: Factory
) -> None:
    row = await insert_score(store)
    exporter = make_exporter()
    assert await exporter.stop(time.monotonic() + 5)
    [span] = capture.spans()
    assert span.attributes["tracescorer.score.id"] == row["id"]


# --- configuration -------------------------------------------------------------------------------


async def test_disabled_export_builds_nothing_and_sends_nothing(
    store: DuckDBStore, capture: OtlpCapture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", capture.grpc_endpoint)
    await insert_score(store)
    exporter = EvaluationExporter(store, ExportSettings())
    assert not exporter.enabled and exporter.sink("otlp") is None
    await exporter.start()
    exporter.notify(1000)
    assert await exporter.force_flush(1)
    assert await exporter.stop(time.monotonic() + 1)
    assert capture.exports == []


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_the_form_without_sinks_is_one_otlp_sink_configured_from_otel_variables(
    transport: str, store: DuckDBStore, capture: OtlpCapture, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in (
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
        "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
        "OTEL_RESOURCE_ATTRIBUTES",
    ):
        monkeypatch.delenv(name, raising=False)
    if transport == "grpc":
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", capture.grpc_endpoint)
        monkeypatch.delenv("OTEL_EXPORTER_OTLP_PROTOCOL", raising=False)  # grpc is the default
    else:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", capture.http_base_url)
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-tenant=acme")
    monkeypatch.setenv("OTEL_SERVICE_NAME", "scores-prod")
    row = await insert_score(store)  # no run known: the exporter's own service name

    exporter = EvaluationExporter(store, ExportSettings(enabled=True, timeout_s=5))
    assert exporter.sink_ids == ["otlp"]
    try:
        await exporter.start()
        assert await exporter.force_flush(5)
    finally:
        await exporter.stop(time.monotonic() + 5)

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
    exporter = make_exporter(sinks=[{"otlp": {"protocol": "http/protobuf", "endpoint": capture.http_endpoint}}])
    assert await exporter.force_flush(5)
    assert [s.transport for s in capture.spans()] == ["http"]


async def test_gzip_compression(store: DuckDBStore, capture: OtlpCapture, make_exporter: Factory) -> None:
    await insert_score(store)
    exporter = make_exporter(sinks=[{"otlp": otlp_sink_settings(capture, "http", compression="gzip")}])
    assert await exporter.force_flush(5)
    assert capture.exports[0].headers["content-encoding"] == "gzip" and len(capture.spans()) == 1
