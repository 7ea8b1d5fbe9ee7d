"""The native sinks (Phoenix, MLflow), OTLP logs and several sinks at once, against real local
servers implementing each backend's documented endpoints, with a real DuckDB file."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from fakes.fake_mlflow import FakeMlflow
from fakes.fake_phoenix import FakePhoenix
from fakes.otlp_capture import OtlpCapture
from fakes.scores_db import delivery_states, eventually, exported_at, insert_run, insert_score, rescore
from support.db import fetch

from tracescorer.config import ConfigError, ExportSettings, Settings, load_settings
from tracescorer.export import EvaluationExporter, sink_ids
from tracescorer.export.mlflow import assessment_id
from tracescorer.store.duckdb import DuckDBStore


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[DuckDBStore]:
    db = DuckDBStore(tmp_path / "x.duckdb")
    await db.start()
    yield db
    await db.stop()


@pytest.fixture
def phoenix() -> Iterator[FakePhoenix]:
    with FakePhoenix(api_key="px-key") as server:
        yield server


@pytest.fixture
def mlflow() -> Iterator[FakeMlflow]:
    with FakeMlflow() as server:
        yield server


@pytest.fixture
def capture() -> Iterator[OtlpCapture]:
    with OtlpCapture() as server:
        yield server


Factory = Callable[..., EvaluationExporter]


@pytest.fixture
async def make_exporter(store: DuckDBStore) -> AsyncIterator[Factory]:
    made: list[EvaluationExporter] = []

    def make(*sinks: dict[str, Any], **overrides: Any) -> EvaluationExporter:
        fields: dict[str, Any] = {
            "enabled": True,
            "sinks": list(sinks),
            "timeout_s": 5.0,
            "batch_size": 100,
            "interval_s": 60.0,
            "retry_initial_s": 0.05,
            "retry_max_s": 0.2,
            "max_rejected_attempts": 3,
            **overrides,
        }
        ex = EvaluationExporter(store, ExportSettings(**fields))
        made.append(ex)
        return ex

    yield make
    for ex in made:
        await ex.stop(time.monotonic() + 5)


def px(phoenix: FakePhoenix, **extra: Any) -> dict[str, Any]:
    return {"phoenix": {"endpoint": phoenix.base_url, "api_key": "px-key", **extra}}


def ml(mlflow: FakeMlflow, **extra: Any) -> dict[str, Any]:
    return {"mlflow": {"tracking_uri": mlflow.base_url, "experiment_id": "7", **extra}}


async def version_ns(store: DuckDBStore, score_id: str) -> int:
    (row,) = await fetch(store, "SELECT epoch_us(updated_at) FROM scores WHERE id = ?", score_id)
    return int(row[0]) * 1000


# --- Phoenix -------------------------------------------------------------------------------------


async def test_phoenix_run_scores_are_span_annotations_and_conversation_scores_session_annotations(
    store: DuckDBStore, phoenix: FakePhoenix, make_exporter: Factory
) -> None:
    first = await insert_run(store, conversation_id="conv-1")
    last = await insert_run(store, conversation_id="conv-1", ended_at_unix_nano=1_700_000_010_000_000_000)
    phoenix.add_span(first["span_id"], last["span_id"])
    phoenix.add_session("conv-1")
    judged = await insert_score(
        store,
        first,
        scorer_id="helpfulness",
        score=1.0,
        label="pass",
        threshold=1.0,
        judge_model="openai/gpt-4o-mini",
        judge_cost_usd=0.002,
    )
    errored = await insert_score(
        store,
        first,
        scorer_id="tool-accuracy",
        score=None,
        reason=None,
        status="error",
        error="judge timed out after 60s",
        error_type="judge_timeout",
        judge_model="openai/gpt-4o-mini",
    )
    skipped = await insert_score(
        store, first, scorer_id="answer-length", score=None, reason="no output", status="not_scorable"
    )
    conv = await insert_score(
        store,
        last,
        scorer_id="conversation-judge",
        score=0.5,
        reason="Half resolved.",
        entity_type="conversation",
        judge_model="openai/gpt-4o-mini",
    )
    exporter = make_exporter(px(phoenix))
    assert await exporter.force_flush(5)

    [spans_req] = phoenix.recorded("POST", "/v1/span_annotations")
    [session_req] = phoenix.recorded("POST", "/v1/session_annotations")
    assert spans_req.query == session_req.query == {"sync": "true"}
    assert spans_req.headers["authorization"] == "Bearer px-key"
    by_id = {a["identifier"]: a for a in spans_req.json["data"]}
    assert by_id[judged["id"]] == {
        "span_id": first["span_id"],
        "name": "helpfulness",
        "annotator_kind": "LLM",
        "result": {"score": 1.0, "label": "pass", "explanation": "Answered every question."},
        "metadata": {
            "source": "tracescorer",
            "score_id": judged["id"],
            "status": "ok",
            "run_id": first["run_id"],
            "conversation_id": "conv-1",
            "threshold": 1.0,
            "judge_model": "openai/gpt-4o-mini",
            "judge_cost_usd": 0.002,
            "duration_ms": 12.5,
            "scored_at_unix_nano": await version_ns(store, judged["id"]),
        },
        "identifier": judged["id"],
    }
    # a scorer error carries the error, on the agent span, and is not a failed agent
    assert by_id[errored["id"]]["result"] == {
        "score": None,
        "label": "error",
        "explanation": "judge timed out after 60s",
    }
    assert by_id[errored["id"]]["metadata"]["error_type"] == "judge_timeout"
    assert by_id[skipped["id"]]["annotator_kind"] == "CODE"
    assert by_id[skipped["id"]]["result"] == {"score": None, "label": "not_scorable", "explanation": "no output"}
    [session_ann] = session_req.json["data"]
    assert session_ann["session_id"] == "conv-1" and "span_id" not in session_ann
    assert (session_ann["name"], session_ann["identifier"], session_ann["result"]) == (
        "conversation-judge",
        conv["id"],
        {"score": 0.5, "label": None, "explanation": "Half resolved."},
    )
    assert len(phoenix.span_annotations) == 3 and len(phoenix.session_annotations) == 1
    states = await delivery_states(store, "phoenix")
    assert {v["status"] for v in states.values()} == {"delivered"} and len(states) == 4


async def test_phoenix_rescore_updates_the_annotation_in_place(
    store: DuckDBStore, phoenix: FakePhoenix, make_exporter: Factory
) -> None:
    run = await insert_run(store)
    phoenix.add_span(run["span_id"])
    row = await insert_score(store, run, score=0.2, label="fail", threshold=0.5)
    exporter = make_exporter(px(phoenix))
    assert await exporter.force_flush(5)
    [before] = phoenix.span_annotations.values()

    await rescore(store, row["id"], score=0.9, label="pass", reason="Better now.")
    assert await exporter.force_flush(5)
    [after] = phoenix.span_annotations.values()  # the same annotation, updated
    assert after["id"] == before["id"] and after["identifier"] == row["id"]
    assert after["result"] == {"score": 0.9, "label": "pass", "explanation": "Better now."}
    assert len(phoenix.recorded("POST", "/v1/span_annotations")) == 2


async def test_phoenix_an_unknown_span_is_isolated_retried_then_failed_while_the_rest_flows(
    store: DuckDBStore, phoenix: FakePhoenix, make_exporter: Factory
) -> None:
    known = await insert_run(store)
    phoenix.add_span(known["span_id"])
    good = await insert_score(store, known)
    lost = await insert_score(store, await insert_run(store))  # its trace never reached Phoenix
    exporter = make_exporter(px(phoenix))

    assert await exporter.force_flush(5)  # rejected ones are tried up to the bound, then settled
    states = await delivery_states(store, "phoenix")
    assert (states[(good["id"], "phoenix")]["status"], states[(good["id"], "phoenix")]["attempts"]) == ("delivered", 1)
    failed = states[(lost["id"], "phoenix")]
    assert (failed["status"], failed["attempts"]) == ("failed", 3)
    assert failed["last_error"].startswith("HTTP 404: ") and lost["span_id"] in failed["last_error"]
    assert list(phoenix.span_annotations) == [("helpfulness", known["span_id"], good["id"])]
    # the first request held both and was refused whole; then one by one
    assert [len(r.json["data"]) for r in phoenix.recorded("POST", "/v1/span_annotations")] == [2, 1, 1, 1, 1]


async def test_phoenix_conversation_without_a_phoenix_session_goes_on_the_last_agent_span(
    store: DuckDBStore, phoenix: FakePhoenix, make_exporter: Factory
) -> None:
    last = await insert_run(store, conversation_id="conv-2")
    phoenix.add_span(last["span_id"])  # spans without session.id: Phoenix has no session conv-2
    conv = await insert_score(store, last, scorer_id="conversation-judge", entity_type="conversation")
    exporter = make_exporter(px(phoenix))
    assert await exporter.force_flush(5)
    assert phoenix.session_annotations == {}
    [ann] = phoenix.span_annotations.values()
    assert (ann["span_id"], ann["identifier"], ann["metadata"]["conversation_id"]) == (
        last["span_id"],
        conv["id"],
        "conv-2",
    )


async def test_phoenix_outage_is_retried_and_a_bad_key_fails_for_good(
    store: DuckDBStore, phoenix: FakePhoenix, make_exporter: Factory
) -> None:
    run = await insert_run(store)
    phoenix.add_span(run["span_id"])
    row = await insert_score(store, run)
    phoenix.fail_next(2, 503, path="/v1/span_annotations", headers={"Retry-After": "0"})
    exporter = make_exporter(px(phoenix), interval_s=0.05)
    await exporter.start()
    state = await eventually(
        lambda s: s.get((row["id"], "phoenix"), {}).get("status") == "delivered",
        lambda: delivery_states(store, "phoenix"),
    )
    assert state[(row["id"], "phoenix")]["attempts"] == 3
    await exporter.stop(time.monotonic() + 5)

    other = await insert_score(store, run, scorer_id="tone")
    bad = make_exporter(px(phoenix, api_key="wrong"))
    assert await bad.force_flush(5)
    failed = (await delivery_states(store, "phoenix"))[(other["id"], "phoenix")]
    assert (failed["status"], failed["attempts"], failed["last_error"]) == (
        "failed",
        3,
        'HTTP 401: {"detail": "Invalid token"}',
    )


# --- MLflow --------------------------------------------------------------------------------------


async def test_mlflow_scores_are_feedback_on_the_agent_span_and_conversations_on_the_first_trace(
    store: DuckDBStore, mlflow: FakeMlflow, make_exporter: Factory
) -> None:
    first = await insert_run(store, conversation_id="conv-1", ended_at_unix_nano=1_700_000_002_000_000_000)
    last = await insert_run(store, conversation_id="conv-1", ended_at_unix_nano=1_700_000_009_000_000_000)
    mlflow.add_trace(f"tr-{first['trace_id']}", f"tr-{last['trace_id']}")
    code = await insert_score(
        store, last, scorer_id="no-tool-errors", score=1.0, label="pass", threshold=1.0, reason=None
    )
    judged = await insert_score(store, last, scorer_id="helpfulness", score=0.5, judge_model="openai/gpt-4o-mini")
    errored = await insert_score(
        store,
        last,
        scorer_id="tool-accuracy",
        score=None,
        reason=None,
        status="error",
        error="judge timed out after 60s",
        error_type="judge_timeout",
    )
    conv = await insert_score(
        store,
        last,
        scorer_id="conversation-judge",
        score=0.25,
        reason="Unresolved.",
        entity_type="conversation",
        judge_model="openai/gpt-4o-mini",
    )
    exporter = make_exporter(ml(mlflow))
    assert await exporter.force_flush(5)

    creates = {r.json["assessment"]["assessment_name"]: r for r in mlflow.recorded("POST")}
    assert all(r.headers["x-mlflow-experiment-id"] == "7" for r in creates.values())
    assert creates["no-tool-errors"].path == f"/api/3.0/mlflow/traces/tr-{last['trace_id']}/assessments"
    assert creates["no-tool-errors"].json == {
        "assessment": {
            "assessment_id": assessment_id(code["id"]),
            "assessment_name": "no-tool-errors",
            "trace_id": f"tr-{last['trace_id']}",
            "span_id": last["span_id"],
            "source": {"source_type": "CODE", "source_id": "no-tool-errors"},
            "feedback": {"value": 1.0},
            "rationale": "",
            "metadata": {
                "tracescorer.score_id": code["id"],
                "tracescorer.status": "ok",
                "tracescorer.run_id": last["run_id"],
                "tracescorer.label": "pass",
                "tracescorer.threshold": "1",
            },
        }
    }
    assert creates["helpfulness"].json["assessment"]["source"] == {
        "source_type": "LLM_JUDGE",
        "source_id": "openai/gpt-4o-mini",
    }
    assert creates["tool-accuracy"].json["assessment"]["feedback"] == {
        "error": {"error_code": "judge_timeout", "error_message": "judge timed out after 60s"}
    }
    conv_body = creates["conversation-judge"].json["assessment"]
    assert creates["conversation-judge"].path == f"/api/3.0/mlflow/traces/tr-{first['trace_id']}/assessments"
    assert conv_body["trace_id"] == f"tr-{first['trace_id']}" and "span_id" not in conv_body
    assert conv_body["metadata"]["mlflow.trace.session"] == "conv-1"
    assert (conv_body["feedback"], conv_body["rationale"]) == ({"value": 0.25}, "Unresolved.")
    assert set(mlflow.assessments) == {
        (f"tr-{last['trace_id']}", assessment_id(s["id"])) for s in (code, judged, errored)
    } | {(f"tr-{first['trace_id']}", assessment_id(conv["id"]))}
    assert len(await delivery_states(store, "mlflow")) == 4


async def test_mlflow_rescore_patches_the_same_assessment(
    store: DuckDBStore, mlflow: FakeMlflow, make_exporter: Factory
) -> None:
    run = await insert_run(store)
    trace = f"tr-{run['trace_id']}"
    mlflow.add_trace(trace)
    row = await insert_score(store, run, score=0.2)
    exporter = make_exporter(ml(mlflow))
    assert await exporter.force_flush(5)
    await rescore(store, row["id"], score=0.8, reason="Fixed.")
    assert await exporter.force_flush(5)

    [patch] = mlflow.recorded("PATCH")
    aid = assessment_id(row["id"])
    assert patch.path == f"/api/3.0/mlflow/traces/{trace}/assessments/{aid}"
    assert patch.json == {
        "assessment": {
            "assessment_id": aid,
            "trace_id": trace,
            "assessment_name": "helpfulness",
            "feedback": {"value": 0.8},
            "rationale": "Fixed.",
            "metadata": {
                "tracescorer.score_id": row["id"],
                "tracescorer.status": "ok",
                "tracescorer.run_id": run["run_id"],
            },
        },
        "update_mask": "assessment_name,feedback,rationale,metadata",
    }
    [stored] = mlflow.assessments.values()
    assert (stored["assessment_id"], stored["feedback"], stored["rationale"]) == (aid, {"value": 0.8}, "Fixed.")
    assert len(mlflow.recorded("POST")) == 1


async def test_mlflow_create_after_a_lost_reply_and_update_after_a_delete_still_land(
    store: DuckDBStore, mlflow: FakeMlflow, make_exporter: Factory
) -> None:
    run = await insert_run(store)
    trace = f"tr-{run['trace_id']}"
    mlflow.add_trace(trace)
    row = await insert_score(store, run, score=0.3)
    # an earlier attempt created it but its answer was lost (nothing recorded here)
    mlflow.assessments[(trace, assessment_id(row["id"]))] = {
        "assessment_id": assessment_id(row["id"]),
        "feedback": {"value": 0.1},
        "metadata": {},
    }
    exporter = make_exporter(ml(mlflow))
    assert await exporter.force_flush(5)
    assert [(r.method, r.status) for r in mlflow.requests] == [("POST", 500), ("PATCH", 200)]
    assert mlflow.assessments[(trace, assessment_id(row["id"]))]["feedback"] == {"value": 0.3}

    mlflow.assessments.clear()  # deleted in the MLflow UI; then re-scored
    await rescore(store, row["id"], score=0.6)
    assert await exporter.force_flush(5)
    assert [(r.method, r.status) for r in mlflow.requests[2:]] == [("PATCH", 404), ("POST", 200)]
    assert mlflow.assessments[(trace, assessment_id(row["id"]))]["feedback"] == {"value": 0.6}


async def test_mlflow_unknown_trace_fails_after_bounded_attempts_and_an_outage_is_retried(
    store: DuckDBStore, mlflow: FakeMlflow, make_exporter: Factory
) -> None:
    known = await insert_run(store)
    mlflow.add_trace(f"tr-{known['trace_id']}")
    good = await insert_score(store, known)
    lost = await insert_score(store, await insert_run(store))
    mlflow.fail_next(1, 503, method="POST")
    exporter = make_exporter(ml(mlflow))
    assert await exporter.force_flush(5)  # the outage answered the first create; the flush went on
    states = await delivery_states(store, "mlflow")
    assert (states[(good["id"], "mlflow")]["status"], states[(good["id"], "mlflow")]["attempts"]) == ("delivered", 2)
    assert states[(good["id"], "mlflow")]["last_error"] is None
    failed = states[(lost["id"], "mlflow")]
    assert (failed["status"], failed["attempts"]) == ("failed", 3)
    assert "RESOURCE_DOES_NOT_EXIST" in failed["last_error"] and failed["last_error"].startswith("HTTP 404")


# --- OTLP logs -------------------------------------------------------------------------------------


@pytest.mark.parametrize("transport", ["grpc", "http"])
async def test_otlp_logs_are_the_semconv_evaluation_event_on_the_agent_span(
    transport: str, store: DuckDBStore, capture: OtlpCapture, make_exporter: Factory
) -> None:
    run = await insert_run(store)
    ok = await insert_score(store, run, score=0.5, label="fail", threshold=0.8)
    err = await insert_score(
        store, run, scorer_id="tone", score=None, reason=None, status="error", error="boom", error_type="ValueError"
    )
    endpoint = capture.grpc_endpoint if transport == "grpc" else capture.http_base_url
    exporter = make_exporter(
        {"otlp_logs": {"endpoint": endpoint, "protocol": "grpc" if transport == "grpc" else "http/protobuf"}}
    )
    assert await exporter.force_flush(5)
    [request] = capture.exports
    assert request.signal == "logs" and request.transport == transport
    records = {r.attributes["tracescorer.score.id"]: r for r in await capture.await_log_records(2)}
    record = records[ok["id"]]
    assert (record.event_name, record.trace_id, record.span_id, record.flags) == (
        "gen_ai.evaluation.result",
        run["trace_id"],
        run["span_id"],
        1,
    )
    assert (record.severity_number, record.severity_text, record.body) == (9, "INFO", None)
    assert record.time_unix_nano == await version_ns(store, ok["id"])
    assert record.resource == {"service.name": "support-agent"} and record.scope_name == "tracescorer.export"
    assert {k: v for k, v in record.attributes.items() if k.startswith("gen_ai.")} == {
        "gen_ai.evaluation.name": "helpfulness",
        "gen_ai.evaluation.score.value": 0.5,
        "gen_ai.evaluation.score.label": "fail",
        "gen_ai.evaluation.explanation": "Answered every question.",
    }
    assert records[err["id"]].attributes["error.type"] == "ValueError"
    assert "gen_ai.evaluation.score.value" not in records[err["id"]].attributes
    assert set(await delivery_states(store, "otlp_logs")) == {(ok["id"], "otlp_logs"), (err["id"], "otlp_logs")}


@pytest.mark.parametrize("transport", ["grpc", "http"])
async def test_an_otlp_sink_with_log_records_sends_each_score_as_a_span_and_a_log_record(
    transport: str, store: DuckDBStore, capture: OtlpCapture, make_exporter: Factory
) -> None:
    run = await insert_run(store)
    row = await insert_score(store, run, scorer_version="3f9a2b7c1d0e")
    endpoint = capture.grpc_endpoint if transport == "grpc" else capture.http_base_url
    protocol = "grpc" if transport == "grpc" else "http/protobuf"
    capture.fail_next(2)  # both requests of the first attempt fail: the score stays pending, both go again
    exporter = make_exporter(
        {"otlp": {"endpoint": endpoint, "protocol": protocol, "log_records": True, "span_events": False}}
    )
    assert not await exporter.force_flush(5)  # retryable failure
    assert await exporter.force_flush(5)
    assert sorted(e.signal for e in capture.exports if not e.failed) == ["logs", "traces"]
    [span] = capture.spans()
    assert span.parent_span_id == run["span_id"] and span.events == []  # no span event: span_events false
    assert span.attributes["tracescorer.scorer.version"] == "3f9a2b7c1d0e"
    [record] = await capture.await_log_records(1)
    assert (record.event_name, record.trace_id, record.span_id) == (
        "gen_ai.evaluation.result",
        run["trace_id"],
        run["span_id"],
    )
    assert record.attributes["gen_ai.evaluation.score.value"] == 0.75
    assert record.attributes["tracescorer.scorer.version"] == "3f9a2b7c1d0e"
    states = await delivery_states(store, "otlp")
    assert (states[(row["id"], "otlp")]["status"], states[(row["id"], "otlp")]["attempts"]) == ("delivered", 2)


def test_log_records_and_span_events_are_otlp_sink_keys() -> None:
    with pytest.raises(ValueError, match="otlp sink keys"):
        ExportSettings(enabled=True, sinks=[{"otlp_logs": {"log_records": True}}])


# --- several sinks ---------------------------------------------------------------------------------


async def test_sinks_deliver_independently_and_exported_at_waits_for_all(
    store: DuckDBStore, phoenix: FakePhoenix, mlflow: FakeMlflow, capture: OtlpCapture, make_exporter: Factory
) -> None:
    run = await insert_run(store)
    phoenix.add_span(run["span_id"])
    mlflow.add_trace(f"tr-{run['trace_id']}")
    row = await insert_score(store, run)
    phoenix.fail_next(1000, 503)  # Phoenix is down
    exporter = make_exporter(
        {"otlp": {"endpoint": capture.grpc_endpoint, "protocol": "grpc"}},
        {"otlp": {"endpoint": capture.http_base_url, "protocol": "http/protobuf"}},
        px(phoenix),
        ml(mlflow),
    )
    assert exporter.sink_ids == ["otlp", "otlp#2", "phoenix", "mlflow"]
    assert not await exporter.force_flush(5)
    states = await delivery_states(store)
    assert {sink: s["status"] for (_, sink), s in states.items()} == {
        "otlp": "delivered",
        "otlp#2": "delivered",
        "phoenix": "pending",
        "mlflow": "delivered",
    }
    assert sorted(e.transport for e in capture.exports) == ["grpc", "http"]
    assert not (await exported_at(store))[row["id"]]

    phoenix.clear_failures()  # Phoenix is back
    assert await exporter.force_flush(5)
    assert (await delivery_states(store))[(row["id"], "phoenix")]["status"] == "delivered"
    assert (await exported_at(store))[row["id"]]
    assert len(capture.exports) == 2  # the other sinks sent nothing again


def test_sink_config_shape_ids_and_errors(tmp_path: Path) -> None:
    settings = Settings.model_validate(
        {
            "export": {
                "enabled": True,
                "sinks": [
                    {"otlp": {"endpoint": "http://collector:4317", "protocol": "grpc", "headers": {}}},
                    {"otlp_logs": {"endpoint": "http://collector:4318", "protocol": "http/protobuf"}},
                    {"phoenix": {"endpoint": "http://phoenix:6006", "api_key": ""}},
                    {"mlflow": {"tracking_uri": "http://mlflow:5000", "experiment_id": "1"}},
                    {"otlp": None},
                    {"phoenix": {"endpoint": "http://other:6006", "name": "phoenix-staging"}},
                ],
            }
        }
    )
    assert sink_ids(settings.export) == [
        ("otlp", "otlp"),
        ("otlp_logs", "otlp_logs"),
        ("phoenix", "phoenix"),
        ("mlflow", "mlflow"),
        ("otlp#2", "otlp"),
        ("phoenix-staging", "phoenix"),
    ]
    assert sink_ids(ExportSettings(enabled=True, endpoint="http://x:4317")) == [("otlp", "otlp")]
    masked = Settings.model_validate(
        {
            "export": {
                "sinks": [
                    {"phoenix": {"endpoint": "http://p", "api_key": "s"}},
                    {"mlflow": {"tracking_uri": "http://m", "token": "t"}},
                ]
            }
        }
    )
    assert masked.masked()["export"]["sinks"][0]["phoenix"]["api_key"] == "***"
    assert masked.masked()["export"]["sinks"][1]["mlflow"]["token"] == "***"

    cfg = tmp_path / "tracescorer.yaml"
    for bad, message in [
        ({"sinks": [{"otlp": {}, "phoenix": {"endpoint": "http://p"}}]}, "exactly one of"),
        ({"sinks": [{"zipkin": {}}]}, "zipkin: unknown key"),
        ({"sinks": [{"phoenix": {}}]}, "phoenix.endpoint: Field required"),
        ({"sinks": [{"mlflow": {"tracking_uri": "http://m", "bogus": 1}}]}, "bogus: unknown key"),
        ({"sinks": [{"otlp": {}}], "endpoint": "http://x:4317"}, "with sinks, set them on the sink"),
    ]:
        cfg.write_text(yaml.safe_dump({"export": bad}))
        with pytest.raises(ConfigError, match=message):
            load_settings(cfg, env={})
    with pytest.raises(ConfigError, match="duplicate sink name"):
        sink_ids(ExportSettings.model_validate({"sinks": [{"otlp": {"name": "a"}}, {"otlp_logs": {"name": "a"}}]}))
