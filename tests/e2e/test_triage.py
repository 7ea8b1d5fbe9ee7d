"""Triage through the daemon: a Collector-like feed sent with the OpenTelemetry SDK.

Plain service traces are skipped (never decoded or assembled; counted in skipped_traces); an
agent trace keeps every span, also the plain ones sent before its agent spans (read back from the
segment log) and after them. The tests read what a trace kept in its assembly record and as span
rows (``store.spans: agent``: the span-rows feed triages the same way); ``store.spans: all``
stores every span as a row.
"""

from __future__ import annotations

import asyncio
import urllib.request
from collections.abc import Sequence
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.trace import SpanKind
from prometheus_client.parser import text_string_to_metric_families
from support.clock import ManualClock
from support.daemon import (
    DaemonProcess,
    app_metric,
    config_dict,
    running_app,
    settings_for,
    settled,
    wait_for,
    wait_for_async,
)
from support.db import fetch
from support.otlp import log_exporter, span_exporter, tracer

AGENT_ROWS = {"spans": "agent"}  # span rows of what triage keeps: what the tests read
ASSEMBLED = "SELECT trace_id, span_count, log_count FROM assembled_traces"  # what assembly got of each trace
GENAI = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o-mini", "gen_ai.provider.name": "openai"}


def _send(grpc_port: int) -> dict[str, str]:
    """A plain checkout trace, then an agent trace whose database span ends (and is exported)
    before its model call and whose HTTP root ends after it; each span is its own request."""
    ids: dict[str, str] = {}
    exporter = span_exporter("grpc", grpc_endpoint=f"127.0.0.1:{grpc_port}")
    with tracer(exporter, service="checkout") as t:
        with t.start_as_current_span("GET /cart", kind=SpanKind.SERVER, attributes={"http.request.method": "GET"}) as s:
            with t.start_as_current_span("SELECT carts", kind=SpanKind.CLIENT, attributes={"db.system.name": "pg"}):
                pass
            ids["plain"] = f"{s.get_span_context().trace_id:032x}"
    exporter = span_exporter("grpc", grpc_endpoint=f"127.0.0.1:{grpc_port}")
    with tracer(exporter, service="support-bot") as t:
        with t.start_as_current_span(
            "POST /ask", kind=SpanKind.SERVER, attributes={"http.request.method": "POST"}
        ) as s:
            with t.start_as_current_span("SELECT faq", kind=SpanKind.CLIENT, attributes={"db.system.name": "pg"}):
                pass
            with t.start_as_current_span("chat gpt-4o-mini", kind=SpanKind.CLIENT, attributes=GENAI):
                pass
            ids["agent"] = f"{s.get_span_context().trace_id:032x}"
    return ids


async def test_plain_traces_are_skipped_and_an_agent_trace_keeps_all_its_spans(tmp_path):
    settings = settings_for(tmp_path, store=AGENT_ROWS, assembly={"idle_s": 0.5})
    async with running_app(settings) as app:
        ids = await asyncio.to_thread(_send, app.grpc_port)
        queries = await settled(app)

        async def run_rows() -> list[tuple[Any, ...]]:
            return await fetch(queries, "SELECT trace_id FROM runs")

        runs = await wait_for_async(run_rows, 30, what="the agent trace's run")
        spans = await fetch(queries, "SELECT trace_id, name FROM spans ORDER BY name")
        assembled = await fetch(queries, ASSEMBLED)
        skipped = await fetch(queries, "SELECT trace_id, service_name, span_count FROM skipped_traces")
        read_back = await app_metric(app, "tracescorer_triage_items_total", signal="spans", decision="read_back")
        skipped_n = await app_metric(app, "tracescorer_triage_items_total", signal="spans", decision="skipped")
    assert [r[0] for r in runs] == [ids["agent"]]
    # every span of the agent trace: the database span sent before the model call came back
    assert assembled == [(ids["agent"], 3, 0)]
    assert spans == [
        (ids["agent"], "POST /ask"),
        (ids["agent"], "SELECT faq"),
        (ids["agent"], "chat gpt-4o-mini"),
    ]
    # the plain trace: one row per request it had spans skipped in; the agent trace's first span too
    plain = sorted((s[1], s[2]) for s in skipped if s[0] == ids["plain"])
    assert plain == [("checkout", 1), ("checkout", 1)]
    assert {s[0] for s in skipped} == {ids["plain"], ids["agent"]}
    assert read_back == 1 and skipped_n == 3


