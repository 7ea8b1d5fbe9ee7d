"""Other tools' gen_ai.evaluation.result events into the daemon through the OpenTelemetry SDK's log
and span exporters: stored as external evaluations linked to the evaluated runs (trace and span
id; a conversation by gen_ai.conversation.id), shown by `scores` and `explain`, usable as the
reference for agreement; tracescorer's own exported evaluations sent back are recognised and not
ingested, and no evaluation makes its trace be assembled or scored again."""

from __future__ import annotations

import json
import urllib.request

import pytest
from opentelemetry._logs import SeverityNumber
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace import Link, NonRecordingSpan, SpanContext, TraceFlags, set_span_in_context
from support.daemon import DaemonProcess, config_dict, wait_for
from support.kept import span_rows_caught_up
from support.otlp import log_exporter, span_exporter

from tracescorer.demo import emit_conversations
from tracescorer.export.otlp import span_request
from tracescorer.export.otlp_logs import logs_request
from tracescorer.records.deliveries import DueScore

CONVERSATIONS = [
    {"id": f"conv-{i}", "agent": "helper", "turns": [(f"Question {i}?", "lookup", {"q": i}, "ok", f"Answer {i}.")]}
    for i in range(1, 4)
]


def _context(trace_id: str, span_id: str) -> object:
    ctx = SpanContext(int(trace_id, 16), int(span_id, 16), is_remote=True, trace_flags=TraceFlags(1))
    return set_span_in_context(NonRecordingSpan(ctx))


def _metrics(daemon: DaemonProcess) -> str:
    return urllib.request.urlopen(daemon.http_url + "/metrics", timeout=10).read().decode()


def _metric(text: str, prefix: str) -> float:
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(prefix))