async def test_a_restart_keeps_what_triage_knew_of_a_trace(tmp_path):
    """A trace's plain spans are skipped, the daemon restarts, then its agent span comes: the new
    start read the log's handled requests again, so the plain spans come back into the run."""
    settings = settings_for(tmp_path, store=AGENT_ROWS, assembly={"idle_s": 0.5})
    async with running_app(settings) as app:
        exporter = span_exporter("grpc", grpc_endpoint=f"127.0.0.1:{app.grpc_port}")

        def before() -> Any:
            with tracer(exporter, service="support-bot") as t:
                with t.start_as_current_span("POST /ask", kind=SpanKind.SERVER) as root:
                    with t.start_as_current_span("SELECT faq", attributes={"db.system.name": "pg"}):
                        pass
                    return root.get_span_context()

        root = await asyncio.to_thread(before)
        await settled(app)
        assert await app_metric(app, "tracescorer_triage_items_total", signal="spans", decision="skipped") == 2
    async with running_app(settings) as app:
        exporter = span_exporter("grpc", grpc_endpoint=f"127.0.0.1:{app.grpc_port}")

        def after() -> None:
            parent = trace.set_span_in_context(trace.NonRecordingSpan(root))
            with tracer(exporter, service="support-bot") as t:
                with t.start_as_current_span(
                    "chat gpt-4o-mini", context=parent, kind=SpanKind.CLIENT, attributes=GENAI
                ):
                    pass

        await asyncio.to_thread(after)
        queries = await settled(app)

        async def run_rows() -> list[tuple[Any, ...]]:
            return await fetch(queries, "SELECT trace_id FROM runs")

        runs = await wait_for_async(run_rows, 30, what="the run")
        spans = await fetch(queries, "SELECT name FROM spans ORDER BY name")
        assembled = await fetch(queries, ASSEMBLED)
    assert runs == [(f"{root.trace_id:032x}",)]
    assert assembled == [(f"{root.trace_id:032x}", 3, 0)]
    assert [s[0] for s in spans] == ["POST /ask", "SELECT faq", "chat gpt-4o-mini"]


class _Switch(SpanExporter):
    """Exports to whichever daemon runs now (a span open across a restart)."""

    def __init__(self) -> None:
        self.to: SpanExporter | None = None

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        assert self.to is not None
        return self.to.export(spans)


async def test_a_restart_keeps_which_traces_hold_agent_content_for_their_later_root(tmp_path):
    """The model call is exported, the daemon restarts, and the HTTP root ends later than
    ``triage.window_s`` after it: the new start learnt again that the trace holds agent content
    (from the log's requests of the last ``assembly.max_wait_s``), so the root joins the run."""
    settings = settings_for(
        tmp_path, store=AGENT_ROWS, triage={"window_s": 0.5}, assembly={"idle_s": 0.5, "max_wait_s": 30}
    )
    clock = ManualClock()
    switch = _Switch()
    with tracer(switch, service="support-bot") as t:
        async with running_app(settings, clock) as app:
            switch.to = span_exporter("grpc", grpc_endpoint=f"127.0.0.1:{app.grpc_port}")
            root = t.start_span("POST /ask", kind=SpanKind.SERVER)

            def chat() -> None:
                with t.start_as_current_span(
                    "chat gpt-4o-mini", context=trace.set_span_in_context(root), kind=SpanKind.CLIENT, attributes=GENAI
                ):
                    pass

            await asyncio.to_thread(chat)
            await settled(app)
        clock.advance(1.0)  # longer than triage.window_s: the root ends after it
        async with running_app(settings, clock) as app:
            switch.to = span_exporter("grpc", grpc_endpoint=f"127.0.0.1:{app.grpc_port}")
            await asyncio.to_thread(root.end)
            await _assert_one_whole_run(await settled(app), f"{root.get_span_context().trace_id:032x}", clock)


async def _assert_one_whole_run(queries: Any, trace_id: str, clock: ManualClock) -> None:
    """The trace's one run is stored, complete, with both spans (the HTTP root and the model call),
    once ``assembly.idle_s`` (0.5 s) passed on ``clock`` after its last span."""

    async def run_rows() -> list[tuple[Any, ...]]:
        clock.advance(0.5)
        return await fetch(queries, "SELECT trace_id, attributes FROM runs")

    ((run_trace, attributes),) = await wait_for_async(run_rows, 30, interval_s=0.1, what="the run")
    spans = await fetch(queries, "SELECT name FROM spans ORDER BY name")
    assert run_trace == trace_id
    assert await fetch(queries, ASSEMBLED) == [(trace_id, 2, 0)]
    assert [s[0] for s in spans] == ["POST /ask", "chat gpt-4o-mini"]
    assert "tracescorer.incomplete" not in attributes


def _emit_events(grpc_endpoint: str, span: trace.SpanContext) -> None:
    """A model call's GenAI events as log records (the legacy OpenAI instrumentation's way)."""
    provider = LoggerProvider(resource=Resource.create({"service.name": "support-bot"}))
    provider.add_log_record_processor(
        SimpleLogRecordProcessor(log_exporter("grpc", grpc_endpoint=grpc_endpoint))  # type: ignore[arg-type]
    )
    logger = provider.get_logger("support.llm")
    context = trace.set_span_in_context(trace.NonRecordingSpan(span))
    logger.emit(context=context, event_name="gen_ai.user.message", body={"content": "What is 2+2?"})
    logger.emit(
        context=context,
        event_name="gen_ai.choice",
        body={"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "4"}},
    )
    provider.shutdown()


@pytest.mark.parametrize("order", ["logs_first", "spans_first"])
async def test_a_trace_whose_genai_content_is_only_in_log_records_keeps_its_run(tmp_path, order):
    """The spans say nothing of GenAI (no marker: skipped on their own); the model call's events
    come as log records, before the spans end or after they were exported. Either way the run is
    stored with its spans, as ``store.spans: all`` would have it."""
    settings = settings_for(tmp_path, store=AGENT_ROWS, assembly={"idle_s": 0.5})
    async with running_app(settings) as app:
        exporter = span_exporter("grpc", grpc_endpoint=f"127.0.0.1:{app.grpc_port}")

        def spans() -> trace.SpanContext:
            with tracer(exporter, service="support-bot") as t:
                with t.start_as_current_span("POST /ask", kind=SpanKind.SERVER):
                    with t.start_as_current_span(
                        "chat gpt-4o-mini", kind=SpanKind.CLIENT, attributes={"server.address": "models.local"}
                    ) as chat:
                        if order == "logs_first":
                            _emit_events(f"127.0.0.1:{app.grpc_port}", chat.get_span_context())
                        return chat.get_span_context()

        chat = await asyncio.to_thread(spans)
        if order == "spans_first":
            await settled(app)
            assert await app_metric(app, "tracescorer_triage_items_total", signal="spans", decision="skipped") == 2
            await asyncio.to_thread(_emit_events, f"127.0.0.1:{app.grpc_port}", chat)
        queries = await settled(app)

        async def run_rows() -> list[tuple[Any, ...]]:
            return await fetch(queries, "SELECT trace_id, input_messages, output FROM runs")

        runs = await wait_for_async(run_rows, 30, what="the run")
        spans_stored = await fetch(queries, "SELECT name FROM spans ORDER BY name")
        records = await fetch(queries, "SELECT event_name FROM log_records ORDER BY event_name")
        assembled = await fetch(queries, ASSEMBLED)
    ((trace_id, input_messages, output),) = runs
    assert trace_id == f"{chat.trace_id:032x}"
    assert assembled == [(trace_id, 2, 2)]
    assert "What is 2+2?" in input_messages and '"4"' in output
    assert [s[0] for s in spans_stored] == ["POST /ask", "chat gpt-4o-mini"]
    assert [r[0] for r in records] == ["gen_ai.choice", "gen_ai.user.message"]


def _marker_less_spans(grpc_endpoint: str) -> trace.SpanContext:
    with tracer(span_exporter("grpc", grpc_endpoint=grpc_endpoint), service="support-bot") as t:
        with t.start_as_current_span("POST /ask", kind=SpanKind.SERVER):
            with t.start_as_current_span(
                "chat gpt-4o-mini", kind=SpanKind.CLIENT, attributes={"server.address": "models.local"}
            ) as chat:
                return chat.get_span_context()


async def test_a_root_ending_after_the_triage_window_still_joins_its_agent_trace(tmp_path):
    """The model call is exported, then the HTTP root ends later than ``triage.window_s`` (but
    within ``assembly.max_wait_s``, which assembly waits for a root): the root is kept, so the run
    is assembled complete with it, as ``store.spans: all`` would have it."""
    settings = settings_for(
        tmp_path, store=AGENT_ROWS, triage={"window_s": 0.5}, assembly={"idle_s": 0.5, "max_wait_s": 20}
    )
    clock = ManualClock()
    async with running_app(settings, clock) as app:
        exporter = span_exporter("grpc", grpc_endpoint=f"127.0.0.1:{app.grpc_port}")
        provider_ready = asyncio.Event()
        root_may_end = asyncio.Event()
        loop = asyncio.get_running_loop()
        trace_id: list[int] = []

        def send() -> None:
            with tracer(exporter, service="support-bot") as t:
                with t.start_as_current_span("POST /ask", kind=SpanKind.SERVER) as root:
                    trace_id.append(root.get_span_context().trace_id)
                    with t.start_as_current_span("chat gpt-4o-mini", kind=SpanKind.CLIENT, attributes=GENAI):
                        pass
                    loop.call_soon_threadsafe(provider_ready.set)
                    asyncio.run_coroutine_threadsafe(root_may_end.wait(), loop).result(30)

        sending = asyncio.create_task(asyncio.to_thread(send))
        await asyncio.wait_for(provider_ready.wait(), 30)
        await settled(app)  # the model call was triaged: its trace holds agent content
        clock.advance(1.0)  # longer than triage.window_s: the root ends after it
        root_may_end.set()
        await sending
        await _assert_one_whole_run(await settled(app), f"{trace_id[0]:032x}", clock)


async def test_store_spans_all_stores_every_span_as_a_row(tmp_path):
    """``store.spans: all``: the plain trace's spans get rows too; triage still keeps the plain
    trace out of assembly, and counts it in ``skipped_traces`` as without span rows."""
    settings = settings_for(tmp_path, store={"spans": "all"}, assembly={"idle_s": 0.5})
    async with running_app(settings) as app:
        ids = await asyncio.to_thread(_send, app.grpc_port)
        queries = await settled(app)

        async def run_rows() -> list[tuple[Any, ...]]:
            return await fetch(queries, "SELECT trace_id FROM runs")

        runs = await wait_for_async(run_rows, 30, what="the agent trace's run")
        spans = await fetch(queries, "SELECT trace_id, count(*) FROM spans GROUP BY ALL")
        assembled = await fetch(queries, "SELECT trace_id FROM assembled_traces")
        skipped = await fetch(queries, "SELECT DISTINCT trace_id FROM skipped_traces")
    assert sorted(spans) == sorted([(ids["plain"], 2), (ids["agent"], 3)])
    assert runs == assembled == [(ids["agent"],)]
    assert {s[0] for s in skipped} == {ids["plain"], ids["agent"]}


def _read_back(daemon: DaemonProcess) -> float:
    """Spans read back by triage, the worker processes' included (from /metrics)."""
    with urllib.request.urlopen(daemon.http_url + "/metrics", timeout=10) as resp:
        metrics = resp.read().decode()
    return sum(
        sample.value
        for family in text_string_to_metric_families(metrics)
        for sample in family.samples
        if sample.name == "tracescorer_triage_items_total" and sample.labels.get("decision") == "read_back"
    )


def test_explain_and_runs_unmatched_name_a_skipped_trace(tmp_path):
    """As deployed (``tracescorer serve`` with worker processes, each triaging its share of the
    traces). Also: GenAI log records after marker-less spans keep the run in a worker process
    (the spans, skipped, are read back when the trace's log records come)."""
    daemon = DaemonProcess(
        tmp_path, config_dict(tmp_path, store=AGENT_ROWS, workers={"count": 2}, assembly={"idle_s": 0.3})
    ).start()
    try:
        ids = _send(int(daemon.grpc_endpoint.rsplit(":", 1)[1]))
        wait_for(
            lambda: daemon.query_json("SELECT count(*) AS n FROM runs")[0]["n"] == 1, 30, what="the agent trace's run"
        )
        explained = daemon.cli("explain", ids["plain"])
        assert explained.returncode == 0, explained.stderr
        assert f"trace {ids['plain']}" in explained.stdout
        assert "skipped by triage: 2 span(s) and 0 log record(s) in 2 request(s) from checkout" in explained.stdout
        assert "triage.window_s=60s" in explained.stdout
        prefix = daemon.cli("explain", ids["plain"][:10])  # a prefix of a skipped trace's id resolves too
        assert "skipped by triage" in prefix.stdout, prefix.stderr
        unmatched = daemon.cli("runs", "--unmatched")
        assert unmatched.returncode == 0, unmatched.stderr
        # the agent trace had its first span skipped, and the plain one: both named in the count
        assert "# and 2 trace(s) skipped by triage" in unmatched.stderr

        # GenAI log records after marker-less spans, in a worker process
        daemon.settled()
        before = _read_back(daemon)
        chat = _marker_less_spans(daemon.grpc_endpoint)
        _emit_events(daemon.grpc_endpoint, chat)
        daemon.settled()
        trace_id = f"{chat.trace_id:032x}"
        (run,) = wait_for(lambda: daemon.runs(trace_id=trace_id), 60, what="the run")
        # the span-rows feed writes them after the pipeline, at its own pace
        query = f"SELECT name FROM spans WHERE trace_id = '{trace_id}' ORDER BY name"
        spans = wait_for(lambda: rows if len(rows := daemon.query_json(query)) >= 2 else None, 60, what="span rows")
        read_back = _read_back(daemon) - before
    finally:
        assert daemon.stop() == 0, daemon.log()[-3000:]
    assert run["trace_id"] == trace_id
    assert [m["content"] for m in run["input_messages"]] == ["What is 2+2?"]
    assert [m["content"] for m in run["output"]] == ["4"]
    assert [s["name"] for s in spans] == ["POST /ask", "chat gpt-4o-mini"]
    assert read_back == 2  # both spans were skipped, then read back