def test_external_evaluations_arrive_as_log_records_and_span_events_and_own_ones_are_not_ingested(tmp_path):
    cfg = config_dict(
        tmp_path,
        store={"spans": "all"},  # span rows: the test reads a model call's span id, and what is kept as rows
        assembly={"idle_s": 0.1},
        scorers=[{"id": "non-empty", "prebuilt": "non_empty_response", "scope": "run", "threshold": 1}],
    )
    daemon = DaemonProcess(tmp_path, cfg).start()
    try:
        emit_conversations(daemon.grpc_endpoint, CONVERSATIONS, service_name="helper-svc")
        wait_for(lambda: len(daemon.query_json("SELECT id FROM scores")) == 3, 30, interval_s=0.2, what="3 scores")
        runs = {r["conversation_id"]: r for r in daemon.query_json("SELECT * FROM runs")}
        chats = (
            f"SELECT span_id FROM spans WHERE trace_id = '{runs['conv-2']['trace_id']}' AND name LIKE 'chat%' LIMIT 1"
        )
        # the span-rows feed writes them after the pipeline, at its own pace
        chat = wait_for(lambda: daemon.query_json(chats), 30, interval_s=0.2, what="a model call's span row")[0][
            "span_id"
        ]
        scores_before = len(daemon.query_json("SELECT id FROM scores"))

        # an evaluator's log records (the form the conventions prefer), over gRPC
        provider = LoggerProvider(resource=Resource.create({"service.name": "agentcore-evals"}))
        provider.add_log_record_processor(
            SimpleLogRecordProcessor(log_exporter("grpc", grpc_endpoint=daemon.grpc_endpoint))
        )  # type: ignore[arg-type]
        logger = provider.get_logger("evaluations")
        verdicts = {"conv-1": (0.9, "good"), "conv-3": (0.2, "bad")}
        for conv, (score, label) in verdicts.items():
            logger.emit(
                context=_context(runs[conv]["trace_id"], runs[conv]["span_id"]),
                event_name="gen_ai.evaluation.result",
                severity_number=SeverityNumber.INFO,
                attributes={
                    "gen_ai.evaluation.name": "Helpfulness",
                    "gen_ai.evaluation.score.value": score,
                    "gen_ai.evaluation.score.label": label,
                    "gen_ai.evaluation.explanation": f"{conv} was {label}",
                    "tracescorer.evaluator.version": "2025-01",
                },
            )
        logger.emit(  # on a child span of the run: it is about the run that holds it
            context=_context(runs["conv-2"]["trace_id"], chat),
            event_name="gen_ai.evaluation.result",
            attributes={"gen_ai.evaluation.name": "Helpfulness", "gen_ai.evaluation.score.value": 0.6},
        )
        logger.emit(  # a conversation, by its id alone
            event_name="gen_ai.evaluation.result",
            attributes={
                "gen_ai.evaluation.name": "GoalSuccess",
                "gen_ai.evaluation.score.label": "success",
                "gen_ai.conversation.id": "conv-3",
            },
        )
        logger.emit(event_name="gen_ai.evaluation.result", attributes={"gen_ai.evaluation.score.value": 1.0})  # no name
        provider.shutdown()

        # span events (the older form), over HTTP: an evaluation span linked to the evaluated
        # agent span, and an ordinary span carrying the event
        tracer_provider = TracerProvider(resource=Resource.create({"service.name": "phoenix-evals"}))
        tracer_provider.add_span_processor(SimpleSpanProcessor(span_exporter("http", http_url=daemon.http_url)))
        tracer = tracer_provider.get_tracer("evals")
        agent = SpanContext(
            int(runs["conv-2"]["trace_id"], 16), int(runs["conv-2"]["span_id"], 16), True, TraceFlags(1)
        )
        with tracer.start_as_current_span(
            "evaluate Correctness",
            context=set_span_in_context(NonRecordingSpan(agent)),
            links=[Link(agent)],
            attributes={"openinference.span.kind": "EVALUATOR"},
        ) as span:
            span.add_event(
                "gen_ai.evaluation.result",
                {"gen_ai.evaluation.name": "Correctness", "gen_ai.evaluation.score.label": "correct"},
            )
        with tracer.start_as_current_span("post-check") as span:  # a trace of its own, kept in the span log
            span.add_event(
                "gen_ai.evaluation.result", {"gen_ai.evaluation.name": "Toxicity", "gen_ai.evaluation.score.value": 0.0}
            )
        tracer_provider.shutdown()

        # tracescorer's own exported evaluations (span with event, and log record) sent back
        own = daemon.query_json("SELECT * FROM scores ORDER BY id LIMIT 1")[0]
        due = DueScore(
            **{k: own[k] for k in DueScore.__dataclass_fields__ if k in own and k not in ("version",)},
            version=1_700_000_000_000_000,
        )
        for path, request in (("/v1/traces", span_request([due])), ("/v1/logs", logs_request([due]))):
            req = urllib.request.Request(
                daemon.http_url + path,
                data=request.SerializeToString(),
                headers={"Content-Type": "application/x-protobuf"},
                method="POST",
            )
            assert urllib.request.urlopen(req, timeout=10).status == 200

        rows = wait_for(
            lambda: (lambda r: r if len(r) == 6 else None)(
                daemon.query_json("SELECT * FROM evaluations ORDER BY name, trace_id")
            ),
            30,
            interval_s=0.2,
            what="6 external evaluations",
        )
        by = {(r["name"], r["trace_id"]): r for r in rows}
        first = by[("Helpfulness", runs["conv-1"]["trace_id"])]
        assert (first["source"], first["kind"], first["score"], first["label"]) == (
            "agentcore-evals",
            "log_record",
            0.9,
            "good",
        )
        assert first["span_id"] == runs["conv-1"]["span_id"] and first["evaluator_version"] == "2025-01"
        assert json.loads(first["attributes"])["gen_ai.evaluation.explanation"] == "conv-1 was good"
        correctness = by[("Correctness", runs["conv-2"]["trace_id"])]
        assert (correctness["kind"], correctness["span_id"], correctness["source"]) == (
            "span_event",
            runs["conv-2"]["span_id"],
            "phoenix-evals",
        )
        goal = by[("GoalSuccess", None)]
        assert (goal["target_type"], goal["conversation_id"], goal["label"]) == ("conversation", "conv-3", "success")
        assert {r["name"] for r in rows} == {"Helpfulness", "Correctness", "GoalSuccess", "Toxicity"}

        # evaluation log records and evaluation spans are not in the span log; the ordinary span is
        span_rows_caught_up(daemon)
        assert (
            daemon.query_json("SELECT count(*) AS n FROM log_records WHERE event_name = 'gen_ai.evaluation.result'")[0][
                "n"
            ]
            == 0
        )
        names = {r["name"] for r in daemon.query_json("SELECT name FROM spans")}
        assert "post-check" in names and "evaluate Correctness" not in names
        assert not any(n.startswith("evaluate ") for n in names)  # our own evaluation span was dropped

        # linked to the runs: the child span's evaluation is about the run holding it
        scores = json.loads(daemon.cli("scores", "--scorer", "Helpfulness", "--format", "json").stdout)
        assert {(s["run_id"], s["score"], s["source"]) for s in scores} == {
            (runs["conv-1"]["run_id"], 0.9, "external"),
            (runs["conv-2"]["run_id"], 0.6, "external"),
            (runs["conv-3"]["run_id"], 0.2, "external"),
        }
        table = daemon.cli("scores").stdout
        assert "Helpfulness (external)" in table and "non-empty" in table
        # about one id: a run's evaluations and its conversation's, nothing of the other runs
        about = json.loads(daemon.cli("scores", runs["conv-2"]["trace_id"], "--format", "json").stdout)
        external = {(s["scorer_id"], s["run_id"]) for s in about if s["source"] == "external"}
        assert external == {("Helpfulness", runs["conv-2"]["run_id"]), ("Correctness", runs["conv-2"]["run_id"])}
        assert any(s["source"] != "external" for s in about)  # tracescorer's own beside them
        about = json.loads(daemon.cli("scores", "conv-3", "--format", "json").stdout)
        assert {s["scorer_id"] for s in about if s["source"] == "external"} >= {"GoalSuccess", "Helpfulness"}
        assert {s["conversation_id"] for s in about} == {"conv-3"}
        explain = daemon.cli("explain", runs["conv-1"]["trace_id"]).stdout
        assert "other tools' evaluations (external):" in explain
        assert (
            "Helpfulness from agentcore-evals (log_record, version 2025-01)" in explain
            and "score=0.9 label=good" in explain
        )
        explain = daemon.cli("explain", "--conversation", "conv-3").stdout
        assert "GoalSuccess from agentcore-evals" in explain and "label=success" in explain

        # an external evaluator as the reference for agreement (and as a judge against labels)
        # (labels through the ops API: `tracescorer label` is tests/e2e/test_calibration_labels.py's)
        labels = [
            {"target": target, "scorer": "Helpfulness", "value": value, "by": "ann"}
            for target, value in (
                ("conversation:conv-1", 0.8),
                ("conversation:conv-3", 0.4),
                (f"run:{runs['conv-1']['run_id']}", 0.8),
                (f"run:{runs['conv-3']['run_id']}", 0.4),
            )
        ]
        assert daemon.info is not None
        req = urllib.request.Request(
            daemon.info.api_url + "/api/v1/labels",
            data=json.dumps({"labels": labels}).encode(),
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {daemon.info.api_token}"},
            method="POST",
        )
        with urllib.request.urlopen(req, timeout=30) as resp:
            assert json.loads(resp.read())["written"] == 4
        judged = json.loads(daemon.cli("agreement", "--scorer", "external:Helpfulness", "--format", "json").stdout)
        assert judged[0]["judge"] == "external:Helpfulness" and judged[0]["version"] == "2025-01"
        assert judged[0]["numeric"] == 2 and judged[0]["mae"] == pytest.approx(0.15)
        against = json.loads(
            daemon.cli(
                "agreement", "--scorer", "non-empty", "--reference", "external:Helpfulness", "--format", "json"
            ).stdout
        )
        assert against[0]["reference"] == "external:Helpfulness" and against[0]["numeric"] == 3

        report = tmp_path / "report.html"
        daemon.cli("report", "--since", "1h", "--output", str(report))
        section = report.read_text().split('id="calibration"', 1)[1]
        assert '<td>Helpfulness</td><td>agentcore-evals</td><td class="num">3</td>' in section
        assert "<td>external:Helpfulness</td>" in section  # its agreement with the labels

        # counted; none of it was assembled or scored again
        metrics = _metrics(daemon)
        assert _metric(metrics, 'tracescorer_external_evaluations_total{result="stored"}') == 6
        assert _metric(metrics, 'tracescorer_external_evaluations_total{result="own"}') == 2
        assert _metric(metrics, 'tracescorer_external_evaluations_total{result="invalid"}') == 1
        emit_conversations(daemon.grpc_endpoint, [{**CONVERSATIONS[0], "id": "conv-marker"}], service_name="helper-svc")
        wait_for(
            lambda: len(daemon.query_json("SELECT id FROM scores")) == scores_before + 1, 30, what="the marker scored"
        )
        metrics = _metrics(daemon)
        assert _metric(metrics, 'tracescorer_assembly_traces_total{pass="late"') == 0
        assert _metric(metrics, "tracescorer_score_results_total{") == scores_before + 1
    finally:
        assert daemon.stop() == 0, daemon.log()
